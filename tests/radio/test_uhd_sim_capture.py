"""The UHD simulator's captures are sample-exact (issue 25, item 3: the simulator's spurious carrier offset).

UHD 4.3's simulator built a timed receive stream's first packet with a timestamp under a DATA_NO_TS header;
UHD's serializer then counted the timestamp in the packet's length without writing it, and the host read two
sc16 zeros after the first packet (371 samples): every later sample came two samples late. A calibration
pilot straddling that gap showed a carrier offset of ~2.5e-7 cycles/sample at 9 sigma and a 2-sample delay.
radio/uhd_sim_daemon.py types such packets DATA_WITH_TS; these tests hold the capture to the transmitted burst
sample by sample and the pilot's offset and delay to zero, over real libuhd, gr-uhd and the simulator."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.radio.uhd_sim_device import NOISE_RMS

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_sim.toml"
REPEATS = 6


def test_a_simulator_capture_is_the_transmitted_burst_sample_for_sample_with_no_offset(uhd_sim):
    from otafl_sdr.calibration.estimation import estimate_link
    from otafl_sdr.calibration.pilots import PilotBurst
    from otafl_sdr.calibration.procedures import SLOT_GAP, Slots
    from otafl_sdr.phy import Modem
    from otafl_sdr.radio.calibration_flowgraphs import UhdLink
    from otafl_sdr.configure.load import load_config

    cfg = load_config(PRESET)
    burst = PilotBurst(Modem(cfg.phy))
    link = UhdLink(cfg)
    link.start()
    try:
        lo, hi = link.delay_search
        slots = Slots.make(1, burst.n_samples, gap=max(SLOT_GAP, hi + 64), tail=hi + 64)
        x = np.zeros(slots.length, dtype=np.complex64)
        x[slots.starts[0]:slots.starts[0] + burst.n_samples] = 0.25 * burst.samples
        caps = [np.asarray(link.exchange(x[None, :]), dtype=np.complex128) for _ in range(REPEATS)]
    finally:
        link.close()
    ests = []
    for y in caps:
        assert len(y) == slots.length
        # sample-exact: what remains after subtracting the burst is the cable's noise, everywhere (a packet
        # boundary that inserted samples leaves the burst's own samples in the residual)
        r = y - x
        # no sample the simulator did not fill: an unfilled stretch is a run of zeros (the old bug left two);
        # one lone zero is the cable's noise quantised to sc16 (P ~ 1.5e-6 a sample: ~8 % over 58k samples)
        zero = y == 0
        assert np.count_nonzero(zero[1:] & zero[:-1]) == 0
        assert np.std(r) == pytest.approx(np.sqrt(2) * NOISE_RMS, rel=0.05)
        rms = np.sqrt(np.mean(np.abs(r[: len(r) // 256 * 256].reshape(-1, 256)) ** 2, axis=1))
        assert rms.max() < 1.3 * np.sqrt(2) * NOISE_RMS               # no block carries displaced signal
        e = estimate_link(y, burst, int(slots.starts[0]) + burst.frame_offset, 0.25, (lo, hi))
        assert e.found and abs(e.delay) < 0.05
        ests.append(e)
    cfo = np.mean([e.cfo for e in ests])
    cfo_se = np.sqrt(np.mean([e.cfo_std ** 2 for e in ests]) / REPEATS)
    assert abs(cfo) < 4 * cfo_se, (cfo, cfo_se)                        # the truth is 0: no carrier on a cable
    assert abs(np.mean([e.h for e in ests]) - 1.0) < 0.01
