"""Paper 001's privacy bound (accountant ``cdpb``): Theorem 1 against hand-computed values, Lemma 3 against
Theorem 1, and a cross-check against dp-accounting's exact Poisson-subsampled Gaussian RDP."""
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.privacy.cdpb_rdp import CdpbAccountant, lemma3_round, paper_literal_round, theorem1, theorem1_round
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.transmission import Mechanism


def test_theorem1_hand_values():
    # alpha = 2, p = 0.5, r = 1, tau = 10: eps = 10 (log 2 + 2 log(0.5 e + 1)), log(0.5 e + 1) = 0.85829753...
    assert theorem1(2, 0.5, 1.0, 10) == pytest.approx(10 * (0.6931471805599453 + 2 * 0.8582975333721057), rel=1e-12)
    # alpha = 3, p = 0.2, r = 0.5, tau = 4: eps = 4 (log 2 + 3 log(0.2 e^{1} + 1)) / 2
    assert theorem1(3, 0.2, 0.5, 4) == pytest.approx(4 * (math.log(2) + 3 * math.log(0.2 * math.e + 1)) / 2, rel=1e-12)
    # the quirk the extract notes: it does not vanish as p -> 0
    assert theorem1_round(2, 0.0, 5.0) == pytest.approx(math.log(2))
    # vectorised over orders gives the same numbers as the scalar path
    orders = np.array([2.0, 3.0, 7.0, 64.0])
    for p, r in [(0.3, 0.01), (0.9, 40.0), (1.0, 800.0)]:
        vec = theorem1_round(orders, p, r)
        assert np.allclose(vec, [theorem1_round(int(a), p, r) for a in orders], rtol=1e-12)


def test_lemma3_hand_value_and_bound():
    # alpha = 2: eq. (34) is log(1 + p^2 min{4(E2 - 1), 2 E2}), E2 = e^{2r}
    p, r = 0.4, 0.3
    e2 = math.exp(2 * r)
    assert lemma3_round(2, p, r) == pytest.approx(math.log(1 + p * p * min(4 * (e2 - 1), 2 * e2)), rel=1e-12)
    # eq. (37) loosens eq. (34): Lemma 3 <= Theorem 1 everywhere
    for a in (2, 3, 5, 12, 40):
        for p in (0.01, 0.3, 0.7, 1.0):
            for r in (1e-4, 0.05, 0.5, 3.0, 30.0):
                assert lemma3_round(a, p, r) <= theorem1_round(a, p, r) + 1e-12


def test_dp_accounting_cross_check_per_round():
    """Exact Poisson-subsampled Gaussian RDP (dp-accounting) <= Lemma 3 <= Theorem 1 at integer orders."""
    for a in (2, 3, 4, 8, 16, 32):
        for p in (0.05, 0.37, 0.6, 0.93, 1.0):
            for z in (0.3, 0.6, 1.0, 2.0, 8.0):
                r = 1 / (2 * z * z)
                exact = float(np.atleast_1d(dp_rdp._compute_rdp_poisson_subsampled_gaussian(p, z, [a]))[0])
                assert exact <= lemma3_round(a, p, r) + 1e-9
                assert lemma3_round(a, p, r) <= theorem1_round(a, p, r) + 1e-12
    # p = 1: dp-accounting's Gaussian is alpha r exactly, and Theorem 1 bounds it
    for a in (2, 5, 20):
        acc = dp_rdp.RdpAccountant(orders=[a])
        acc.compose(dp_accounting.GaussianDpEvent(0.7))
        assert acc._rdp[0] == pytest.approx(a / (2 * 0.49), rel=1e-9)
        assert theorem1_round(a, 1.0, 1 / (2 * 0.49)) >= acc._rdp[0]


def _records():
    rng = np.random.default_rng(3)
    out = []
    for m in range(1, 9):
        out.append(Mechanism(round=m, sensitivity=0.1, sigma_eff=float(rng.uniform(0.05, 0.4)),
                             sampling_prob=float(rng.uniform(0.2, 0.95)), extra={"rdp_order": 3}))
    out.append(Mechanism(round=9, sensitivity=0.0, sigma_eff=0.0, uses_data=False))      # costs nothing
    return out


def test_accountant_composes_and_is_above_dp_accounting():
    load_plugins()
    assert ACCOUNTANTS.get("cdpb") is CdpbAccountant
    acc = CdpbAccountant(1e-5)
    ref = dp_rdp.RdpAccountant(orders=list(acc.orders))
    for m in _records():
        acc.step(m)
        if m.uses_data:
            ref.compose(dp_accounting.PoissonSampledDpEvent(m.sampling_prob,
                                                            dp_accounting.GaussianDpEvent(m.sigma_eff / m.sensitivity)))
    # RDP at the designed order: the sum of the per-round Theorem 1 terms (composition, Remark 1)
    manual = sum(theorem1_round(3, m.sampling_prob, m.sensitivity ** 2 / (2 * m.sigma_eff ** 2))
                 for m in _records() if m.uses_data)
    assert acc.report_order == 3
    assert acc.rdp_at() == pytest.approx(manual, rel=1e-12)
    orders, rdp = acc.rdp()
    assert rdp[list(orders).index(3)] == pytest.approx(manual, rel=1e-12)
    # (eps, delta): Theorem 1's curve is looser than the exact one, and the conversion is dp-accounting's
    eps = acc.epsilon()
    assert ref.get_epsilon(1e-5) < eps < math.inf
    assert eps == pytest.approx(dp_rdp.compute_epsilon(list(orders), list(rdp), 1e-5)[0])
    # replay from the state dict gives the same epsilon
    clone = CdpbAccountant(1e-5)
    clone.load_state_dict(acc.state_dict())
    assert clone.epsilon() == pytest.approx(eps)
    # a noiseless data round is non-private
    acc.step(Mechanism(round=10, sensitivity=0.1, sigma_eff=0.0))
    assert acc.epsilon() == math.inf


def test_ledger_with_cdpb_accountant(tmp_path):
    load_plugins()
    cfg = PrivacyConfig(eps=1e9, delta=1e-5, accountant="cdpb", report=["rdp"], enforce=True)
    led = PrivacyLedger(cfg, tmp_path / "ledger.jsonl")
    for m in _records():
        eps = led.record(m)
    assert eps["cdpb"] > eps["rdp"] > 0
    assert (tmp_path / "ledger.jsonl").read_text().count("\n") == 9


def test_paper_literal_is_the_printed_ratio():
    # r = W^2 / sigma_q^2 with the total noise power (no rho): the paper's Theorem 1 as printed
    assert paper_literal_round(2, 0.5, 1.0, 4.0) == pytest.approx(theorem1_round(2, 0.5, 0.25))
