"""The release rule of a round, written once for every air (``release``): the round is recorded BEFORE anything
goes on the air, and every further attempt (a retry with fresh noise, a re-send after a receiver or
jammer died) is a further release, booked as its own mechanism before it is sent."""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Callable


from ..errors import UserError
from ..transmission import Mechanism, Reception
from ..transport import Attempt

INFRA_RETRIES = 3            # attempts redone because the receiver / channel / jammer died


@dataclass
class Release:
    reception: Reception
    attempts: int
    stop: str = ""


def release(ledger, plan, it: int, retries: int, enforce: bool, send: Callable[[int], Attempt],
            notes: list, on_recorded: Callable[[], None] = lambda: None,
            ready: Callable[[], str] = lambda: "", secret_noise: bool = True) -> Release:
    """Record the round, then send it (``send(attempt)``) until it is received, retrying a lost burst
    ``retries`` times. Each attempt after the first is a further release of the same updates with fresh
    noise: booked as its own mechanism (``extra["attempt"]``) before it is sent, and skipped when it would
    exceed the budget. An attempt lost because the infrastructure died is redone (at most INFRA_RETRIES
    times), and booked like any other. ``ready()`` waits for the infrastructure before each attempt and
    returns a reason to stop ('' to go on): nothing is booked for an attempt that is never sent.

    Every booking names its release: a release id written in its ledger line before the burst and handed
    to the transport as ``plan.extra["release"]`` (the testbed carries it to the nodes, whose receiver
    echoes it and the server logs each id it received). A round the ledger already holds (a resume after
    a crash between the booking and the checkpoint) is never re-sent under a booking that went out:

    - ``secret_noise`` airs (zmq, uhd: the nodes' noise comes from OS entropy): a re-send is a new
      release, booked afresh under the round's next free attempt number with a new random id (uuid4)
      before it is sent, and refused as a stop when the budget cannot take it. Only the ledger's last
      line, when the sent-journal (``PrivacyLedger.mark_sent``, fsync'ed right before each burst) proves
      it never went on the air, is used as it is.
    - seeded airs (sim, loopback: every sample is a function of the run seed, round and attempt): the
      re-send replays exactly the same samples, the same release; its identical re-record is a no-op and
      its id is deterministic (uuid5 of round and attempt), so such ledgers stay identical run to run."""
    attempt, rid = first_booking(ledger, it, secret_noise, notes)
    mech = _at_attempt(plan.mechanism, attempt)
    rec = Reception(aggregate=None, ok=False, reason="not sent")
    if attempt > 0 and enforce and ledger.would_exceed(mech):
        return Release(rec, 0, f"round {it}: re-sending it after the resume (attempt {attempt}, fresh noise) "
                               f"would exceed the privacy budget privacy.eps={ledger.cfg.eps:g}; stopped")
    ledger.record(mech, release=rid)
    on_recorded()
    tries, infra_failures = 0, 0
    while True:
        stop = ready()
        if stop:
            return Release(rec, tries, stop)
        if tries > 0:
            attempt += 1
            further = _at_attempt(plan.mechanism, attempt)
            if enforce and ledger.would_exceed(further):
                notes.append(f"round {it}: retry {tries} skipped, it would exceed the privacy budget")
                return Release(rec, tries)
            rid = release_id(it, attempt, secret_noise)
            ledger.record(further, release=rid)
        plan.extra["release"] = rid
        if secret_noise:
            ledger.mark_sent(rid, it, attempt)
        sent = send(attempt)
        rec = sent.reception
        if sent.stop:
            return Release(rec, tries, sent.stop)
        tries += 1
        if rec.ok:
            return Release(rec, tries)
        if sent.infrastructure_died:
            infra_failures += 1
            notes.append(f"round {it}: attempt {tries} failed ({rec.reason}); retried once it is back")
            if infra_failures > INFRA_RETRIES:
                return Release(rec, tries, f"round {it}: {rec.reason} {infra_failures} times; stopped "
                                           f"(checkpoint kept)")
            continue
        if tries > retries:
            return Release(rec, tries)


def release_id(it: int, attempt: int, secret_noise: bool) -> str:
    """A release's id: random (uuid4) where the noise is secret, so two physical releases never share
    one; deterministic (uuid5 of round and attempt) on seeded airs, whose replay is the same release."""
    if secret_noise:
        return uuid.uuid4().hex
    return uuid.uuid5(uuid.NAMESPACE_URL, f"otafl-sdr:seeded-release:{int(it)}:{int(attempt)}").hex


def first_booking(ledger, it: int, secret_noise: bool, notes: list) -> tuple[int, str]:
    """(attempt, release id) of round ``it``'s first booking in this process: attempt 0 for a round the
    ledger does not hold, or on a seeded air (an identical replay); on a secret-noise air a held round
    continues at its next free attempt, unless its last booking provably never went out (``unsent``)."""
    if not secret_noise:
        return 0, release_id(it, 0, False)
    if not ledger.has_round(it):
        ledger.open_sent_journal()
        return 0, release_id(it, 0, True)
    unsent = ledger.unsent(it)
    if unsent is not None:
        return int(unsent.get("attempt", 0)), str(unsent["release"])
    attempt = ledger.next_attempt(it)
    notes.append(f"round {it}: already released before the resume; the re-send has fresh noise, so it is "
                 f"booked as a further release (attempt {attempt})")
    return attempt, release_id(it, attempt, True)


def _at_attempt(mech: Mechanism, attempt: int) -> Mechanism:
    if attempt == 0:
        return mech
    return dataclasses.replace(mech, extra={**mech.extra, "attempt": attempt})
