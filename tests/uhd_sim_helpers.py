"""A fresh UHD simulator per test (it keeps claims and stream state between sessions): wait until a previous
one is gone, start it, and tear it down, gone before the next test."""
from __future__ import annotations

import contextlib
import time

from otafl_sdr.radio.uhd_air import find_usrps
from otafl_sdr.radio.uhd_simulator import DEVICE_ARGS, UhdSimulator


def wait_until_gone(seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while find_usrps(DEVICE_ARGS) and time.monotonic() < deadline:
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
