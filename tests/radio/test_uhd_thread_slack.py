"""radio/uhd_thread_slack.py: a thread created inside ``device_threads_slack`` (as UHD's control thread is when a
simulated device is opened there) keeps the raised timer slack; the caller gets its own back; disabled, nothing
changes. Each thread reads its own slack from the kernel (prctl PR_GET_TIMERSLACK), real threads."""
from __future__ import annotations

import ctypes
import threading

from otafl_sdr.radio.uhd_thread_slack import PR_GET_TIMERSLACK, SIM_SLACK_NS, device_threads_slack


def _own_slack() -> int:
    return int(ctypes.CDLL(None).prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0))


def _slacks(enabled: bool) -> tuple[int, int, int]:
    """(the caller's slack before, that of a thread created in the block, the caller's after)."""
    before, seen = _own_slack(), {}
    with device_threads_slack(enabled):
        t = threading.Thread(target=lambda: seen.setdefault("slack", _own_slack()))
        t.start()
    t.join(10)
    return before, seen["slack"], _own_slack()


def test_a_thread_created_inside_keeps_the_slack_and_the_caller_gets_its_own_back():
    before, inside, after = _slacks(True)
    assert inside == SIM_SLACK_NS
    assert after == before != SIM_SLACK_NS


def test_disabled_it_changes_nothing():
    before, inside, after = _slacks(False)
    assert inside == before == after
