"""Issue 25, items 5 and 7: each channel of a multi-channel usrp_sink has its own burst ack (two clients on
one E320: one channel's ack never stands for the other's), the PPS time set names the NEXT edge's second,
and each device family gets its master clock and frame sizes. The acks go through real GNU Radio message
passing into the air's own counter and ack gathering; the messages have the exact shape gr-uhd's
usrp_sink_impl::async_event_loop publishes (UHD's simulator sends no async messages: only hardware shows the
device side, firmware_notes/uhd_simulator.md)."""
import time
from types import SimpleNamespace

import pmt
import pytest
from gnuradio import blocks, gr

from otafl_sdr.radio.uhd_events import AsyncEventCounter
from otafl_sdr.radio.uhd_exchange import failure_undelivered, gather_acks, sender_faults
from otafl_sdr.radio.uhd_radio import pps_second
from otafl_sdr.radio.uhd_settings import device_args, family, master_clock_rate

pytestmark = [pytest.mark.gnuradio]


def usrp_async_msg(events, channel):
    ev = pmt.PMT_NIL
    for e in events:
        ev = pmt.list_add(ev, pmt.intern(e))
    value = pmt.dict_add(pmt.make_dict(), pmt.intern("event_code"), ev)
    value = pmt.dict_add(value, pmt.intern("channel"), pmt.from_uint64(channel))
    return pmt.cons(pmt.intern("uhd_async_msg"), value)


@pytest.fixture
def e320_counter():
    """One AsyncEventCounter for one two-channel usrp_sink (as UhdAir._open builds for two clients on one
    E320), in a running flowgraph; two radios on its ports 0 and 1."""
    tb = gr.top_block()
    counter = AsyncEventCounter("client0+client1")
    other = blocks.message_strobe(usrp_async_msg(["burst_ack"], 7), 100)   # a third channel, acking all along
    tb.msg_connect(other, "strobe", counter, "async_msgs")
    tb.start()
    radios = [SimpleNamespace(role=f"client {i}", counter=counter, port=i) for i in range(2)]
    try:
        yield counter, radios
    finally:
        tb.stop()
        tb.wait()


def _post(counter, events, channel):
    counter.to_basic_block()._post(pmt.intern("async_msgs"), usrp_async_msg(events, channel))


def test_two_clients_on_one_e320_with_one_channels_ack_missing_is_detected(e320_counter):
    counter, radios = e320_counter
    _post(counter, ["burst_ack"], 0)                # channel 0 ended its burst; channel 1 never did
    assert counter.wait_for("burst_ack", 1, 5.0, channel=0)
    t = time.monotonic()
    acked = gather_acks(radios, time.monotonic() + 0.3, sim=False)
    assert acked == [True, False] and time.monotonic() - t >= 0.25
    faults = sender_faults(radios, acked)
    assert faults == {"client 0": {}, "client 1": {"missing_burst_ack": 1}}
    assert counter.counts(7).get("burst_ack", 0) >= 1         # another channel's acks never count for channel 1


def test_each_channels_faults_are_its_own(e320_counter):
    counter, radios = e320_counter
    _post(counter, ["burst_ack"], 0)
    _post(counter, ["underflow", "burst_ack"], 1)
    assert counter.wait_for("burst_ack", 2, 5.0)                   # both channels together
    acked = gather_acks(radios, time.monotonic() + 1.0, sim=False)
    assert acked == [True, True]
    assert sender_faults(radios, acked) == {"client 0": {}, "client 1": {"underflow": 1}}


def test_a_radio_failure_names_every_sender_not_confirmed(e320_counter):
    counter, radios = e320_counter
    _post(counter, ["burst_ack"], 1)
    assert counter.wait_for("burst_ack", 1, 5.0, channel=1)
    jammer = SimpleNamespace(role="jammer", counter=AsyncEventCounter("jammer"), port=0)
    got = failure_undelivered(radios + [jammer], "rpc timeout")
    assert set(got) == {"client-0", "jammer"} and "rpc timeout" in got["jammer"]
    assert failure_undelivered([], "x") == {}          # nothing handed to a radio: nothing released


def test_the_pps_time_set_names_the_next_edges_second():
    # right after the edge of UTC second N: a host clock 5 ms behind reads N - 0.005; 'floor(now) + 1' set
    # the NEXT edge (N + 1) to N, one second off; the edge's own second is the nearest whole second
    for n in (1_700_000_000, 5):
        for host_error in (-0.3, -0.005, 0.0, 0.004, 0.3):
            for latency in (0.0, 0.01):
                assert pps_second(n + host_error + latency) + 1 == n + 1
    assert int(1_700_000_000 - 0.005) + 1 == 1_700_000_000      # the old rule's one-second slip


def test_master_clock_and_frame_sizes_per_family():
    assert family({"type": "b200", "product": "B210"}) == "b200"
    assert family({"type": "x300", "product": "X310"}) == "x300"
    assert family({"type": "n3xx", "product": "n310"}) == "n300"
    assert family({"type": "e3xx", "product": "e320"}) == "e320"
    assert master_clock_rate("b200", 1e6) == 16e6 and master_clock_rate("e320", 1.92e6) == 30.72e6
    assert master_clock_rate("x300", 1e6) == 200e6 and master_clock_rate("x300", 1.92e6) == 184.32e6
    assert master_clock_rate("n300", 1e6) == 125e6 and master_clock_rate("n320", 1e6) == 200e6
    assert master_clock_rate("x300", 3e6) is None       # no clock of the family: left to UHD (and checked)
    args, chosen = device_args("serial=31A0B1C", {"type": "x300", "product": "X310"}, 1e6, sim=False)
    assert args == "serial=31A0B1C,master_clock_rate=200000000,send_frame_size=1472,recv_frame_size=1472"
    assert chosen == {"family": "x300", "master_clock_rate": 200e6, "frame_size": 1472}
    args, _ = device_args("serial=X,master_clock_rate=184.32e6,send_frame_size=8000", {"type": "x300"}, 1e6, False)
    assert args == "serial=X,master_clock_rate=184.32e6,send_frame_size=8000,recv_frame_size=1472"
    assert device_args("serial=B", {"type": "b200", "product": "B210"}, 1e6, False)[0] == \
        "serial=B,master_clock_rate=16000000"                # USB: no frame sizes
    sim = {"type": "e3xx", "product": "e320", "serial": "FA4EDE7", "fpga": "n/a"}
    assert device_args("addr=127.0.0.1", sim, 1e6, sim=False)[0] == "addr=127.0.0.1"     # the simulator's defaults
