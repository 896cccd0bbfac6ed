"""A fresh UHD simulator (or lab of simulators) per test (it keeps claims and stream state between sessions):
wait until a previous one is gone, start it, and tear it down, gone before the next test."""
from __future__ import annotations

import contextlib
import time

from otafl_sdr.radio.uhd_device import find_usrps
from otafl_sdr.radio.uhd_sim_lab import SimulatedLab, lab_address
from otafl_sdr.radio.uhd_sim_device import DEVICE_ARGS, UhdSimulator


def wait_until_gone(seconds: float = 15.0, addresses=(DEVICE_ARGS,)) -> None:
    deadline = time.monotonic() + seconds
    while any(find_usrps(a) for a in addresses) and time.monotonic() < deadline:
        time.sleep(0.3)


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
