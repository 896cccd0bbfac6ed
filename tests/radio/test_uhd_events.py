"""UHD async-event counting, with real GNU Radio message passing (no USRP needed: the messages have
the exact shape gr-uhd's usrp_sink publishes on its async_msgs port)."""
import time

import pmt
import pytest
from gnuradio import blocks, gr

from otafl_sdr.radio.uhd_burst import time_pmt
from otafl_sdr.radio.uhd_events import (AsyncEventCounter, merge_counts, parse_async_msg, rx_tag_faults,
                                        summarise)

pytestmark = [pytest.mark.gnuradio]


def usrp_async_msg(events, channel=0, when=None):
    """The PMT gr-uhd's usrp_sink_impl::async_event_loop builds."""
    ev = pmt.PMT_NIL
    for e in events:
        ev = pmt.list_add(ev, pmt.intern(e))
    value = pmt.dict_add(pmt.make_dict(), pmt.intern("event_code"), ev)
    if when is not None:
        value = pmt.dict_add(value, pmt.intern("time_spec"), time_pmt(when))
    value = pmt.dict_add(value, pmt.intern("channel"), pmt.from_uint64(channel))
    return pmt.cons(pmt.intern("uhd_async_msg"), value)


def test_parse_async_msg_reads_events_channel_time():
    events, chan, when = parse_async_msg(usrp_async_msg(["underflow", "time_error"], channel=1, when=3.5))
    assert events == ["underflow", "time_error"] and chan == 1 and when == pytest.approx(3.5)
    assert parse_async_msg(pmt.intern("junk"))[0] == ["unknown_event"]
    assert parse_async_msg(usrp_async_msg(["frobnicate"]))[0] == ["unknown_event"]


def test_counter_counts_messages_from_a_running_flowgraph():
    tb = gr.top_block()
    counter = AsyncEventCounter("client0")
    strobe = blocks.message_strobe(usrp_async_msg(["time_error"]), 20)   # one every 20 ms
    tb.msg_connect(strobe, "strobe", counter, "async_msgs")
    tb.start()
    try:
        assert counter.wait_for("time_error", 3, timeout_s=10.0)
        post = counter.to_basic_block()._post
        post(pmt.intern("async_msgs"), usrp_async_msg(["burst_ack"]))
        post(pmt.intern("async_msgs"), usrp_async_msg(["underflow", "seq_error_in_burst"]))
        assert counter.wait_for("underflow", 1, timeout_s=10.0)
        assert counter.wait_for("burst_ack", 1, timeout_s=10.0)
    finally:
        tb.stop()
        tb.wait()
    got = counter.take()
    assert got["time_error"] >= 3 and got["underflow"] == 1 and got["seq_error_in_burst"] == 1
    assert got["burst_ack"] == 1
    assert counter.take() == {}                       # take() resets: counts are per round
    assert not counter.wait_for("burst_ack", 1, timeout_s=0.01)


def test_summarise_makes_a_faulty_round_with_a_readable_reason():
    assert summarise({}) == (True, "")
    assert summarise({"burst_ack": 3}) == (True, "")
    ok, reason = summarise(merge_counts({"time_error": 1, "burst_ack": 2}, {"time_error": 1, "rx_overflow": 1}))
    assert not ok and reason == "uhd: late command x2, overflow x1"


def _rx_tag(offset, t):
    tag = gr.tag_t()
    tag.offset, tag.key, tag.value = offset, pmt.intern("rx_time"), time_pmt(t)
    return tag


def test_rx_tags_reveal_late_command_and_overflow():
    rate = 1e6
    assert rx_tag_faults([_rx_tag(0, 2.0)], 1000, 1000, 2.0, rate) == {}
    assert rx_tag_faults([_rx_tag(0, 2.001)], 1000, 1000, 2.0, rate) == {"rx_late_command": 1}
    assert rx_tag_faults([_rx_tag(0, 2.0), _rx_tag(500, 2.0007)], 1000, 1000, 2.0, rate) == {"rx_overflow": 1}
    assert rx_tag_faults([], 1000, 0, 2.0, rate) == {"rx_timeout": 1}
    assert rx_tag_faults([_rx_tag(0, 2.0)], 1000, 10, 2.0, rate) == {"rx_timeout": 1}


def test_rx_tags_survive_a_real_flowgraph():
    """rx_time tags as usrp_source would place them, carried through native blocks to a vector sink."""
    import numpy as np
    x = np.ones(4000, np.complex64)
    src = blocks.vector_source_c(x, False, 1, [_rx_tag(0, 7.0), _rx_tag(3000, 7.01)])
    sink = blocks.vector_sink_c()
    tb = gr.top_block()
    tb.connect(src, blocks.multiply_const_cc(0.5), sink)
    tb.run()
    assert rx_tag_faults(sink.tags(), 4000, len(sink.data()), 7.0, 1e6) == {"rx_overflow": 1}


def test_the_event_time_is_read_from_gr_uhds_pair():
    """gr-uhd 3.10's usrp_sink sends time_spec as the pair (long full_secs . double frac_secs)."""
    value = pmt.dict_add(pmt.make_dict(), pmt.intern("event_code"), pmt.list1(pmt.intern("time_error")))
    value = pmt.dict_add(value, pmt.intern("time_spec"), pmt.cons(pmt.from_long(12), pmt.from_double(0.25)))
    value = pmt.dict_add(value, pmt.intern("channel"), pmt.from_uint64(1))
    events, channel, when = parse_async_msg(pmt.cons(pmt.intern("uhd_async_msg"), value))
    assert events == ["time_error"] and channel == 1 and when == pytest.approx(12.25)
