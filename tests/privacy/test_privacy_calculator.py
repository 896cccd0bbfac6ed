"""The `account` calculator (T identical rounds in one step) against the ledger's round-by-round path and
dp-accounting run directly; the inverse (noise for a target eps) lands within 1 % below the target."""
import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.privacy.calculator import epsilon_of_rounds, noise_for_target
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.transmission import Mechanism

DELTA = 1e-5


def _ledger_eps(z, T, q):
    pc = PrivacyConfig(eps=float("inf"), delta=DELTA, accountant="rdp", report=["paper", "rdp", "pld"], enforce=False)
    led = PrivacyLedger(pc, None)
    for t in range(1, T + 1):
        eps = led.record(Mechanism(round=t, sensitivity=0.5, sigma_eff=0.5 * z, sampling_prob=q))
    return eps


@pytest.mark.parametrize("z,T,q", [(2.0, 30, 1.0), (0.8, 5, 1.0), (1.5, 12, 0.3)])
def test_calculator_equals_the_ledger(z, T, q):
    by_ledger = _ledger_eps(z, T, q)
    for name in ("paper", "rdp", "pld"):
        fast = epsilon_of_rounds(name, z, T, DELTA, q)
        if by_ledger[name] is None:
            assert fast is None
        else:
            assert fast == pytest.approx(by_ledger[name], rel=2e-3), name


def test_calculator_against_dp_accounting_directly():
    z, T, q = 1.2, 1000, 0.05
    rdp = RdpAccountant()
    rdp.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), T)
    assert epsilon_of_rounds("rdp", z, T, DELTA, q) <= rdp.get_epsilon(DELTA) + 1e-9   # more orders only help
    assert epsilon_of_rounds("rdp", z, T, DELTA, q) == pytest.approx(rdp.get_epsilon(DELTA), rel=0.05)
    pld = PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), T)
    assert epsilon_of_rounds("pld", z, T, DELTA, q) == pytest.approx(pld.get_epsilon(DELTA), rel=1e-2)


@pytest.mark.parametrize("name,q", [("pld", 1.0), ("rdp", 1.0), ("paper", 1.0), ("pld", 0.1), ("rdp", 0.1)])
def test_noise_for_target_spends_the_target_within_one_percent(name, q):
    z = noise_for_target(name, 1.0, 100, DELTA, q)
    eps = epsilon_of_rounds(name, z, 100, DELTA, q)
    assert 0.99 <= eps <= 1.0
    if name == "pld":                       # independent check of the tight figure
        acc = PLDAccountant(value_discretization_interval=1e-4)
        ev = dp_accounting.GaussianDpEvent(z)
        acc.compose(ev if q == 1 else dp_accounting.PoissonSampledDpEvent(q, ev), 100)
        assert acc.get_epsilon(DELTA) == pytest.approx(eps, rel=1e-2)


def test_paper_closed_form_does_not_cover_subsampling():
    assert epsilon_of_rounds("paper", 2.0, 10, DELTA, 0.5) is None
    assert noise_for_target("paper", 1.0, 10, DELTA, 0.5) is None
