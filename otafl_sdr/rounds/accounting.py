"""The release rule of a round, written once for every air (``release``): the round is recorded BEFORE anything
goes on the air, and every further attempt (a retry with fresh noise, a re-send after a receiver or
jammer died) is a further release, booked as its own mechanism before it is sent."""
from __future__ import annotations

import dataclasses
import math
import uuid
from dataclasses import dataclass, field
from typing import Callable


from otafl_sdr.errors import AirError, UserError
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt

INFRA_RETRIES = 3            # attempts redone because the receiver / channel / jammer died


# the radios' timing faults counted per round, over every attempt (the row's columns; radio/uhd_events.py
# names): a late timed command (TX async EVENT_CODE_TIME_ERROR, RX late stream command), an underflow
# (TX EVENT_CODE_UNDERFLOW / _IN_PACKET), an overflow (samples lost inside a capture)
TIMING_COLUMNS = {"late": ("time_error", "rx_late_command"), "underflows": ("underflow", "underflow_in_packet"),
                  "overflows": ("rx_overflow",)}


@dataclass
class Release:
    """How a round's release ended: what came back, after how many attempts, why the run must stop ('' to
    go on) and what happened on the way (the release rule's notes and the transport's, in order)."""

    reception: Reception
    attempts: int
    stop: str = ""
    notes: list[str] = field(default_factory=list)
    faults: dict = field(default_factory=dict)                # every attempt's fault counts, summed

    def timing_counts(self) -> dict:
        """{'late': n, 'underflows': n, 'overflows': n} over every attempt of the round (TIMING_COLUMNS)."""
        return {col: int(sum(int(self.faults.get(k, 0) or 0) for k in keys)) for col, keys in TIMING_COLUMNS.items()}


