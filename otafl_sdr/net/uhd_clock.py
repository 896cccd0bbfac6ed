"""The uhd testbed's schedule clock (issue 25, item 5): the server chooses each exchange's burst time t_tx in
UTC seconds from its own host clock, AFTER the handshake in which every radio taking part reports its device
time (the receiver and the jammer in ``armed``, every other transmitter in ``clock_is``), and refuses to
schedule when its clock is off a node's device time by more than ``uhd.clock_tolerance_s``.

A node's device time ``d`` was read at some instant between the server's request (``sent``, server clock)
and the server reading the answer (``got``): the server clock's offset from that device is somewhere in
``[d - got, d - sent]``. Only what that interval proves is refused (the distance from 0 to it beyond the
tolerance), so a slow network or a loaded host never passes for a wrong clock; the estimate reported is the
interval's middle. A device time is UTC on every host (PPS-set from NTP-disciplined clocks, radio/uhd_radio.py),
so a server host whose clock is off schedules bursts in the past (late commands) or seconds ahead (captures
that time out): refused in one line naming the node and the offset, before anything goes on the air.

``OTAFL_NET_CLOCK_SKEW_S`` (fault injection for tests, like net/faults.py's OTAFL_NET_DIE_AT) shifts the
server's schedule clock: ``2.0`` by 2 s in every handshake, ``2.0@3x1`` only in round 3's first handshake.

A refused attempt is lost with nothing sent (``Attempt.unsent``: its booking carries the retry, no second
charge); when every attempt of a round is refused the run stops with the line (checkpoint kept)."""
from __future__ import annotations

import os
import time

SKEW_ENV = "OTAFL_NET_CLOCK_SKEW_S"


_skewed: dict = {}                 # round -> handshakes skewed so far (fault injection)


def injected_skew(round_index: int) -> float:
    """The skew ``OTAFL_NET_CLOCK_SKEW_S`` asks for in this handshake of round ``round_index`` (counts it); 0 if none."""
    spec = os.environ.get(SKEW_ENV, "").strip()
    if not spec:
        return 0.0
    try:
        value, _, where = spec.partition("@")
        if not where:
            return float(value)
        asked_round, _, count = where.partition("x")
        if int(asked_round) != int(round_index) or _skewed.get(int(round_index), 0) >= int(count or 1 << 30):
            return 0.0
        _skewed[int(round_index)] = _skewed.get(int(round_index), 0) + 1
        return float(value)
    except ValueError:
        return 0.0


def server_clock(skew: float = 0.0) -> float:
    """The server's schedule clock: this host's UTC seconds (plus an injected skew, tests only)."""
    return time.time() + skew


def proven_offset(device_time: float, sent: float, got: float) -> tuple[float, float]:
    """(estimated offset of the device's time from the server clock, the part of it the round trip proves:
    0 when the interval [d - got, d - sent] holds 0)."""
    lo, hi = float(device_time) - float(got), float(device_time) - float(sent)
    proven = lo if lo > 0 else (hi if hi < 0 else 0.0)
    return 0.5 * (lo + hi), proven


def clock_refusal(times: dict, sent: float, tolerance: float) -> str:
    """'' when every node's device time agrees with the server clock within ``tolerance`` (s); else one line
    naming the worst node and its offset. ``times``: node -> (device time or None, server clock when read)."""
    worst = None
    for name, (dev, got) in sorted(times.items()):
        if dev is None:
            continue                          # a closed radio: its burst reports the radio failure
        est, proven = proven_offset(dev, sent, got)
        if abs(proven) > tolerance and (worst is None or abs(proven) > abs(worst[2])):
            worst = (name, est, proven)
    if worst is None:
        return ""
    name, est, proven = worst
    side = "behind" if est > 0 else "ahead of"
    return (f"uhd: not scheduled: the server's clock is {abs(est):.3f} s {side} {name}'s device time (at least "
            f"{abs(proven):.3f} s; uhd.clock_tolerance_s = {tolerance:g}); fix the server host's clock (NTP/chrony, "
            f"see firmware_notes/uhd_runbook.md) and resume with --resume")
