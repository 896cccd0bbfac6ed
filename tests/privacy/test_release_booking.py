"""Every release booked exactly once (rounds/accounting.release): a resume that re-sends a round the ledger
already holds books it again as a further release on a secret-noise air (fresh OS-entropy noise is a new
release), reuses a booking only when the sent-journal proves it never went on the air, and stays a no-op
on a seeded air (the replay is the same release). Each ledger line names its release id; each id handed
to the air is in the ledger exactly once. The epsilons are rechecked with dp-accounting directly."""
import json
from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.rounds.accounting import release
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt

DELTA = 1e-5


def _cfg(eps=50.0):
    return PrivacyConfig(eps=eps, delta=DELTA, accountant="rdp", report=["rdp", "pld"], enforce=True)


def _plan(it):
    return SimpleNamespace(round=it, mechanism=Mechanism(it, 0.01, 0.05), extra={}, alpha_u=1.0, sigma_c2=0.0,
                           alpha_cj=0.0, h_cj=0j)


class Air:
    """Stands in for the transport: records which release ids it carried."""

    def __init__(self):
        self.sent = []

    def send(self, plan):
        def go(attempt):
            self.sent.append((plan.round, attempt, plan.extra["release"]))
            return Attempt(Reception(np.zeros(3), ok=True))
        return go


class Crash(Exception):
    pass


def _run(path, it, air, secret, crash_after_record=False, eps=50.0):
    ledger = PrivacyLedger.resume(_cfg(eps), path) if path.exists() else PrivacyLedger(_cfg(eps), path)
    plan = _plan(it)

    def recorded():
        if crash_after_record:
            raise Crash()
    out = release(ledger, plan, it, retries=0, enforce=True, send=air.send(plan),
                  on_recorded=recorded, secret_noise=secret)
    return ledger, out


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _dp_eps(n_releases):
    """dp-accounting's RDP epsilon of n compositions of the Gaussian mechanism (sensitivity 0.01, sigma 0.05)."""
    import dp_accounting
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(0.05 / 0.01), n_releases)
    return acc.get_epsilon(DELTA)


def test_secret_noise_resend_after_a_release_is_booked_again(tmp_path):
    path = tmp_path / "privacy_ledger.jsonl"
    air = Air()
    _run(path, 1, air, secret=True)                # released; the process dies before its checkpoint
    ledger, out = _run(path, 1, air, secret=True)     # the resume re-sends round 1
    lines = _lines(path)
    assert [(x["round"], x["attempt"]) for x in lines] == [(1, 0), (1, 1)]
    assert [x["release"] for x in lines] == [r for _, _, r in air.sent]     # each release booked, in order
    assert len({x["release"] for x in lines}) == 2 and all(len(x["release"]) == 32 for x in lines)
    assert [(r, a) for r, a, _ in air.sent] == [(1, 0), (1, 1)] and out.attempts == 1
    assert any("further release (attempt 1)" in n for n in out.notes)
    journal = [json.loads(x)["release"] for x in (tmp_path / "privacy_ledger.sent").read_text().splitlines()]
    assert journal == [x["release"] for x in lines]
    assert ledger.epsilons()["rdp"] == pytest.approx(_dp_eps(2), rel=1e-6)   # two releases, two compositions


def test_a_booking_that_never_went_out_is_used_once(tmp_path):
    path = tmp_path / "privacy_ledger.jsonl"
    air = Air()
    _run(path, 1, air, secret=True)
    with pytest.raises(Crash):                     # round 2 booked, the server dies before the burst
        _run(path, 2, air, secret=True, crash_after_record=True)
    booked = _lines(path)[-1]
    assert (booked["round"], booked["attempt"]) == (2, 0)
    ledger, _ = _run(path, 2, air, secret=True)
    lines = _lines(path)
    assert [(x["round"], x["attempt"]) for x in lines] == [(1, 0), (2, 0)]
    assert air.sent[-1] == (2, 0, booked["release"])                # sent under its own booking
    assert [x["release"] for x in lines] == [r for _, _, r in air.sent]
    assert ledger.epsilons()["rdp"] == pytest.approx(_dp_eps(2), rel=1e-6)


def test_without_a_journal_every_booking_counts_as_sent(tmp_path):
    """A folder whose journal is gone (or predates it): the held round is booked afresh (never under-counts)."""
    path = tmp_path / "privacy_ledger.jsonl"
    air = Air()
    with pytest.raises(Crash):
        _run(path, 1, air, secret=True, crash_after_record=True)
    (tmp_path / "privacy_ledger.sent").unlink()
    _run(path, 1, air, secret=True)
    assert [(x["round"], x["attempt"]) for x in _lines(path)] == [(1, 0), (1, 1)]
    assert air.sent == [(1, 1, _lines(path)[1]["release"])]


