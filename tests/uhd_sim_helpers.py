"""A fresh UHD simulator (or lab of simulators) per test (it keeps claims and stream state between sessions):
wait until a previous one is gone, start it, and tear it down, gone before the next test.

"Gone" is read from the ports a simulator binds on its address (radio/uhd_sim_device.ports_free: a bind
probe, at once), not from UHD's discovery, which waits out its ~0.5 s timeout for every address that is free
(three times per address and test: before, at launch, after). A probe is sound because a stopped simulator's
whole process group has exited when UhdSimulator.stop returns."""
from __future__ import annotations

import contextlib
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
