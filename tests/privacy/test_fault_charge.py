"""A round whose protective noise was not delivered is charged as it happened (rounds/accounting.release,
``fault_charge``): an appended, hash-chained ledger line at the noise that was on the air (channel noise
plus only what was delivered), beside the planned line; the capture is not used. The release rule here is
the real one over a real ledger; the air is a function that reports what a jammer fault looks like."""
import json
from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.privacy.ledger import PrivacyLedger, read_chain
from otafl_sdr.rounds.accounting import fault_charge, release
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt
from dp_reference import independent_pld_epsilon

DELTA = 1e-5
SIGMA_C2, ALPHA_U, ALPHA_CJ, H_CJ = 0.04, 2.0, 0.5, 0.8 + 0.6j          # |h_cj| = 1


def _plan(it, client_noise_var=0.0, extra=None):
    chan, jam = SIGMA_C2 / ALPHA_U ** 2, (abs(H_CJ) * ALPHA_CJ / ALPHA_U) ** 2
    mech = Mechanism(it, 0.05, float(np.sqrt(chan + jam + client_noise_var)), extra=dict(extra or {}))
    return SimpleNamespace(round=it, mechanism=mech, extra={}, alpha_u=ALPHA_U, sigma_c2=SIGMA_C2,
                           alpha_cj=ALPHA_CJ, h_cj=H_CJ)


def test_a_jammer_fault_is_charged_at_channel_noise_only():
    plan = _plan(3)
    m = fault_charge(plan, 0, {"jammer": "late command"})
    assert m.sensitivity == plan.mechanism.sensitivity
    assert m.sigma_eff == pytest.approx(np.sqrt(SIGMA_C2) / ALPHA_U)
    assert m.extra == {"attempt": 0, "fault": "jammer late command", "charged": "channel noise only",
                       "planned_sigma_eff": plan.mechanism.sigma_eff}
    assert fault_charge(plan, 0, {}) is None


def test_a_client_fault_costs_only_the_client_noise_it_took_away():
    # no client noise in the plan: a client's missing burst removes its data, not anybody's protection
    assert fault_charge(_plan(1), 0, {"client-2": "underflow"}) is None
    # client noise (paper 002): a faulted client takes every client's noise away (conservative), the
    # jammer's stays when it was delivered
    plan = _plan(1, client_noise_var=0.3)
    m = fault_charge(plan, 1, {"client-2": "underflow"})
    assert m.sigma_eff == pytest.approx(np.sqrt((SIGMA_C2 + abs(H_CJ) ** 2 * ALPHA_CJ ** 2) / ALPHA_U ** 2))
    assert m.extra["charged"] == "channel noise and the noise delivered"
    both = fault_charge(plan, 1, {"client-2": "underflow", "jammer": "died"})
    assert both.sigma_eff == pytest.approx(np.sqrt(SIGMA_C2) / ALPHA_U)


def test_the_largest_jammer_share_is_taken_away():
    """A measured / calibrated jammer share above the plan's is still removed whole: never more than the
    channel's noise is left."""
    plan = _plan(1, extra={"jammer_noise": {"booked": 10.0}})
    assert fault_charge(plan, 0, {"jammer": "no burst ack"}).sigma_eff == pytest.approx(np.sqrt(SIGMA_C2) / ALPHA_U)


def test_release_appends_the_charge_chained_and_counted(tmp_path):
    cfg = PrivacyConfig(eps=50.0, delta=DELTA, accountant="pld", report=["rdp", "pld"], enforce=True)
    path = tmp_path / "privacy_ledger.jsonl"
    ledger = PrivacyLedger(cfg, path)
    notes = []
    faults = {0: {"jammer": "late command"}}                 # round 2's first attempt: the jammer was late

    for it in (1, 2, 3):
        plan = _plan(it)

        def send(attempt, it=it):
            und = faults.get(attempt, {}) if it == 2 else {}
            # the capture of the faulted attempt came back demodulable: it must not be used all the same
            return Attempt(Reception(np.ones(4), ok=True, undelivered=dict(und)))
        out = release(ledger, plan, it, retries=1, enforce=True, send=send)
        notes += out.notes
        assert out.reception.ok
        assert out.attempts == (2 if it == 2 else 1)         # the faulted attempt was not used: retried
    entries, torn = read_chain(path)
    assert not torn
    got = [(e["round"], e["attempt"], e["extra"].get("fault", "")) for e in entries]
    assert got == [(1, 0, ""), (2, 0, ""), (2, 0, "jammer late command"), (2, 1, ""), (3, 0, "")]
    charged = entries[2]
    assert charged["sigma_eff"] == pytest.approx(np.sqrt(SIGMA_C2) / ALPHA_U)
    assert charged["extra"]["charged"] == "channel noise only"
    assert any("jammer late command" in n and "charged" in n for n in notes)
    # every line counts, the charge included: dp-accounting directly on the ledger's lines
    assert ledger.epsilons()["pld"] == pytest.approx(independent_pld_epsilon(entries, DELTA), rel=1e-3)
    without = [e for e in entries if "fault" not in e["extra"]]
    assert ledger.epsilons()["pld"] > independent_pld_epsilon(without, DELTA) * 1.5
    # a resume replays the charge too
    again = PrivacyLedger.resume(cfg, path)
    assert again.epsilons() == pytest.approx(ledger.epsilons())
    assert json.loads(path.read_text().splitlines()[2])["prev"] == entries[1]["hash"]


def test_a_radio_failure_after_the_clients_sent_is_charged_before_the_run_stops(tmp_path):
    from otafl_sdr.errors import AirError
    cfg = PrivacyConfig(eps=50.0, delta=DELTA, accountant="pld", report=["pld"], enforce=True)
    path = tmp_path / "privacy_ledger.jsonl"
    ledger = PrivacyLedger(cfg, path)

    def send(attempt):
        err = AirError("jammer's USRP failed: gone")
        err.undelivered = {"jammer": "radio failed"}
        raise err
    with pytest.raises(AirError):
        release(ledger, _plan(1), 1, retries=1, enforce=True, send=send)
    entries, torn = read_chain(path)
    assert [(e["round"], e["attempt"], e["extra"].get("fault", "")) for e in entries] == \
        [(1, 0, ""), (1, 0, "jammer radio failed")]