def _add_faults(total: dict, faults) -> None:
    for k, v in (faults or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            total[k] = total.get(k, 0) + int(v)


def release(ledger, plan, round_index: int, retries: int, enforce: bool, send: Callable[[int], Attempt],
            on_recorded: Callable[[], None] = lambda: None,
            ready: Callable[[], str] = lambda: "", secret_noise: bool = True) -> Release:
    """Record the round, then send it (``send(attempt)``) until it is received, retrying a lost burst
    ``retries`` times. Each attempt after the first is a further release of the same updates with fresh
    noise: booked as its own mechanism (``extra["attempt"]``) before it is sent, and skipped when it would
    exceed the budget. An attempt lost because the infrastructure died is redone (at most INFRA_RETRIES
    times), and booked like any other. ``ready()`` waits for the infrastructure before each attempt and
    returns a reason to stop ('' to go on): nothing is booked for an attempt that is never sent. An attempt
    the transport proves never went on the air (``Attempt.unsent``: refused before any client was told) is
    withdrawn from the sent-journal and its booking carries the retry (no second charge; the retry goes out
    under the next wire attempt number, ``send(wire)``, with the same release id).

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
      its id is deterministic (uuid5 of round and attempt), so such ledgers stay identical run to run.

    ``Release.notes``: what happened, in order (a retry, a skip, a fault's charge; each Attempt's notes)."""
    notes: list[str] = []
    out = _release(ledger, plan, round_index, retries, enforce, send, notes, on_recorded, ready, secret_noise)
    out.notes = notes
    return out


def _release(ledger, plan, round_index: int, retries: int, enforce: bool, send: Callable[[int], Attempt], notes: list,
             on_recorded: Callable[[], None], ready: Callable[[], str], secret_noise: bool) -> Release:
    attempt, rid = first_booking(ledger, round_index, secret_noise, notes)
    mech = _at_attempt(plan.mechanism, attempt)
    if secret_noise and not _fits(ledger, mech):   # the unsent booking was planned otherwise (e.g. a uhd resume's
        attempt = ledger.next_attempt(round_index)            # fresh calibration): it stays booked, this is a further one
        rid, mech = release_id(round_index, attempt, True), _at_attempt(plan.mechanism, attempt)
        notes.append(f"round {round_index}: re-planned after the resume; booked as a further release (attempt {attempt})")
    rec = Reception(aggregate=None, ok=False, reason="not sent")
    if attempt > 0 and enforce and ledger.would_exceed(mech):
        return Release(rec, 0, f"round {round_index}: re-sending it after the resume (attempt {attempt}, fresh noise) "
                               f"would exceed the privacy budget privacy.eps={ledger.cfg.eps:g}; stopped")
    ledger.record(mech, release=rid)
    on_recorded()
    tries, infra_failures = 0, 0
    seen: dict = {}                        # fault counts over every attempt (the row's late / underflows / ...)
    wire, reuse = attempt, False           # the transport's attempt number; reuse: the last one was unsent
    while True:
        stop = ready()
        if stop:
            return Release(rec, tries, stop, faults=seen)
        if tries > 0:
            wire += 1
        if tries > 0 and reuse:
            notes.append(f"round {round_index}: attempt {tries} never went on the air; retried under its booking")
        elif tries > 0:
            attempt = max(attempt + 1, wire)
            wire = attempt
            further = _at_attempt(plan.mechanism, attempt)
            if enforce and ledger.would_exceed(further):
                notes.append(f"round {round_index}: retry {tries} skipped, it would exceed the privacy budget")
                return Release(rec, tries, faults=seen)
            rid = release_id(round_index, attempt, secret_noise)
            ledger.record(further, release=rid)
        plan.extra["release"] = rid
        if secret_noise:
            ledger.mark_sent(rid, round_index, attempt)
        try:
            sent = send(wire)
        except AirError as e:                  # a radio failed: the run stops, what went out is charged first
            charged = fault_charge(plan, attempt, getattr(e, "undelivered", {}))
            if charged is not None:
                ledger.record(charged, release=plan.extra.get("release"))
            e.notes = [*notes, *e.notes]           # what the round noted before the radio failed
            raise
        notes.extend(sent.notes)
        rec = sent.reception
        _add_faults(seen, rec.faults)
        reuse = bool(sent.unsent) and not rec.undelivered
        if reuse and secret_noise:
            ledger.mark_unsent(rid, round_index, attempt)
        charged = fault_charge(plan, attempt, rec.undelivered)
        if charged is not None:                # a release that happened without its planned noise
            ledger.record(charged, release=plan.extra.get("release"))      # the release it charges
            notes.append(f"round {round_index}: attempt {attempt}: {charged.extra['fault']}; charged at sigma_eff "
                         f"{charged.sigma_eff:.6g} ({charged.extra['charged']}), planned {plan.mechanism.sigma_eff:.6g}")
            rec = dataclasses.replace(rec, aggregate=None, ok=False,
                                      reason=rec.reason or f"protective noise not delivered ({charged.extra['fault']})")
        else:
            _charge_shortfall(ledger, plan, round_index, attempt, rec, notes)
        if sent.stop:
            return Release(rec, tries, sent.stop, faults=seen)
        tries += 1
        if rec.ok or sent.final:               # final: a sender's process is gone, no retry of this plan
            return Release(rec, tries, faults=seen)
        if sent.infrastructure_died:
            infra_failures += 1
            notes.append(f"round {round_index}: attempt {tries} failed ({rec.reason}); retried once it is back")
            if infra_failures > INFRA_RETRIES:
                return Release(rec, tries, f"round {round_index}: {rec.reason} {infra_failures} times; stopped "
                                           f"(checkpoint kept)", faults=seen)
            continue
        if tries > retries:
            return Release(rec, tries, faults=seen)
        notes.append(f"round {round_index}: attempt {attempt} lost ({rec.reason or 'no reason given'})")


def _charge_shortfall(ledger, plan, round_index: int, attempt: int, rec: Reception, notes: list) -> None:
    """The jammer's delivered noise this attempt measured (``rec.extra['jammer_slots']``, radio/jammer_slots.py)
    against its booking: the row's figures go back into it, and a measured lower bound below the booked
    share is charged (privacy/jammer_shortfall.py) as a second line of this release, before anything
    received is used."""
    from otafl_sdr.privacy.ofdm_jammer_shortfall import for_measurement
    measured = rec.extra.get("jammer_slots") if isinstance(rec.extra, dict) else None
    if not measured:
        return
    rule = for_measurement(measured)          # single carrier, or an OFDM round's per-subcarrier slot
    figures, shortfall_charge = rule.figures, rule.shortfall_charge
    booked = _at_attempt(plan.mechanism, attempt)
    fig = figures(plan, booked, measured)
    if fig is None:
        return
    measured.update(fig)
    charge = shortfall_charge(plan, booked, attempt, measured)
    if charge is None:
        return
    ledger.record(charge, release=plan.extra.get("release"))
    js = charge.extra["jammer_shortfall"]
    measured["charged_sigma_eff"] = js["charged_sigma_eff"]
    notes.append(f"round {round_index}: attempt {attempt}: the jammer delivered {fig['ratio']:.4f} +- "
                 f"{fig['ratio_std']:.4f} of its booked noise (lower bound {fig['bound'] / fig['booked']:.4f}); "
                 f"charged at sigma_eff {js['charged_sigma_eff']:.6g}, booked {booked.sigma_eff:.6g}")


def release_id(round_index: int, attempt: int, secret_noise: bool) -> str:
    """A release's id: random (uuid4) where the noise is secret, so two physical releases never share
    one; deterministic (uuid5 of round and attempt) on seeded airs, whose replay is the same release."""
    if secret_noise:
        return uuid.uuid4().hex
    return uuid.uuid5(uuid.NAMESPACE_URL, f"otafl-sdr:seeded-release:{int(round_index)}:{int(attempt)}").hex


def first_booking(ledger, round_index: int, secret_noise: bool, notes: list) -> tuple[int, str]:
    """(attempt, release id) of round ``round_index``'s first booking in this process: attempt 0 for a round the
    ledger does not hold, or on a seeded air (an identical replay); on a secret-noise air a held round
    continues at its next free attempt, unless its last booking provably never went out (``unsent``)."""
    if not secret_noise:
        return 0, release_id(round_index, 0, False)
    ledger.open_sent_journal()
    if not ledger.has_round(round_index):
        return 0, release_id(round_index, 0, True)
    unsent = ledger.unsent(round_index)
    if unsent is not None:
        return int(unsent.get("attempt", 0)), str(unsent["release"])
    attempt = ledger.next_attempt(round_index)
    notes.append(f"round {round_index}: already released before the resume; the re-send has fresh noise, so it is "
                 f"booked as a further release (attempt {attempt})")
    return attempt, release_id(round_index, attempt, True)


def _fits(ledger, mech: Mechanism) -> bool:
    """No ledger line books ``mech``'s (round, attempt) yet, or the one that does is this very mechanism."""
    from otafl_sdr.privacy.base import mech_to_dict
    want = mech_to_dict(mech)
    a = int(want["extra"].get("attempt", 0))
    from otafl_sdr.privacy.ledger import is_raise
    for line in ledger.records():
        ex = line.get("extra") or {}
        if not is_raise(line) and line["round"] == want["round"] and int(ex.get("attempt", 0)) == a and not ex.get("fault"):
            return all(line.get(k) == v for k, v in want.items())
    return True


def _at_attempt(mech: Mechanism, attempt: int) -> Mechanism:
    if attempt == 0:
        return mech
    return dataclasses.replace(mech, extra={**mech.extra, "attempt": attempt})


def fault_charge(plan, attempt: int, undelivered: dict) -> Mechanism | None:
    """The mechanism an attempt actually released when protective noise planned for it was not delivered
    (``undelivered``: source -> what happened, set by the transport), or None when nothing is missing.

    Same sensitivity; per real coordinate of unpack(y)/alpha_u (eq. 16 of paper 000) the booked noise
    variance sigma_eff^2 is split into the channel's share sigma_c2 / alpha_u^2, the jammer's share
    (|h_cj| alpha_cj / alpha_u)^2 (eq. 15; the largest of the planned, calibrated-lower and measured
    shares) and the clients' noise (the rest: paper 001's / 002's client noise). A jammer that faulted
    takes its share away; a client that faulted takes every client's noise away (its own share is not
    known here: conservative). The channel's share always stays (it is the receiver's thermal noise). The
    result is booked as an appended entry, ``extra = {"attempt", "fault", "charged"}``, composed with the
    planned entry already recorded: both together over-count the one release that happened (conservative).

    Policy before the round: the budget check counts the planned mechanism only; the uhd testbed pre-arms
    the jammer (no client is told to transmit before the jammer answered armed: drawn, within the DAC, in
    time), so a jammer late to arm, dead or refusing releases nothing. A fault after that is charged here,
    not reserved: it can take eps past privacy.eps, and the next round's budget check then stops the run."""
    m = plan.mechanism
    if not undelivered or not m.uses_data or m.sensitivity == 0 or m.sigma_eff <= 0:
        return None
    var = float(m.sigma_eff) ** 2
    alpha_u = float(plan.alpha_u)
    channel = min(float(plan.sigma_c2) / alpha_u ** 2, var) if alpha_u > 0 else 0.0
    jam = 0.0
    if plan.alpha_cj > 0 and alpha_u > 0:
        a = float(plan.alpha_cj) / alpha_u
        shares = [(abs(plan.h_cj) * a) ** 2]
        if "jammer_gain_lower" in m.extra:
            shares.append((float(m.extra["jammer_gain_lower"]) * a) ** 2)
        if isinstance(m.extra.get("jammer_noise"), dict):
            shares.append(float(m.extra["jammer_noise"].get("booked", 0.0)))
        jam = max(shares)
    clients = max(var - channel - jam, 0.0)
    lost = (jam if "jammer" in undelivered else 0.0) + \
        (clients if any(str(k).startswith("client") for k in undelivered) else 0.0)
    if lost <= 0:
        return None
    charged_var = max(var - lost, channel)
    sigma = math.sqrt(charged_var)
    what = "channel noise only" if charged_var <= channel * (1 + 1e-12) else "channel noise and the noise delivered"
    fault = "; ".join(f"{k} {v}" for k, v in sorted(undelivered.items()))
    return dataclasses.replace(m, sigma_eff=sigma, extra={**m.extra, "attempt": attempt, "fault": fault,
                                                          "charged": what, "planned_sigma_eff": float(m.sigma_eff)})
