"""A radio call that hangs must not stall the process it runs in (issue 25, item 4).

Two ways a USRP that stops answering froze a testbed node's heartbeat, measured on UHD's simulator stopped
with SIGSTOP (the device alive but silent, as a wedged USB or network link looks):

* gr-uhd's calls into the device (``get_time_now``, ``set_gain``, ``issue_stream_cmd``) release the GIL and
  end after UHD's RPC timeout (2 s) with a RuntimeError; a call that does not end at all is bounded here by
  :func:`guarded`, which runs it on a daemon thread and gives up after ``timeout_s`` (:class:`RadioHung`, a
  RuntimeError, so every caller reports it as the radio failure it is);
* destroying the radio's blocks (``usrp_sink`` / ``usrp_source``: the UHD device's destructor talks to the
  device) runs with the GIL held: 18.8 s of a frozen interpreter measured after one failed call, longer
  than the server's dead-node limit, so the node was declared dead before it could report its radio.
  :func:`park` therefore never destroys a failed radio's objects: it keeps them referenced for the life of
  the process (the operating system reclaims them at exit);
* stopping the flowgraph ends each block's thread, whose executor's destructor calls the block's ``stop()``:
  gr-uhd 3.10's ``usrp_sink::stop()`` then sends an end of burst, which on a device that died with a burst
  in flight meets the socket's pending "connection refused" and throws inside that destructor, and the
  process aborts (SIGABRT). :func:`park` therefore never stops the flowgraph either: its radios stay idle
  (no burst is sent to them again, their capture was for a fixed number of samples) until the process ends.
  Runs of the simulator preset with ``air.coherence = measure`` whose simulator was killed mid-run aborted
  in 2 of 4 when park stopped the flowgraph, in 4 of 22 since. Those 4: the sink's own send of the burst in
  flight threw in its work call, and the unwinding ran the same destructor (a second throw): gr-uhd's, out
  of this module's reach; a transmitter in a process of its own would contain it."""
from __future__ import annotations

import ctypes
import threading

RADIO_CALL_TIMEOUT_S = 10.0      # longer than any answer a working USRP gives (UHD's RPC timeout is 2 s)

_PARKED: list = []               # failed radios' objects, never destroyed (see park)


class RadioHung(RuntimeError):
    """A radio call did not return within its time limit."""


def guarded(fn, what: str, timeout_s: float = RADIO_CALL_TIMEOUT_S):
    """``fn()`` on a daemon thread; its result, or its exception re-raised here; :class:`RadioHung` naming
    ``what`` if it does not return within ``timeout_s`` (the thread is left to UHD: it holds no lock of ours)."""
    box: dict = {}
    done = threading.Event()

    def call():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=call, name=f"radio-call:{what}"[:60], daemon=True).start()
    if not done.wait(timeout_s):
        raise RadioHung(f"{what} did not return within {timeout_s:g} s (the radio hangs)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def park(tb, *objects) -> None:
    """A failed radio: keep its flowgraph ``tb`` (running, never stopped) and ``objects`` (its gr-uhd blocks)
    alive for the rest of the process, so that no destructor and no block's ``stop()`` talks to the dead
    device (module doc). Each parked object is leaked on purpose (an extra reference the interpreter's
    shutdown does not drop either)."""
    for o in (tb, *objects):
        if o is not None:
            _PARKED.append(o)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(o))


def parked() -> int:
    """How many objects of failed radios this process keeps."""
    return len(_PARKED)
