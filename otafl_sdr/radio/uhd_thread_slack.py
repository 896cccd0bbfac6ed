"""The timer slack of the threads UHD starts when a device is opened (on UHD's simulator).

UHD 4's control endpoint (``chdr_ctrl_endpoint``) runs one thread per opened device (``uhd_ctrl_epNNNN``) that
polls its transport without blocking and, when nothing came, sleeps for 1 ns before polling again
(EttusResearch/uhd issue 514). The sleep lasts the thread's timer slack (50 us by default on Linux): about
20,000 wake-ups a second per device, whether anything happens or not. Measured on this repository's 2-core
machine with five simulated E320s open in one process: 1.08 s of CPU in 3 idle seconds, and 15 s of the
26 s of CPU a session calibration and three coherent rounds of the lab took went to those threads.

A thread inherits the timer slack of the thread that creates it (prctl(2), PR_SET_TIMERSLACK), so a device
opened inside :func:`device_threads_slack` has its control thread sleep up to ``slack_ns`` between polls:
at 1 ms the same five devices used 0.17 s of CPU in 3 idle seconds and their opening 0.48 s instead of
2.36 s, with no slower control round trip (250 ``get_time_now``: 0.075 s against 0.141 s, on a loaded
machine). The caller's own slack is restored on leaving; threads created later (the flowgraph's, the
streamers') keep the default.

Only the simulator's radios are opened this way (``enabled``: ``uhd.simulator``); a real USRP keeps UHD's
own polling (a control reply at most ``slack_ns`` later would stretch every register access). Where the
C library or prctl is not available (not Linux) nothing changes."""
from __future__ import annotations

import contextlib
import ctypes
import sys

PR_SET_TIMERSLACK = 29
PR_GET_TIMERSLACK = 30
SIM_SLACK_NS = 1_000_000          # 1 ms: a simulated radio's control thread polls about 1,000 times a second


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


@contextlib.contextmanager
def device_threads_slack(enabled: bool, slack_ns: int = SIM_SLACK_NS):
    """Within the block, threads this thread creates (a UHD device's, when it is opened here) sleep up to
    ``slack_ns`` past a timer's expiry; this thread's own slack is restored after. ``enabled`` False: no change."""
    prctl = _prctl() if enabled else None
    old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) if prctl is not None else -1
    if old < 0 or prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(int(slack_ns)), 0, 0, 0) != 0:
        yield
        return
    try:
        yield
    finally:
        prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(old), 0, 0, 0)


__all__ = ["PR_GET_TIMERSLACK", "PR_SET_TIMERSLACK", "SIM_SLACK_NS", "device_threads_slack"]
