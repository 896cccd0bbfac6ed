"""The pieces of one timed uhd exchange that must not stall the interpreter or mix up radios (issue 25,
items 4, 5, 7), shared by the in-process air (uhd_air.py) and a node's own radio (uhd_radio.py).

* Waiting for a capture reads the vector sink's item counter (``nitems_read``: a number, no copy), never its
  data: ``vector_sink_c.data()`` copies the whole capture into a Python list under the GIL (10-20 ms per
  320k samples, 70-120 ms per 2M) and the old loops did that every 5 ms, starving every other thread
  (heartbeats, burst-ack handlers). The samples are read once, when the capture is complete
  (:func:`wait_for_items`, :func:`read_capture`).
* Burst acknowledgements are per radio channel: a multi-channel ``usrp_sink`` (two clients on one E320)
  reports each channel's ``burst_ack`` with that channel's index, and each radio waits for its own
  (:func:`gather_acks`); one channel's ack never stands for the other's.
* A radio failure after bursts were handed to the radios may have put client data on the air without the
  protective noise (the jammer, a noise-adding client) it was planned with: :func:`failure_undelivered`
  names every transmitter whose clean end was not confirmed, so the release rule books the attempt at the
  noise actually delivered (rounds/accounting.fault_charge) before the run stops.
* The jammer's calibrated delay (its arrival relative to the earliest client, :func:`jammer_delay`) is
  applied to its burst time, as each client's own delay is."""
from __future__ import annotations

import time

import numpy as np

POLL_S = 0.005


def prime_radios(radios, t_now: float, rate: float, sim: bool) -> None:
    """End-of-burst fix for RFNoC devices (X3xx, N3xx, E3xx): gr-uhd's ``usrp_sink.start()`` sends a
    zero-length start-of-burst packet that UHD caches, so the first real burst would go out without its
    end-of-burst (the radio then waits for more samples: an underflow, no ``burst_ack``, and the next
    burst merged into it). Each TX radio (``radios``: the air's, with ``source``, ``counter``, ``block``,
    ``port``, ``role``) therefore sends one short timed burst of zeros that absorbs the cached start-of-burst
    and ends cleanly, and its ``burst_ack`` is awaited: a radio that does not acknowledge it is refused here
    (AirError), before any round is accounted. On UHD's simulator no async messages come (no ack to wait
    for): the primer is sent and the capture that follows clears it. ``t_now``: the receiver's device time."""
    from otafl_sdr.errors import AirError
    from otafl_sdr.radio.uhd_device import ACK_MARGIN_S, PRIMER_LEAD_S, PRIMER_SAMPLES, SIM_EXTRA_WAIT_S
    from otafl_sdr.radio.uhd_events import merge_counts
    t0 = t_now + PRIMER_LEAD_S
    for r in radios:
        r.counter.take()
        r.source.send(np.zeros(PRIMER_SAMPLES, np.complex64), (int(t0), t0 - int(t0)))
    if sim:
        deadline = time.monotonic() + SIM_EXTRA_WAIT_S          # let the simulator take the primer in
        while time.monotonic() < deadline and any(r.block.nitems_read(r.port) < PRIMER_SAMPLES for r in radios):
            time.sleep(0.01)
        return
    wait = PRIMER_LEAD_S + PRIMER_SAMPLES / float(rate) + ACK_MARGIN_S
    deadline = time.monotonic() + wait
    silent = [r.role for r in radios                       # each radio its own channel's ack
              if not r.counter.wait_for("burst_ack", 1, max(0.0, deadline - time.monotonic()), channel=r.port)]
    events = merge_counts(*(r.counter.take() for r in {id(r.counter): r for r in radios}.values()))
    if silent:
        raise AirError(f"uhd air: no burst_ack for the primer burst from {', '.join(silent)} within {wait:.1f} s "
                       f"(events: {dict(events) or 'none'}): the radio does not end timed bursts; check its "
                       f"time source and firmware_notes/uhd_runbook.md")