def test_seeded_air_replay_is_the_same_release(tmp_path):
    path = tmp_path / "privacy_ledger.jsonl"
    air = Air()
    _run(path, 1, air, secret=False)
    ledger, _ = _run(path, 1, air, secret=False)       # identical samples: the same release, recorded once
    lines = _lines(path)
    assert [(x["round"], x["attempt"]) for x in lines] == [(1, 0)]
    assert air.sent[0] == air.sent[1] == (1, 0, lines[0]["release"])    # deterministic id
    assert not (tmp_path / "privacy_ledger.sent").exists()
    assert ledger.epsilons()["rdp"] == pytest.approx(_dp_eps(1), rel=1e-6)


def test_a_resend_the_budget_cannot_take_stops_the_run(tmp_path):
    path = tmp_path / "privacy_ledger.jsonl"
    air = Air()
    eps = _dp_eps(1) * 1.2                              # room for one release, not two
    _run(path, 1, air, secret=True, eps=eps)
    ledger, out = _run(path, 1, air, secret=True, eps=eps)
    assert "would exceed the privacy budget" in out.stop and out.attempts == 0
    assert len(_lines(path)) == 1 and len(air.sent) == 1            # nothing booked, nothing sent


def test_a_deleted_journal_is_not_recreated_once_releases_are_booked(tmp_path):
    """Deleting the journal of a folder whose lines name releases cannot make a sent booking look unsent."""
    path = tmp_path / "privacy_ledger.jsonl"
    air = Air()
    _run(path, 1, air, secret=True)
    _run(path, 2, air, secret=True)                # sent; the process dies before round 2's checkpoint
    (tmp_path / "privacy_ledger.sent").unlink()
    _run(path, 2, air, secret=True)
    assert [(x["round"], x["attempt"]) for x in _lines(path)] == [(1, 0), (2, 0), (2, 1)]
    assert not (tmp_path / "privacy_ledger.sent").exists()


def test_a_late_burst_is_booked_retried_and_counted_in_the_round(tmp_path):
    """A timed burst lost as late (UHD's TX async EVENT_CODE_TIME_ERROR, radio/uhd_events.py) is booked as
    released and retried; an underflow likewise; the round's row counts both over its attempts (issue 34)."""
    script = [Reception(None, ok=False, reason="uhd: late command x1", faults={"time_error": 1}),
              Reception(None, ok=False, reason="uhd: underflow x2", faults={"underflow": 2, "burst_ack": 1}),
              Reception(np.zeros(3), ok=True, faults={})]
    ledger, plan = PrivacyLedger(_cfg(), tmp_path / "ledger.jsonl"), _plan(1)
    out = release(ledger, plan, 1, retries=2, enforce=True, send=lambda attempt: Attempt(script[attempt]),
                  secret_noise=True)
    assert out.reception.ok and out.attempts == 3
    assert out.timing_counts() == {"late": 1, "underflows": 2, "overflows": 0}
    lines = _lines(tmp_path / "ledger.jsonl")
    assert [int((x.get("extra") or {}).get("attempt", 0)) for x in lines] == [0, 1, 2]    # each one booked


def test_a_lost_attempt_that_is_retried_names_its_reason_and_both_are_booked(tmp_path):
    """A retried attempt leaves its reason in the run's notes (the row keeps only the last attempt's faults: a
    lab run whose first attempt was lost read `attempts: 2` and nothing else), and both releases are booked."""
    path = tmp_path / "privacy_ledger.jsonl"
    ledger = PrivacyLedger(_cfg(), path)
    sent = []

    def send(attempt):
        sent.append(attempt)
        if attempt == 0:
            return Attempt(Reception(None, ok=False, reason="sounding failed", faults={"sounding failed": 1}))
        return Attempt(Reception(np.zeros(3), ok=True))
    out = release(ledger, _plan(1), 1, retries=2, enforce=True, send=send, secret_noise=True)
    assert out.reception.ok and out.attempts == 2 and sent == [0, 1]
    assert out.notes == ["round 1: attempt 0 lost (sounding failed)"]   # then retried: attempts 2
    assert out.faults == {"sounding failed": 1}
    assert [(x["round"], x["attempt"]) for x in _lines(path)] == [(1, 0), (1, 1)]
    assert ledger.epsilons()["rdp"] == pytest.approx(_dp_eps(2), rel=1e-6)
