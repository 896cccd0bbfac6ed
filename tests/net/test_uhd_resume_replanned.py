"""A uhd resume re-plans the round it crashed in (issue 28, item 1, found by the uhd crash matrix): the server
died right after round 3's ledger line (nothing sent), and the resume's fresh in-session calibration changed
the round's booked mechanism (CSI margin, measured jammer noise). The unsent booking cannot be reused for a
different mechanism: rounds/accounting.release keeps it (conservative) and books the re-planned round as a
further release under the next attempt, instead of refusing with 'already recorded with a different
mechanism' (before: `otafl-sdr node server --resume` ended in that error). Pure: a stand-in transport."""
import json
from types import SimpleNamespace

import numpy as np

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.rounds.accounting import release
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt


class Crash(Exception):
    pass


def _cfg():
    return PrivacyConfig(eps=50.0, delta=1e-5, accountant="rdp", report=["rdp", "pld"], enforce=True)


def test_a_replanned_round_after_a_crash_before_its_burst_is_booked_as_a_further_release(tmp_path):
    path = tmp_path / "privacy_ledger.jsonl"
    sent = []

    def send(plan):
        def go(attempt):
            sent.append((attempt, plan.extra["release"]))
            return Attempt(Reception(np.zeros(3), ok=True))
        return go

    ledger = PrivacyLedger(_cfg(), path)
    plan = SimpleNamespace(round=3, mechanism=Mechanism(3, 0.01, 0.05), extra={})

    def crash():
        raise Crash()
    try:
        release(ledger, plan, 3, retries=0, enforce=True, send=send(plan), on_recorded=crash,
                secret_noise=True)
    except Crash:
        pass
    assert sent == []                                                     # booked, never sent
    ledger = PrivacyLedger.resume(_cfg(), path)
    replanned = SimpleNamespace(round=3, mechanism=Mechanism(3, 0.01, 0.048), extra={})   # a fresh calibration
    out = release(ledger, replanned, 3, retries=0, enforce=True, send=send(replanned), secret_noise=True)
    assert out.reception.ok and not out.stop
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    assert [(x["round"], x.get("extra", {}).get("attempt", 0), x["sigma_eff"]) for x in lines] == \
        [(3, 0, 0.05), (3, 1, 0.048)]
    assert sent == [(1, lines[1]["release"])] and lines[0]["release"] != lines[1]["release"]
    assert any("re-planned after the resume" in n for n in out.notes)
    # the same mechanism re-planned identically still reuses the unsent booking (nothing extra booked)
    path2 = tmp_path / "second.jsonl"
    ledger = PrivacyLedger(_cfg(), path2)
    try:
        release(ledger, plan, 3, retries=0, enforce=True, send=send(plan), on_recorded=crash,
                secret_noise=True)
    except Crash:
        pass
    ledger = PrivacyLedger.resume(_cfg(), path2)
    release(ledger, plan, 3, retries=0, enforce=True, send=send(plan), secret_noise=True)
    assert len([x for x in path2.read_text().splitlines() if x.strip()]) == 1
