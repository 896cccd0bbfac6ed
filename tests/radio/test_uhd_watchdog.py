"""The watchdog around radio calls (radio/uhd_watchdog.py, issue 25 item 4): a call that does not return is
reported as a hung radio within its limit while the caller's other threads keep running, its errors reach
the caller, and a failed radio's flowgraph is stopped without its blocks being destroyed."""
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


def test_a_parked_flowgraph_is_stopped_and_its_blocks_kept():
    tb = gr.top_block()
    src, sink = blocks.null_source(gr.sizeof_gr_complex), blocks.null_sink(gr.sizeof_gr_complex)
    tb.connect(src, sink)
    tb.start()
    before = parked()
    park(tb, src, sink)
    assert parked() == before + 3
    deadline = time.monotonic() + 10
    n = sink.nitems_read(0)
    while time.monotonic() < deadline:            # the flowgraph stops on its own thread
        time.sleep(0.2)
        if sink.nitems_read(0) == n:
            break
        n = sink.nitems_read(0)
    assert sink.nitems_read(0) == n
