"""Which capture a burst lands in, on the simulator's cable (radio/uhd_sim_loopback.py), in this process: the
rules behind tests/radio/test_uhd_sim_lab.py's held-burst round, each case the lab cannot time on demand.

A burst that starts while no capture is reading belongs to the next capture (from its start); the rest of a burst
left open goes where the burst began (never into the next capture); of two bursts sent with no capture between,
the newer is the next capture's."""
from __future__ import annotations

import time

import numpy as np
import pytest

from otafl_sdr.radio import uhd_sim_loopback as cable


@pytest.fixture(autouse=True)
def fresh_cable():
    """The cable's module state (one simulator process's) as new, restored after."""
    saved_round, saved_sinks = dict(cable._ROUND), list(cable._SINKS)
    cable._ROUND.update(epoch=0, buf=np.zeros(0, dtype=np.int32), written=0.0, opened=-1.0, reading=0)
    cable._SINKS.clear()
    try:
        yield
    finally:
        cable._ROUND.clear()
        cable._ROUND.update(saved_round)
        cable._SINKS[:] = saved_sinks


def _capture() -> cable.LoopbackSource:
    time.sleep(cable.JOIN_S + 0.01)            # (sooner: the other RX channel of the same capture)
    return cable.LoopbackSource()


def _burst(value: int, n: int = 100) -> np.ndarray:
    return np.full(2 * n, value, dtype=np.int32)


def test_a_burst_sent_while_no_capture_reads_starts_the_next_capture():
    sink = cable.LoopbackSink()
    first = _capture()
    sink._add(_burst(1))                       # this round's burst
    first.close()                              # the capture handed over
    sink._add(_burst(7, 60), open_burst=True)  # the next round's burst, before its stream command was taken in
    sink._add(_burst(7, 40))
    assert cable._ROUND["buf"][:2].tolist() == [1, 1] and cable._ROUND["buf"].size == 200   # not in the old round
    _capture()
    buf = cable._ROUND["buf"]
    assert buf.size == 200 and np.all(buf == 7)                   # from index 0, whole
    sink._add(_burst(0, 10))                                      # the stream's next packets follow it
    assert sink.pos == 220


def test_the_rest_of_an_open_burst_stays_in_its_own_round():
    sink, other = cable.LoopbackSink(), cable.LoopbackSink()
    first = _capture()
    sink._add(_burst(3), open_burst=True)      # a sounding: the capture holds for the rest
    first.close()                              # ... which came too late (the capture gave up)
    sink._add(_burst(5))                       # the payload: not a new burst, no capture to go to
    _capture()
    other._add(_burst(2))
    assert np.all(cable._ROUND["buf"] == 2)    # the next capture holds only its own bursts
    assert cable._ROUND["buf"].size == 200


def test_of_two_bursts_with_no_capture_between_the_newer_is_the_next_captures():
    sink = cable.LoopbackSink()
    _capture().close()
    sink._add(_burst(4))
    sink._add(_burst(6))
    _capture()
    assert cable._ROUND["buf"].size == 200 and np.all(cable._ROUND["buf"] == 6)


def test_a_second_burst_while_the_capture_reads_follows_the_first():
    sink = cable.LoopbackSink()
    _capture()
    sink._add(_burst(1))
    sink._add(_burst(2))
    assert cable._ROUND["buf"].tolist() == [1] * 200 + [2] * 200
