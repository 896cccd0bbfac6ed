"""An OFDM round's jammer measured per subcarrier and charged where it fell short (issue 34): the slot's
readings (radio/ofdm_jammer_slot.measure) against a known jammer link, their stated standard errors against
their scatter, the shortfall rule (privacy/ofdm_jammer_shortfall.py) on a calm jammer, a weaker one and one
whose link moved, the charge line composing with the booked line to the charged mechanism (dp-accounting),
and `verify`'s re-check refusing a charge rewritten to charge less."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "power"))
from test_ofdm_jammer_booking import H_CJ, JAMMER_FIR, _plan  # noqa: E402

from dp_reference import independent_pld_epsilon  # noqa: E402
from otafl_sdr.phy.ofdm_burst import ofdm_frame  # noqa: E402
from otafl_sdr.privacy import ofdm_jammer_shortfall as ojs  # noqa: E402
from otafl_sdr.privacy import jammer_shortfall  # noqa: E402
from otafl_sdr.radio.jammer_slots import attach  # noqa: E402
from otafl_sdr.radio.ofdm_jammer_slot import jammer_burst_with_slot, measure, slot_start  # noqa: E402

FLOOR = 1e-3          # the receiver's noise per real coordinate (capture units)


def _slot(plan, lay, rng, fir=JAMMER_FIR, power=1.0, slot=400, cut=0.0):
    """The jammer's burst with its slot through ``sqrt(power) H_CJ fir`` plus the receiver's floor; the
    frame's timing where it was sent (lead symbols). ``cut``: the slot's last share zero-filled (a gap in the
    jammer's burst: the simulated hub handing a capture over without its stream)."""
    frame = ofdm_frame(lay, plan.dim, plan.extra["ofdm"]["carriers"], 1, 0)
    jam = jammer_burst_with_slot(frame, plan.alpha_cj, rng, slot)
    if cut:
        start = slot_start(frame, frame.lead * lay.symbol_len)
        jam[start + int(slot * (1 - cut)) * lay.symbol_len:start + slot * lay.symbol_len] = 0
    taps = np.sqrt(power) * H_CJ * np.asarray(fir, complex)
    y = np.convolve(jam, taps)[:len(jam)]
    y = y + np.sqrt(FLOOR) * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    return measure(y, frame.lead * lay.symbol_len, frame, plan.alpha_u, 4, slot)


def test_the_slot_reads_each_subcarriers_jammer_noise_within_its_stated_error():
    plan, _, H_cj, lay, *_ = _plan()
    E = plan.extra["ofdm"]["jammer_expected"]
    rng = np.random.default_rng(5)
    z, got = [], []
    for _ in range(200):
        m = _slot(plan, lay, rng)
        got.append(m)
        if len(got) > 20:
            continue
        k = np.asarray(m["carriers"])
        z.extend((np.asarray(m["delivered_k"]) - E[k]) / np.asarray(m["delivered_k_std"]))
        assert m["floor"] == pytest.approx(FLOOR, rel=0.15)
    assert not [m["gap"] for m in got if "gap" in m]                     # a steady slot is never called unsteady
    z = np.asarray(z)
    print(f"z over {z.size} readings: mean {z.mean():+.3f}, spread {z.std():.3f}")
    assert abs(z.mean()) < 0.15 and 0.85 < z.std() < 1.15                  # 960 readings


def test_a_calm_jammer_is_not_charged_a_weaker_one_is_and_a_moved_link_is_read_per_subcarrier():
    plan, *_ , lay, _, _ = _plan()
    booked = plan.mechanism
    rng = np.random.default_rng(6)
    calm = [_slot(plan, lay, rng) for _ in range(10)]
    charged = []
    for m in calm:
        a = ojs.analyse(plan, m)
        assert a["mode"] == "scale" and abs(a["scale"] - 1) < 4 * a["scale_std"], a["scale"]
        c = ojs.shortfall_charge(plan, booked, 0, m)
        assert ojs.figures(plan, booked, m)["charged"] == (c is not None)   # the row says charged iff a line is
        charged.append(1.0 if c is None else c.extra["jammer_shortfall"]["charged_sigma_eff"] / booked.sigma_eff)
    print("calm rounds' charged / booked sigma_eff:", np.round(charged, 4))
    # a calm jammer: at most a small top-up (its scale's lower bound c - 3 s.e. against the booking's margin at
    # the weakest subcarrier, J_k / E_k = 0.96 here): the charged sigma within 2 % of the booked one
    assert all(0.98 <= r <= 1.0 for r in charged)
    weak = _slot(plan, lay, rng, power=0.8)                     # a PA 1 dB down
    a = ojs.analyse(plan, weak)
    assert a["mode"] == "scale" and a["scale"] == pytest.approx(0.8, abs=4 * a["scale_std"]) and a["charged"]
    charge = ojs.shortfall_charge(plan, booked, 0, weak)
    js = charge.extra["jammer_shortfall"]
    assert js["per_subcarrier"] and js["shape"] == "scale" and js["mode"] == "top-up"
    assert js["charged_sigma_eff"] < booked.sigma_eff
    # the booked line and the top-up compose to the charged mechanism (dp-accounting, 20 such rounds)
    line = lambda s: {"uses_data": True, "sensitivity": booked.sensitivity, "sigma_eff": s, "sampling_prob": 1.0}  # noqa: E731
    both = independent_pld_epsilon([line(booked.sigma_eff), line(charge.sigma_eff)] * 20, 1e-5)
    alone = independent_pld_epsilon([line(js["charged_sigma_eff"])] * 20, 1e-5)
    only_booked = independent_pld_epsilon([line(booked.sigma_eff)] * 20, 1e-5)
    print(f"eps: booked {only_booked:.4f}, charged {alone:.4f}, booked + top-up {both:.4f}")
    assert both == pytest.approx(alone, rel=2e-3) and alone > only_booked
    moved = _slot(plan, lay, rng, fir=[1.0, 0.0, 0.0, 0.0, 0.98])  # the echo moved, stronger: a deeper notch elsewhere
    a = ojs.analyse(plan, moved)
    assert a["mode"] == "per subcarrier" and a["shape_p"] < 1e-6 and a["charged"]
    c2 = ojs.shortfall_charge(plan, booked, 1, moved)
    assert c2.extra["jammer_shortfall"]["shape"] == "per subcarrier"
    assert c2.extra["jammer_shortfall"]["charged_sigma_eff"] < booked.sigma_eff


def test_a_silent_jammer_slot_is_charged_in_full_never_skipped():
    """A capture that holds nothing in the slot (a jammer that sent nothing on a noiseless link: no floor
    either) reads D_k = 0 with zero error: the round is charged at no jammer noise at all."""
    plan, *_ , lay, _, _ = _plan()
    booked = plan.mechanism
    carriers = [int(k) for k in plan.extra["ofdm"]["carriers"]]
    silent = {"carriers": carriers, "delivered_k": [0.0] * len(carriers), "delivered_k_std": [0.0] * len(carriers)}
    a = ojs.analyse(plan, silent)
    assert a is not None and a["charged"] and max(a["bound"]) == 0.0
    charge = ojs.shortfall_charge(plan, booked, 0, silent)
    od = plan.extra["ofdm"]
    assert charge.extra["jammer_shortfall"]["charged_sigma_eff"] == pytest.approx(
        booked.sigma_eff * ojs._multiplier(plan, od["noise_var"] - od["jammer_booked"], 1.0)
        / ojs._multiplier(plan, od["noise_var"], 1.0), rel=1e-9)


def test_verify_recomputes_the_charge_and_refuses_one_rewritten_to_charge_less():
    plan, *_ , lay, _, _ = _plan()
    assert ojs.for_measurement({"carriers": [1]}) is ojs and ojs.for_measurement({"delivered": 1.0}) is jammer_shortfall
    booked = plan.mechanism
    m = _slot(plan, lay, np.random.default_rng(7), power=0.7)
    charge = ojs.shortfall_charge(plan, booked, 0, m)
    rec = {"sigma_eff": charge.sigma_eff, "extra": charge.extra}
    assert ojs.check_any_charge(rec, booked, 0.0, plan) == ""
    assert "re-derived plan" in ojs.check_any_charge(rec, booked, 0.0, None)
    less = dict(rec, sigma_eff=charge.sigma_eff * 1.5)                       # a smaller top-up: less charged
    assert "sigma_eff is" in ojs.check_any_charge(less, booked, 0.0, plan)
    js = dict(charge.extra["jammer_shortfall"])
    js["delivered_k"] = [v * 1.1 for v in js["delivered_k"]]                 # a measurement rewritten upwards
    assert ojs.check_any_charge({"sigma_eff": charge.sigma_eff, "extra": {**charge.extra, "jammer_shortfall": js}},
                        booked, 0.0, plan) != ""
    js = dict(charge.extra["jammer_shortfall"], shape="per subcarrier")
    assert "shape" in ojs.check_any_charge({"sigma_eff": charge.sigma_eff, "extra": {**charge.extra, "jammer_shortfall": js}},
                                   booked, 0.0, plan)


@pytest.mark.parametrize("cut", [0.25, 0.05])
def test_a_slot_with_a_gap_is_named_and_its_jammer_charged_away_through_the_release_rule(tmp_path, cut):
    """As the single-carrier slot (tests/radio/test_jammer_slots.py): a slot missing its last ``cut`` is not read
    as a weaker jammer but names the gap; the real release rule charges the jammer's share away (channel noise
    only) and retries; the clean retry is measured."""
    from otafl_sdr.config.schema import PrivacyConfig
    from otafl_sdr.privacy.ledger import PrivacyLedger, read_chain
    from otafl_sdr.rounds.accounting import release
    from otafl_sdr.transmission import Reception
    from otafl_sdr.transport import Attempt
    plan, *_ , lay, _, _ = _plan()
    rng = np.random.default_rng(9)
    m = _slot(plan, lay, rng, cut=cut)
    assert "its slot is not steady" in m["gap"] and "a gap in its burst" in m["gap"]
    if cut == 0.25:
        assert m["gap"].split(": ")[1].startswith("1.") and " / 0.0" in m["gap"]      # the last quarter empty
    # the budget holds a release at channel noise alone (this plan's channel share is small: sensitivity / sigma 84)
    ledger = PrivacyLedger(PrivacyConfig(eps=1e4, delta=1e-5, accountant="pld", report=["pld"]),
                           tmp_path / "privacy_ledger.jsonl")
    slots = iter([m, _slot(plan, lay, rng)])

    def send(attempt):
        rec = Reception(np.ones(4), ok=True, extra={})
        attach(rec, next(slots))
        return Attempt(rec)
    out = release(ledger, plan, 1, retries=1, enforce=True, send=send)
    assert out.reception.ok and out.attempts == 2 and "gap" not in out.reception.extra["jammer_slots"]
    assert any("its slot is not steady" in n for n in out.notes)
    entries, torn = read_chain(tmp_path / "privacy_ledger.jsonl")
    faults = [e for e in entries if e["extra"].get("fault")]
    gaps = [e for e in faults if e["extra"]["fault"].startswith("jammer its slot is not steady")]
    assert not torn and [e["attempt"] for e in gaps] == [0]                # the retry's slot (calm) is measured
    assert gaps[0]["extra"]["charged"] == "channel noise only"
    assert gaps[0]["sigma_eff"] == pytest.approx(np.sqrt(plan.sigma_c2) / plan.alpha_u)
