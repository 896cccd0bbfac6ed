"""A fresh UHD simulator (or lab of simulators) per test (it keeps claims and stream state between sessions):
wait until a previous one is gone, start it, and tear it down, gone before the next test.

"Gone" is read from the ports a simulator binds on its address (radio/uhd_sim_device.ports_free: a bind
probe, at once), not from UHD's discovery, which waits out its ~0.5 s timeout for every address that is free
(three times per address and test: before, at launch, after). A probe is sound because a stopped simulator's
whole process group has exited when UhdSimulator.stop returns."""
from __future__ import annotations

import contextlib
import math
import time

from otafl_sdr.radio.uhd_sim_lab import SimulatedLab, lab_address
from otafl_sdr.radio.uhd_sim_device import DEVICE_ARGS, UhdSimulator, ports_free


def is_gone(address: str) -> bool:
    """No process holds a simulator's ports on ``address`` ("addr=127.0.0.N")."""
    return ports_free(address.split("addr=", 1)[1].split(",", 1)[0])


def wait_until_gone(seconds: float = 15.0, addresses=(DEVICE_ARGS,)) -> None:
    deadline = time.monotonic() + seconds
    while not all(is_gone(a) for a in addresses) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def fresh_simulator(tmp_path, **options):
    wait_until_gone()
    sim = UhdSimulator(log_path=tmp_path / "simulator.log", **options)
    sim.start()
    try:
        yield sim
    finally:
        sim.close()
        wait_until_gone()


@contextlib.contextmanager
def fresh_lab(tmp_path, n: int = 3, **options):
    """A fresh SimulatedLab of ``n`` radios (127.0.0.1 .. 127.0.0.n), every address gone after."""
    addresses = [f"addr={lab_address(i)}" for i in range(n)]
    wait_until_gone(addresses=addresses)
    lab = SimulatedLab(n, log_dir=tmp_path / "lab", **options)
    lab.start()
    try:
        yield lab
    finally:
        lab.close()
        wait_until_gone(addresses=addresses)


def assert_calm_ofdm_link(health: dict) -> None:
    """An OFDM round's link health on the simulator's cable, as calibrated (calibration/link_health.py): the
    reference at 0 dB and 0 rad within the calibration's error, the frame where it was scheduled, no carrier
    offset beyond 4 of its stated standard errors, every subcarrier within 5 of its stated standard errors (the
    stated error itself small: a 1 dB spread at this SNR is ~2 of them, CI saw -1.07 dB), inside every drift limit."""
    from otafl_sdr.calibration.link_health import DriftLimits, drift
    print("link health:", {k: v for k, v in health.items() if k != "reference"})
    assert abs(health["gain_db"]) < 0.3 and abs(health["phase_rad"]) < 0.1 and health["timing_offset"] == 0, health
    assert 0 < health["cfo_std"] < 5e-5 and abs(health["cfo"]) < 4 * health["cfo_std"], health    # 9e-6 here
    assert health["rho"] > 0.9 and health["nmse_pilots"] < 0.05, health
    lo, hi = health["subcarrier_gain_db"]
    se = health["subcarrier_std"]
    assert 0 < se < 0.1, health                                                  # ~0.05 here
    assert 20 * math.log10(1 - 5 * se) < lo <= hi < 20 * math.log10(1 + 5 * se), health
    assert len(health["reference"]) == 52
    assert not drift(health, DriftLimits()), drift(health, DriftLimits())
