"""Accountant ``otafd`` (Theorem 2 / eq. (18) of paper 003), its calibration and the ledger figures beside it."""
import math

import dp_accounting
import pytest
from dp_accounting import gaussian_mechanism
from dp_accounting.rdp import rdp_privacy_accountant

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.errors import BudgetExceeded
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.privacy.otafd_accountant import OtafdAccountant, required_multiplier, theorem2_epsilon
from otafl_sdr.privacy.rdp import DEFAULT_ORDERS
from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.transmission import Mechanism

DELTA = 1e-5


def mech(r, z, sens=0.01, **kw):
    return Mechanism(round=r, sensitivity=sens, sigma_eff=z * sens, **kw)


def test_closed_form_is_eq18():
    acc = OtafdAccountant(DELTA)
    T, z = 12, 7.5
    for r in range(1, T + 1):
        acc.step(mech(r, z))
    # sigma = Delta sqrt(2 T ln(1/delta)) / eps  <=>  eps = sqrt(2 T ln(1/delta)) / z
    assert acc.epsilon() == pytest.approx(math.sqrt(2 * T * math.log(1 / DELTA)) / z, rel=1e-12)
    acc.step(Mechanism(round=T + 1, sensitivity=0.0, sigma_eff=0.0, uses_data=False))     # free round
    assert acc.epsilon() == pytest.approx(math.sqrt(2 * T * math.log(1 / DELTA)) / z, rel=1e-12)
    acc.step(mech(T + 2, 3.0))                                                            # heterogeneous noise
    mu2 = T / z ** 2 + 1 / 9
    assert acc.epsilon() == pytest.approx(theorem2_epsilon(mu2, DELTA), rel=1e-12)
    acc.step(mech(T + 3, 3.0, sampling_prob=0.5))                                         # not covered
    assert acc.epsilon() is None
    assert ACCOUNTANTS.get("otafd") is OtafdAccountant


@pytest.mark.parametrize("analysis", ["otafd", "paper", "rdp", "pld"])
def test_required_multiplier_meets_the_target_under_each_analysis(analysis):
    load_plugins()
    T, eps = 15, 1.0
    z = required_multiplier(T, eps, DELTA, analysis)
    acc = ACCOUNTANTS.get(analysis)(DELTA)
    for r in range(1, T + 1):
        acc.step(mech(r, z))
    got = acc.epsilon()
    assert got <= eps and got > eps * (1 - 2e-3)          # the margin is 1e-4 in z
    tighter = ACCOUNTANTS.get(analysis)(DELTA)
    for r in range(1, T + 1):
        tighter.step(mech(r, z * 0.99))
    assert tighter.epsilon() > eps


def test_calibrations_order_as_expected():
    # at eps = 1, delta = 1e-5: exact Gaussian (pld) < rdp < Theorem 2 < paper 000's closed form
    zs = {a: required_multiplier(20, 1.0, DELTA, a) for a in ("otafd", "paper", "rdp", "pld")}
    assert zs["pld"] < zs["rdp"] < zs["otafd"] < zs["paper"]
    assert zs["pld"] == pytest.approx(math.sqrt(20) * gaussian_mechanism.get_sigma_gaussian(1.0, DELTA), rel=2e-4)


def test_ledger_keeps_rdp_and_pld_beside_theorem2(tmp_path):
    cfg = PrivacyConfig(eps=1.0, delta=DELTA, accountant="otafd", report=["paper", "rdp", "pld"])
    led = PrivacyLedger(cfg, tmp_path / "ledger.jsonl")
    zs = [20.0, 25.0, 30.0, 18.0]
    for r, z in enumerate(zs, 1):
        led.record(mech(r, z, sens=0.003))
    eps = led.epsilons()
    mu2 = sum(1 / z ** 2 for z in zs)
    assert eps["otafd"] == pytest.approx(math.sqrt(2 * math.log(1 / DELTA) * mu2), rel=1e-12)
    assert eps["paper"] == pytest.approx(mu2 / 2 + 2 * math.sqrt(mu2 / 2 * math.log(1 / DELTA)), rel=1e-12)
    direct = rdp_privacy_accountant.RdpAccountant(orders=DEFAULT_ORDERS)
    for z in zs:
        direct.compose(dp_accounting.GaussianDpEvent(z))
    assert eps["rdp"] == pytest.approx(direct.get_epsilon(DELTA), rel=1e-12)
    exact = gaussian_mechanism.get_epsilon_gaussian(1 / math.sqrt(mu2), DELTA)
    assert exact <= eps["pld"] <= exact + 1e-3
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 4
    # a resumed ledger replays to the same figures
    again = PrivacyLedger.resume(cfg, tmp_path / "ledger.jsonl")
    assert again.epsilons() == pytest.approx(eps)


def test_ledger_refuses_the_round_after_the_design(tmp_path):
    T = 6
    z = required_multiplier(T, 1.0, DELTA, "otafd")
    led = PrivacyLedger(PrivacyConfig(eps=1.0, delta=DELTA, accountant="otafd", report=["rdp"]), None)
    for r in range(1, T + 1):
        led.check(mech(r, z))
        led.record(mech(r, z))
    assert led.epsilon <= 1.0
    with pytest.raises(BudgetExceeded, match="otafd"):
        led.check(mech(T + 1, z))