def wait_for_items(block, base: int, n: int, deadline: float, port: int = 0) -> int:
    """Wait until ``block`` consumed ``n`` items on input ``port`` since its counter read ``base`` or
    ``time.monotonic()`` passed ``deadline``; returns the items consumed (at most ``n``). Only the block's
    item counter is read (no copy of the samples)."""
    got = int(block.nitems_read(port)) - base
    while got < n and time.monotonic() < deadline:
        time.sleep(POLL_S)
        got = int(block.nitems_read(port)) - base
    return min(got, int(n))


def read_capture(sink, base: int, n: int) -> tuple[np.ndarray, list]:
    """The capture held by a ``vector_sink_c`` (reset when it was armed, ``base`` its item counter then):
    its first ``n`` samples, copied once, and its tags with offsets relative to the first sample."""
    samples = np.asarray(sink.data(), dtype=np.complex64)[:int(n)]
    tags = []
    for t in sink.tags():
        t.offset = int(t.offset) - base
        tags.append(t)
    return samples, tags


def gather_acks(senders, deadline: float, sim: bool) -> list[bool]:
    """Per transmitting radio (``counter``: the AsyncEventCounter of its block, ``port``: its channel on that
    block), whether its own channel's ``burst_ack`` came by ``deadline`` (time.monotonic). The simulator
    sends no async messages: every radio counts as acknowledged there (its capture's length is checked)."""
    if sim:
        return [True] * len(senders)
    return [r.counter.wait_for("burst_ack", 1, max(0.0, deadline - time.monotonic()), channel=r.port)
            for r in senders]


def sender_faults(senders, acked: list[bool]) -> dict[str, dict[str, int]]:
    """Each transmitter's own fault counts (its channel's events, and ``missing_burst_ack``), by role."""
    from otafl_sdr.radio.uhd_events import merge_counts
    return {r.role: merge_counts(r.counter.take(r.port), {"missing_burst_ack": 0 if a else 1})
            for r, a in zip(senders, acked)}


def probe_radios(blocks) -> None:
    """An exchange cut short (a capture not complete, an ack missing): ask each radio's block for its device
    time through the watchdog, so a radio that stopped answering mid-exchange raises (a radio failure, its
    unconfirmed noise charged) instead of passing for a lost round that is retried on a dead radio."""
    from otafl_sdr.radio.uhd_watchdog import guarded
    for blk in {id(b): b for b in blocks}.values():
        guarded(lambda b=blk: b.get_time_now(0).get_real_secs(), "a radio's get_time_now")


def failure_undelivered(senders, why: str) -> dict[str, str]:
    """A radio failed after the bursts of ``senders`` were handed to their radios: client data may be on the
    air, and none of these bursts is confirmed to have ended cleanly (the exchange was cut short). Every
    noise source among them (the jammer; a client, whose burst may carry its own noise) -> what happened
    (Reception.undelivered; rounds/accounting.fault_charge books the attempt at channel noise)."""
    out = {}
    for r in senders:
        acked = r.counter is not None and r.counter.counts(r.port).get("burst_ack", 0) > 0
        if not acked:
            out[r.role.replace(" ", "-")] = f"radio failure before its burst was confirmed ({why})"
    return out


def jammer_delay(cfg, clients: int, path=None) -> float:
    """The jammer's calibrated arrival delay in samples relative to the earliest client (the reference of
    every client's pre-compensated delay, calibration/csi.known_offsets); 0 when the calibration holds no
    jammer link. The jammer's burst is sent this much earlier (later when negative), so its noise covers
    the clients' payload slots as planned."""
    from otafl_sdr.calibration.csi import CalibratedCsi
    cal = CalibratedCsi.for_run(cfg, clients, path).file
    if cal.jammer is None or not cal.clients:
        return 0.0
    return float(cal.jammer.delay) - min(float(c.delay) for c in cal.clients)
