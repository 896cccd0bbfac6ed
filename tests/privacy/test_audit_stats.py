"""The audit's statistics (privacy/audit_stats.py): the mu-GDP conversions against dp-accounting, the
Gaussian fit's coverage and the Clopper-Pearson bound on known samples."""
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from scipy import stats

from otafl_sdr.privacy import audit_stats as st


@pytest.mark.parametrize("rounds,z", [(1, 5.0), (30, 20.0), (8, 10.0)])
def test_gdp_eps_of_composed_gaussians_matches_dp_accounting(rounds, z):
    """Composed Gaussian mechanisms are exactly mu-GDP with mu = sqrt(T)/z: the closed form's eps at delta
    equals dp-accounting's PLD epsilon of the same rounds."""
    acc = PLDAccountant(value_discretization_interval=1e-4)
    for _ in range(rounds):
        acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=z))
    mu = st.gdp_mu([1.0] * rounds, [z] * rounds)
    assert mu == pytest.approx(math.sqrt(rounds) / z)
    assert st.gdp_eps(mu, 1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=2e-3)


def test_gdp_delta_and_eps_are_inverse_and_monotone():
    for mu in (0.05, 0.3, 1.0, 4.0):
        e = st.gdp_eps(mu, 1e-5)
        assert st.gdp_delta(e, mu) == pytest.approx(1e-5, rel=1e-6)
    assert st.gdp_eps(0.2, 1e-5) < st.gdp_eps(0.3, 1e-5)
    assert st.gdp_eps(0.0, 1e-5) == 0.0 and st.gdp_eps(-1.0, 1e-5) == 0.0
    assert st.gdp_eps(math.inf, 1e-5) == st.EPS_MAX
    a = np.linspace(0, 1, 11)
    assert np.allclose(st.gdp_tradeoff(a, 0.0), 1 - a)


def test_gaussian_fit_lower_limit_covers_the_true_mu():
    """Over 200 repetitions the one-sided 95 % lower limit falls below the true mu about 95 % of the time."""
    rng = np.random.default_rng(3)
    mu, n = 0.3, 2000
    below = sum(st.gaussian_fit(rng.normal(mu, 1, n), rng.normal(0, 1, n), 0.95).mu_lower <= mu for _ in range(200))
    assert 180 <= below <= 200
    fit = st.gaussian_fit(rng.normal(mu, 2, n), rng.normal(0, 2, n), 0.95)
    assert fit.mu_hat == pytest.approx(mu / 2, abs=0.07)


def test_gaussian_fit_of_separated_samples_is_infinite():
    fit = st.gaussian_fit([5.0, 5.0, 5.0], [0.0, 0.0, 0.0], 0.95)
    assert fit.mu_lower == math.inf
    with pytest.raises(ValueError):
        st.gaussian_fit([1.0], [0.0, 1.0], 0.95)


def test_clopper_pearson():
    assert st.cp_upper(0, 10, 0.95) == pytest.approx(1 - 0.05 ** (1 / 10))
    assert st.cp_upper(3, 20, 0.95) == pytest.approx(stats.beta.ppf(0.95, 4, 17))
    assert st.cp_upper(5, 5, 0.95) == 1.0
    # a classifier with no error on 2 x 500 evaluation trials: the bound of perfect distinguishing
    x1, x0 = np.full(1000, 3.0), np.zeros(1000)
    cp = st.clopper_pearson_eps(x1, x0, 1e-5, 0.95)
    assert cp["false_positives"] == cp["false_negatives"] == 0
    assert cp["eps"] == pytest.approx(st.perfect_distinguishing_eps(500, 500, 1e-5, 0.95))
    assert cp["eps"] == pytest.approx(math.log((1 - 1e-5 - st.cp_upper(0, 500, 0.975)) / st.cp_upper(0, 500, 0.975)))
    # identical distributions certify (almost) nothing
    rng = np.random.default_rng(0)
    assert st.clopper_pearson_eps(rng.normal(0, 1, 4000), rng.normal(0, 1, 4000), 1e-5, 0.95)["eps"] < 0.1


def test_eps_from_rates_is_the_dp_inequality():
    """(eps, delta)-DP: FPR + e^eps FNR >= 1 - delta; the figure is the eps at which it is tight."""
    e = st.eps_from_rates(0.1, 0.2, 0.0)          # the tighter of FNR + e^eps FPR >= 1 and FPR + e^eps FNR >= 1
    assert e == pytest.approx(math.log(0.8 / 0.1))
    assert 0.2 + math.exp(e) * 0.1 == pytest.approx(1.0)
    assert st.eps_from_rates(0.5, 0.5, 0.0) == 0.0


def test_correlation_z():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=100_000), rng.normal(size=100_000)
    assert abs(st.correlation_z(a, b)) < 5
    assert st.correlation_z(a, a) == pytest.approx(math.sqrt(100_000))
