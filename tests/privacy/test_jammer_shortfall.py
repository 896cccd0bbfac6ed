"""A round whose jammer delivered less noise than booked is charged at the measured lower bound (issue 34,
item 5; privacy/jammer_shortfall.py): the real release rule over a real, hash-chained ledger, with the
reception's measurement as the uhd air reports it (radio/jammer_slots.measure; the measurement itself is
tested through UHD's simulator in tests/radio/test_uhd_jammer_delivered.py). The booked line and its top-up
together cost exactly the round at the bound: checked with dp-accounting directly (PLD and RDP). `verify`'s
re-derivation recomputes the charge and refuses a forged lower one."""
from types import SimpleNamespace

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.errors import UserError
from otafl_sdr.privacy.jammer_shortfall import Z, booked_jammer_share, shortfall_charge
from otafl_sdr.privacy.ledger import PrivacyLedger, read_chain
from otafl_sdr.rounds.accounting import release
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt
from otafl_sdr.workload.rederive_match import match_entry
from dp_reference import independent_pld_epsilon

DELTA = 1e-5
SIGMA_C2, ALPHA_U, ALPHA_CJ, H_CJ, SENS = 0.04, 2.0, 0.5, 0.8 + 0.6j, 0.05       # |h_cj| = 1
CHAN, JAM = SIGMA_C2 / ALPHA_U ** 2, (ALPHA_CJ / ALPHA_U) ** 2                    # 0.01, 0.0625


def _plan(it, q=1.0):
    mech = Mechanism(it, SENS, float(np.sqrt(CHAN + JAM)), sampling_prob=q,
                     extra={"jammer_noise": {"booked": JAM, "planned": JAM, "measured": JAM * 1.1,
                                             "power_gain_lower": 1.1, "source": "planned"}})
    return SimpleNamespace(round=it, mechanism=mech, extra={}, alpha_u=ALPHA_U, sigma_c2=SIGMA_C2,
                           alpha_cj=ALPHA_CJ, h_cj=H_CJ)


def _measured(ratio, ratio_std=0.01):
    return {"delivered": ratio * JAM, "delivered_std": ratio_std * JAM, "jammer_var": 0.0, "floor": 0.0, "symbols": 1}


def _run(tmp_path, ratios, q=1.0):
    cfg = PrivacyConfig(eps=50.0, delta=DELTA, accountant="pld", report=["rdp", "pld"], enforce=True)
    path = tmp_path / "privacy_ledger.jsonl"
    ledger = PrivacyLedger(cfg, path)
    recs, notes = [], []
    for it, ratio in enumerate(ratios, 1):
        def send(attempt, ratio=ratio):
            return Attempt(Reception(np.ones(4), ok=True, extra={"jammer_slots": _measured(ratio)}))
        out = release(ledger, _plan(it, q), it, retries=0, enforce=True, send=send)
        recs.append(out.reception)
        notes += out.notes
    entries, torn = read_chain(path)
    assert not torn
    return ledger, entries, recs, notes


def test_a_shortfall_is_charged_at_the_bound_and_the_pair_costs_exactly_that(tmp_path):
    # round 1 calm (bound 1.03 - 0.03 = 1.00 of booked: not below), round 2 delivers 80 %
    ledger, entries, recs, notes = _run(tmp_path, [1.031, 0.80])
    assert [(e["round"], e["extra"].get("fault", "")) for e in entries] == \
        [(1, ""), (2, ""), (2, "jammer delivered less noise than booked")]
    assert recs[0].extra["jammer_slots"]["charged"] is False
    fig = recs[1].extra["jammer_slots"]
    assert fig["ratio"] == pytest.approx(0.80) and fig["ratio_std"] == pytest.approx(0.01) and fig["charged"]
    js = entries[2]["extra"]["jammer_shortfall"]
    bound = (0.80 - Z * 0.01) * JAM
    assert js["bound"] == pytest.approx(bound) and js["booked"] == pytest.approx(JAM) and js["mode"] == "top-up"
    sigma_c = np.sqrt(CHAN + bound)
    assert js["charged_sigma_eff"] == pytest.approx(sigma_c)
    assert entries[2]["extra"]["planned_sigma_eff"] == pytest.approx(np.sqrt(CHAN + JAM))
    assert any("charged at sigma_eff" in n for n in notes)
    # the ledger's epsilon equals the rounds as charged: round 1 as booked, round 2 at the bound, computed by
    # dp-accounting directly from those two mechanisms (not from the ledger's lines)
    as_charged = [{"uses_data": True, "sensitivity": SENS, "sigma_eff": np.sqrt(CHAN + JAM), "sampling_prob": 1.0},
                  {"uses_data": True, "sensitivity": SENS, "sigma_eff": sigma_c, "sampling_prob": 1.0}]
    assert ledger.epsilons()["pld"] == pytest.approx(independent_pld_epsilon(as_charged, DELTA), rel=2e-3)
    rdp = RdpAccountant()
    for r in as_charged:
        rdp.compose(dp_accounting.GaussianDpEvent(r["sigma_eff"] / r["sensitivity"]))
    assert ledger.epsilons()["rdp"] == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-6)
    # and more than the booking alone
    assert ledger.epsilons()["pld"] > independent_pld_epsilon(as_charged[:1] * 2, DELTA) * 1.02


def test_a_subsampled_round_is_charged_in_full_beside_its_booking(tmp_path):
    ledger, entries, _, _ = _run(tmp_path, [0.5], q=0.3)
    assert entries[1]["extra"]["jammer_shortfall"]["mode"] == "full"
    assert entries[1]["sigma_eff"] == pytest.approx(np.sqrt(CHAN + (0.5 - Z * 0.01) * JAM))
    assert ledger.epsilons()["pld"] == pytest.approx(independent_pld_epsilon(entries, DELTA), rel=2e-3)


def test_the_booked_share_is_what_the_booking_counted():
    plan = _plan(1)
    assert booked_jammer_share(plan, plan.mechanism) == pytest.approx(JAM)
    lower = Mechanism(1, SENS, np.sqrt(CHAN + 0.5 * JAM), extra={"jammer_gain_lower": np.sqrt(0.5)})
    assert booked_jammer_share(plan, lower) == pytest.approx(0.5 * JAM)
    capture = Mechanism(1, SENS, np.sqrt(CHAN), extra={"multipath_capture": True})
    assert booked_jammer_share(plan, capture) == 0.0 and shortfall_charge(plan, capture, 0, _measured(0.1)) is None


def test_verify_recomputes_the_charge_and_refuses_a_forged_lower_one(tmp_path):
    _, entries, _, _ = _run(tmp_path, [0.80])
    booked, charge = entries
    want = _plan(1).mechanism
    match_entry("entry 1", booked, want, JAM)
    match_entry("entry 2", charge, want, JAM)                          # the honest charge passes
    forged = {**charge, "sigma_eff": charge["sigma_eff"] * 1.5}       # more noise: a smaller charge
    with pytest.raises(UserError, match="jammer shortfall's charge: sigma_eff"):
        match_entry("entry 2", forged, want, JAM)
    js = charge["extra"]["jammer_shortfall"]
    for key, value in (("delivered", js["delivered"] * 1.1), ("bound", js["bound"] * 1.1), ("booked", JAM * 0.9),
                       ("z", 2.0), ("charged_sigma_eff", js["charged_sigma_eff"] * 1.01)):
        bad = {**charge, "extra": {**charge["extra"], "jammer_shortfall": {**js, key: value}}}
        with pytest.raises(UserError, match="jammer shortfall"):
            match_entry("entry 2", bad, want, JAM)
