"""A round's flowgraph gives its buffers back when the round (or the air) is done, not at Python's next full
garbage collection. GNU Radio's stream buffers are SysV shared-memory segments (the vmcircbuf_sysv_shm
factory), bounded machine-wide by kernel.shmmni (4096): a hier block that keeps itself in its own edge list is
a reference cycle, and a long-lived process (a 200-round lab run, a test worker) then holds every finished
round's buffers until a generation-2 collection, until ``top_block.start`` fails with std::bad_alloc.
Measured with the collector switched off, so only reference counting frees anything."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from otafl_sdr.radio.loopback_air import LoopbackAir

from ofdm_impairment_helpers import EACH, ofdm_cfg, ofdm_plan
from test_front_end_loopback import config, plan_for

pytestmark = [pytest.mark.gnuradio]


def _attached_sysv_segments() -> int:
    with open("/proc/self/maps") as f:
        return sum("SYSV" in line for line in f)


def _single_carrier_round_with_every_front_end():
    cfg = config(dc_offset=0.1, iq_mag_db=0.5, iq_phase_deg=2.0, pa_a_sat=3.0, phase_noise=1e-4, sro_ppm=1.0,
                 doppler_hz=5.0)
    cfg.loopback.rx_cfo, cfg.loopback.rx_phase_noise = 1e-5, 1e-4
    plan = plan_for(K=4, d=2000)
    with LoopbackAir(cfg) as air:
        for rnd in (1, 2):
            plan.round = rnd
            assert air.transmit(plan, np.random.default_rng(rnd)).ok


def _ofdm_round_with_each_front_end():
    for name in ("pa", "cfo", "doppler"):
        cfg = ofdm_cfg(**EACH[name])
        with LoopbackAir(cfg) as air:
            assert air.transmit(ofdm_plan(cfg), np.random.default_rng(3)).ok


@pytest.mark.parametrize("rounds", [_single_carrier_round_with_every_front_end, _ofdm_round_with_each_front_end],
                         ids=["single-carrier", "ofdm"])
def test_a_finished_loopback_air_holds_no_shared_memory_segment(rounds):
    gc.collect()
    before = _attached_sysv_segments()
    gc.disable()
    try:
        rounds()
        left = _attached_sysv_segments() - before
    finally:
        gc.enable()
    assert left == 0, f"{left} SysV segments still attached after the air closed (a reference cycle)"
