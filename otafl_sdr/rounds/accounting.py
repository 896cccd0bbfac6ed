"""The release rule of a round, written once for every air (``release``): the round is recorded BEFORE anything
goes on the air, and every further attempt (a retry with fresh noise, a re-send after a receiver or
jammer died) is a further release, booked as its own mechanism before it is sent."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable


from ..errors import UserError
from ..transmission import Reception
from ..transport import Attempt

INFRA_RETRIES = 3            # attempts redone because the receiver / channel / jammer died


@dataclass
class Release:
    reception: Reception
    attempts: int
    stop: str = ""


def release(ledger, plan, it: int, retries: int, enforce: bool, send: Callable[[int], Attempt],
            notes: list, on_recorded: Callable[[], None] = lambda: None,
            ready: Callable[[], str] = lambda: "") -> Release:
    """Record the round, then send it (``send(attempt)``) until it is received, retrying a lost burst
    ``retries`` times. Each attempt after the first is a further release of the same updates with fresh
    noise: booked as its own mechanism (``extra["attempt"]``) before it is sent, and skipped when it would
    exceed the budget. An attempt lost because the infrastructure died is redone (at most INFRA_RETRIES
    times), and booked like any other. ``ready()`` waits for the infrastructure before each attempt and
    returns a reason to stop ('' to go on): nothing is booked for an attempt that is never sent."""
    ledger.record(plan.mechanism)
    on_recorded()
    rec = Reception(aggregate=None, ok=False, reason="not sent")
    attempt, infra_failures = 0, 0
    while True:
        stop = ready()
        if stop:
            return Release(rec, attempt, stop)
        if attempt > 0:
            further = dataclasses.replace(plan.mechanism, extra={**plan.mechanism.extra, "attempt": attempt})
            if enforce and ledger.would_exceed(further):
                notes.append(f"round {it}: retry {attempt} skipped, it would exceed the privacy budget")
                return Release(rec, attempt)
            ledger.record(further)
        sent = send(attempt)
        rec = sent.reception
        if sent.stop:
            return Release(rec, attempt, sent.stop)
        attempt += 1
        if rec.ok:
            return Release(rec, attempt)
        if sent.infrastructure_died:
            infra_failures += 1
            notes.append(f"round {it}: attempt {attempt} failed ({rec.reason}); retried once it is back")
            if infra_failures > INFRA_RETRIES:
                return Release(rec, attempt, f"round {it}: {rec.reason} {infra_failures} times; stopped "
                                             f"(checkpoint kept)")
            continue
        if attempt > retries:
            return Release(rec, attempt)
