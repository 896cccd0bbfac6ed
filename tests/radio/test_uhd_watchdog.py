"""The watchdog around radio calls (radio/uhd_watchdog.py, issue 25 item 4): a call that does not return is
reported as a hung radio within its limit while the caller's other threads keep running, its errors reach
the caller, and a failed radio's flowgraph is neither stopped nor destroyed."""
import threading
import time

import pytest
from gnuradio import blocks, gr

from otafl_sdr.radio.uhd_watchdog import RadioHung, guarded, park, parked

pytestmark = [pytest.mark.gnuradio]


def test_a_hung_call_is_a_radio_fault_within_its_limit():
    release = threading.Event()
    t = time.monotonic()
    with pytest.raises(RadioHung, match="client 0 get_time_now did not return within 0.3 s"):
        guarded(lambda: release.wait(30), "client 0 get_time_now", timeout_s=0.3)
    assert 0.3 <= time.monotonic() - t < 2.0
    release.set()
    assert isinstance(RadioHung("x"), RuntimeError)           # every caller's 'except RuntimeError' reports it


def test_results_and_errors_reach_the_caller():
    assert guarded(lambda: 42, "x") == 42
    with pytest.raises(RuntimeError, match="rpc::timeout"):
        guarded(lambda: (_ for _ in ()).throw(RuntimeError("rpc::timeout")), "x")


def test_a_parked_flowgraph_is_neither_stopped_nor_destroyed():
    """Stopping a flowgraph whose USRP died ran gr-uhd's usrp_sink::stop() in a block executor's destructor,
    which threw and aborted the process (radio/uhd_watchdog.py): a parked flowgraph keeps running (idle) and
    its blocks are kept. Shown on a burst source of the air's kind: a burst posted after parking still flows."""
    import numpy as np

    from otafl_sdr.radio.uhd_burst import TimedBurstSource
    tb = gr.top_block()
    src, sink = TimedBurstSource(), blocks.vector_sink_c()
    tb.connect(src, sink)
    tb.start()
    before = parked()
    park(tb, src, sink)
    assert parked() == before + 3
    time.sleep(0.5)                               # (a stop on another thread would have ended it by now)
    src.send(np.ones(1000, np.complex64), None)
    deadline = time.monotonic() + 10
    while len(sink.data()) < 1000 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(sink.data()) == 1000               # still running
