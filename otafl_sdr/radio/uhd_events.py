"""Counting UHD's asynchronous events per round, so that a round with any of them is reported faulty
and never silently used (issue 3, item 3).

Two sources of events:

* TX: every ``gr.uhd.usrp_sink`` publishes on its ``async_msgs`` message port a PMT pair
  ``(uhd_async_msg . dict)`` whose ``event_code`` entry is a list of symbols among
  :data:`TX_EVENTS` (gr-uhd's ``usrp_sink_impl::async_event_loop``). ``burst_ack`` is the good news (a
  burst ended cleanly); everything else is a fault. :class:`AsyncEventCounter` is a message-only
  GNU Radio block that counts them by type (a handler, no per-sample work).
* RX: ``usrp_source`` reports overflows ('O' on the console) only by tagging a fresh ``rx_time`` after the
  gap, and a late stream command ('L') by delivering no samples. :func:`rx_tag_faults` reads the tags
  of a captured burst window and counts both.

:func:`summarise` turns the counts into ``(ok, reason)``, e.g. ``(False, "uhd: late command x2")``.
"""
from __future__ import annotations

import threading

import pmt
from gnuradio import gr

ASYNC_PORT = "async_msgs"          # message port of gr-uhd's usrp_sink
ASYNC_MSG_KEY = "uhd_async_msg"
EVENT_CODE_KEY = "event_code"
CHANNEL_KEY = "channel"
TIME_SPEC_KEY = "time_spec"
RX_TIME_KEY = "rx_time"            # tag of usrp_source: (uint64 secs, double frac) of the tagged sample

BURST_ACK = "burst_ack"
# fault name -> words used in Reception.reason ("uhd: late command x2"); order = order in the reason
FAULT_LABELS = {
    "time_error": "late command",                       # TX burst whose tx_time had already passed
    "underflow": "underflow",
    "underflow_in_packet": "underflow in packet",
    "seq_error": "sequence error",
    "seq_error_in_burst": "sequence error in burst",
    "rx_late_command": "rx late command",               # capture did not start at the commanded time
    "rx_overflow": "overflow",                          # 'O': samples lost inside the capture window
    "rx_timeout": "rx timeout",                         # fewer samples than commanded arrived
    "missing_burst_ack": "no burst ack",                # a radio never confirmed the end of its burst
    "dac_clip": "burst beyond DAC full scale",          # a burst would clip (|x| > 1): not sent
    "unknown_event": "unknown async event",
}
TX_EVENTS = (BURST_ACK, "underflow", "underflow_in_packet", "seq_error", "seq_error_in_burst", "time_error")


def parse_async_msg(msg) -> tuple[list[str], int | None, float | None]:
    """One ``async_msgs`` message -> (event names, channel, event time in s or None).

    Unknown event symbols are returned as ``"unknown_event"``; a message that is not a
    ``(uhd_async_msg . dict)`` pair gives ``["unknown_event"]``."""
    if not (pmt.is_pair(msg) and pmt.is_symbol(pmt.car(msg))
            and pmt.symbol_to_string(pmt.car(msg)) == ASYNC_MSG_KEY):
        return ["unknown_event"], None, None
    value = pmt.cdr(msg)
    codes = pmt.dict_ref(value, pmt.intern(EVENT_CODE_KEY), pmt.PMT_NIL)
    events: list[str] = []
    while pmt.is_pair(codes):
        name = pmt.symbol_to_string(pmt.car(codes)) if pmt.is_symbol(pmt.car(codes)) else ""
        events.append(name if name in TX_EVENTS else "unknown_event")
        codes = pmt.cdr(codes)
    if not events:
        events = ["unknown_event"]
    chan = pmt.dict_ref(value, pmt.intern(CHANNEL_KEY), pmt.PMT_NIL)
    channel = int(pmt.to_uint64(chan)) if pmt.is_integer(chan) or pmt.is_uint64(chan) else None
    return events, channel, event_time(pmt.dict_ref(value, pmt.intern(TIME_SPEC_KEY), pmt.PMT_NIL))


def event_time(ts) -> float | None:
    """An async message's ``time_spec`` in seconds: gr-uhd 3.10 sends the pair
    ``(long full_secs . double frac_secs)`` (``usrp_sink_impl::async_event_loop``); a 2-tuple is read too."""
    if pmt.is_tuple(ts) and pmt.length(ts) == 2:
        secs, frac = pmt.tuple_ref(ts, 0), pmt.tuple_ref(ts, 1)
    elif pmt.is_pair(ts) and not pmt.is_null(ts):
        secs, frac = pmt.car(ts), pmt.cdr(ts)
    else:
        return None
    if not (pmt.is_integer(secs) or pmt.is_uint64(secs)) or not pmt.is_real(frac):
        return None
    whole = pmt.to_long(secs) if pmt.is_integer(secs) else pmt.to_uint64(secs)
    return float(whole) + pmt.to_double(frac)


