"""A round lost to a node's restart runs again only where the budget takes it (net/rejoin.rerun_lost), and a
final attempt (the sender's process is gone) is not retried nor booked again (rounds/accounting.release).
Pure: a real ledger (dp-accounting's PLD), no node processes; eps rechecked with dp-accounting directly."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.net.rejoin import rerun_lost
from otafl_sdr.privacy.ledger import PrivacyLedger, read_chain
from otafl_sdr.rounds.accounting import release
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt
from dp_reference import independent_pld_epsilon

DELTA = 1e-5
SIGMA = 2.0


def _server(lost: dict, rounds: int = 3):
    return SimpleNamespace(restart_lost=dict(lost), reruns=0, cfg=SimpleNamespace(run=SimpleNamespace(rounds=rounds)))


def _ledger(tmp_path, eps: float) -> PrivacyLedger:
    cfg = PrivacyConfig(eps=eps, delta=DELTA, accountant="pld", report=["rdp", "pld"], enforce=True)
    return PrivacyLedger(cfg, tmp_path / "privacy_ledger.jsonl")


def _book(ledger, rounds) -> None:
    for it in rounds:
        ledger.record(Mechanism(round=it, sensitivity=1.0, sigma_eff=SIGMA), release=f"r{it}")


def _eps(ledger, n: int) -> float:
    """The PLD epsilon of n rounds of the booked mechanism, as dp-accounting computes it."""
    return independent_pld_epsilon([{"sensitivity": 1.0, "sigma_eff": SIGMA, "sampling_prob": 1.0,
                                     "uses_data": True, "round": i, "extra": {}} for i in range(n)], DELTA)


def test_a_round_lost_to_a_restart_runs_again_when_the_budget_takes_it(tmp_path):
    ledger = _ledger(tmp_path, eps=100.0)
    _book(ledger, (1, 2, 3))
    server, notes = _server({2: "client-0 died or restarted during the exchange"}), []
    assert rerun_lost(server, {"round": 2, "lost": True}, ledger, notes)
    assert server.reruns == 1 and 2 not in server.restart_lost
    assert "one more client round" in notes[-1] and "booked as its own release" in notes[-1]
    # a round lost for another reason (no restart noted) is not run again
    assert not rerun_lost(server, {"round": 3, "lost": True}, ledger, notes)


def test_a_round_lost_to_a_restart_is_not_run_again_past_the_budget(tmp_path):
    four = _eps(None, 4)
    ledger = _ledger(tmp_path, eps=0.5 * (_eps(None, 3) + four))      # three rounds fit, a fourth does not
    _book(ledger, (1, 2, 3))
    entries, _ = read_chain(tmp_path / "privacy_ledger.jsonl")
    assert ledger.epsilons()["pld"] == pytest.approx(independent_pld_epsilon(entries, DELTA), rel=1e-3)
    server, notes = _server({2: "client-0 died or restarted during the exchange"}), []
    assert not rerun_lost(server, {"round": 2, "lost": True}, ledger, notes)
    assert server.reruns == 0 and "not run again: one more release would take eps past privacy.eps" in notes[-1]
    assert len(ledger.records()) == 3                                   # nothing booked by the check


def test_a_final_attempt_is_neither_retried_nor_booked_again(tmp_path):
    ledger = _ledger(tmp_path, eps=100.0)
    plan = SimpleNamespace(mechanism=Mechanism(round=1, sensitivity=1.0, sigma_eff=SIGMA), extra={}, alpha_u=1.0,
                           alpha_cj=0.0, sigma_c2=1.0, h_cj=0.0)
    calls = []

    def send(wire):
        calls.append(wire)          # told, then the client's process died: lost, and no retry can be sent
        return Attempt(Reception(np.zeros(4), ok=False, reason="no burst report"), final=True)
    out = release(ledger, plan, 1, retries=3, enforce=True, send=send)
    assert calls == [0] and out.attempts == 1 and not out.reception.ok
    entries, _ = read_chain(tmp_path / "privacy_ledger.jsonl")
    assert [(e["round"], (e.get("extra") or {}).get("attempt", 0)) for e in entries] == [(1, 0)]