class AsyncEventCounter(gr.basic_block):
    """Message-only block: connect ``usrp_sink`` port ``async_msgs`` to this block's ``async_msgs``.

    Counts events by name and by channel (the message's ``channel``: the index of the channel on the
    usrp_sink's streamer, i.e. the block's port), thread-safely: two radios on one multi-channel block
    (two clients on one E320) each wait for their own channel's ``burst_ack``, so one channel's ack never
    satisfies the other's (issue 25, item 5). :meth:`take` returns the counts since the last call and
    resets them (call once per round); :meth:`wait_for` blocks until ``n`` events of a kind arrived.
    ``channel=None`` in either means every channel together (a single-channel block)."""

    def __init__(self, label: str = "radio"):
        gr.basic_block.__init__(self, name=f"async_event_counter_{label}", in_sig=None, out_sig=None)
        self.label = label
        self._counts: dict[int, dict[str, int]] = {}
        self._cond = threading.Condition()
        self.message_port_register_in(pmt.intern(ASYNC_PORT))
        self.set_msg_handler(pmt.intern(ASYNC_PORT), self._handle)

    def _handle(self, msg) -> None:
        events, chan, _when = parse_async_msg(msg)
        with self._cond:
            mine = self._counts.setdefault(0 if chan is None else int(chan), {})
            for e in events:
                mine[e] = mine.get(e, 0) + 1
            self._cond.notify_all()

    def _merged(self, channel: int | None) -> dict[str, int]:
        if channel is not None:
            return dict(self._counts.get(int(channel), {}))
        out: dict[str, int] = {}
        for c in self._counts.values():
            for k, v in c.items():
                out[k] = out.get(k, 0) + v
        return out

    def counts(self, channel: int | None = None) -> dict[str, int]:
        with self._cond:
            return self._merged(channel)

    def take(self, channel: int | None = None) -> dict[str, int]:
        """The counts since the last take (of this channel, or of every channel) and reset them."""
        with self._cond:
            out = self._merged(channel)
            if channel is None:
                self._counts = {}
            else:
                self._counts.pop(int(channel), None)
            return out

    def wait_for(self, event: str, n: int, timeout_s: float, channel: int | None = None) -> bool:
        """True once ``n`` events named ``event`` were counted on ``channel`` (None: on all channels
        together) since the last take, False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._merged(channel).get(event, 0) >= n, timeout=timeout_s)


def rx_tag_faults(tags, n_expected: int, n_received: int, start_time: float | None,
                  rate: float) -> dict[str, int]:
    """Faults of one timed capture from its tags.

    tags: the capture's tags (``gr.tag_t``, offsets relative to the first captured sample);
    n_expected: samples commanded (STREAM_MODE_NUM_SAMPS_AND_DONE); n_received: samples that arrived;
    start_time: commanded time of the first sample (s), or None for an untimed capture; rate: sample rate.

    The first ``rx_time`` tag must sit on sample 0 at ``start_time`` (to half a sample), else the stream
    command was late (``rx_late_command``); every further ``rx_time`` tag marks a gap after an overflow
    (``rx_overflow``); a short capture is ``rx_timeout``."""
    faults: dict[str, int] = {}
    times = []
    for t in tags:
        if pmt.symbol_to_string(t.key) != RX_TIME_KEY:
            continue
        v = t.value
        times.append((int(t.offset), float(pmt.to_uint64(pmt.tuple_ref(v, 0))) + pmt.to_double(pmt.tuple_ref(v, 1))))
    times.sort()
    if n_received < n_expected:
        faults["rx_timeout"] = 1
    if times:
        off0, t0 = times[0]
        if start_time is not None and (off0 != 0 or abs(t0 - start_time) > 0.5 / rate):
            faults["rx_late_command"] = 1
        if len(times) > 1:
            faults["rx_overflow"] = len(times) - 1
    elif n_received > 0 and start_time is not None:
        faults["rx_late_command"] = 1          # samples without a time stamp: cannot trust the window
    return faults


def merge_counts(*counts: dict[str, int]) -> dict[str, int]:
    """Sum several count dicts, dropping ``burst_ack`` (not a fault) and zero entries."""
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            if k != BURST_ACK and v:
                out[k] = out.get(k, 0) + int(v)
    return out


def summarise(faults: dict[str, int]) -> tuple[bool, str]:
    """(ok, reason): ok only if no fault was counted; reason like ``"uhd: late command x2, underflow x1"``."""
    faults = {k: v for k, v in faults.items() if k != BURST_ACK and v}
    if not faults:
        return True, ""
    order = list(FAULT_LABELS)
    keys = sorted(faults, key=lambda k: (order.index(k) if k in order else len(order), k))
    return False, "uhd: " + ", ".join(f"{FAULT_LABELS.get(k, k)} x{faults[k]}" for k in keys)
