"""Paper 002's Gaussian-DP mathematics (otafl_sdr/privacy/fdp_analysis.py): the general H_0 formula
against the closed forms, the composition baseline, limits in T, T = 1, conversions against dp-accounting,
and the feasible (0 <= lambda <= 1) bound against a generic QP solver."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import optimize

from otafl_sdr.learning.lr_schedules import schedule_lrs
from otafl_sdr.privacy import fdp_analysis as fa

SCHEDULES = ("constant", "cyclic", "stagewise", "continuous")


# ---------------------------------------------------------------- the general formula vs Eqs. 17 / 21
@pytest.mark.parametrize("T", [1, 2, 3, 10, 150, 600, 5000, 200000])
@pytest.mark.parametrize("K,lr,L", [(2, 0.1, 1.0), (50, 0.01, 1.0), (200, 0.05, 2.0), (5, 1e-4, 0.5)])
def test_general_formula_reproduces_eq17(T, K, lr, L):
    m, sigma, V = 50, 0.7, 3.0
    log_rho, gamma = fa.table3_fedavg("constant", T, K, lr, L, V, m)
    general = fa.paper_mu(log_rho, gamma, sigma / math.sqrt(m))
    closed = fa.gdp_mu_fedavg_const(T, K, lr, L, V, m, sigma)
    assert general == pytest.approx(closed, rel=1e-10, abs=0)


@pytest.mark.parametrize("T", [1, 2, 7, 100, 3000, 200000])
@pytest.mark.parametrize("alpha,L", [(2.0, 1.0), (1.01, 1.0), (10.0, 0.3), (100.0, 99.0)])
def test_general_formula_reproduces_eq21(T, alpha, L):
    m, sigma, V = 20, 0.3, 10.0
    log_rho, gamma = fa.table3_fedprox(T, alpha, L, V, m)
    general = fa.paper_mu(log_rho, gamma, sigma / math.sqrt(m))
    assert general == pytest.approx(fa.gdp_mu_fedprox(T, alpha, L, V, m, sigma), rel=1e-10, abs=0)
    # eq. (21) in the form printed in Table 1
    a_t, b_t = alpha ** T if T < 300 else math.inf, (alpha - L) ** T if T < 300 else 0.0
    if T < 300:
        table1 = 2 * V / (math.sqrt(m) * alpha * sigma) * math.sqrt((2 * alpha - L) / L) * math.sqrt(
            (a_t - b_t) / (a_t + b_t))
        assert general == pytest.approx(table1, rel=1e-10)


def test_general_formula_reproduces_eq18_cyclic():
    for restore in (False, True):
        for T in (1, 4, 400):
            K, lr, L, V, m, sigma = 20, 0.05, 1.5, 2.0, 30, 1.0
            log_rho, gamma = fa.table3_fedavg("cyclic", T, K, lr, L, V, m, restore_lr=restore)
            closed = fa.gdp_mu_fedavg_cyclic(T, K, lr, L, V, m, sigma, restore_lr=restore)
            assert fa.paper_mu(log_rho, gamma, sigma / math.sqrt(m)) == pytest.approx(closed, rel=1e-10)
    # restoring the dropped factor multiplies eq. (18) by lr exactly
    assert fa.gdp_mu_fedavg_cyclic(9, 20, 0.05, 1.5, 2.0, 30, 1.0, restore_lr=True) == pytest.approx(
        0.05 * fa.gdp_mu_fedavg_cyclic(9, 20, 0.05, 1.5, 2.0, 30, 1.0), rel=1e-12)


def test_no_overflow_for_huge_T_and_rho():
    # (1 + lr L)^{K T} = 2^{200 * 10^6} overflows any float; the log-space formula does not
    log_rho, gamma = fa.table3_fedavg("constant", 10 ** 6, 200, 1.0, 1.0, 1.0, 10)
    mu = fa.paper_mu(log_rho, gamma, 0.1)
    assert math.isfinite(mu) and mu > 0
    assert mu == pytest.approx(fa.gdp_mu_fedavg_const(math.inf, 200, 1.0, 1.0, 1.0, 10, 0.1 * math.sqrt(10)),
                               rel=1e-9)


# ---------------------------------------------------------------- never worse than composition
def _cases():
    for sched in SCHEDULES:
        for K, lr, L in [(3, 0.1, 1.0), (40, 0.01, 2.0), (10, 0.5, 0.2)]:
            for T in (1, 2, 5, 60):
                yield ("table3", sched, K, lr, L, T)
                yield ("exact", sched, K, lr, L, T)
    for alpha, L in [(2.0, 1.0), (5.0, 0.5)]:
        for T in (1, 3, 50):
            yield ("prox", "constant", 10, 0.1, L, T, alpha)
            yield ("prox-exact", "cyclic", 10, 0.1, L, T, alpha)


@pytest.mark.parametrize("case", list(_cases()))
def test_mu_gdp_never_exceeds_composition(case):
    kind, sched, K, lr, L, T = case[:6]
    V, m = 2.0, 25
    if kind == "table3":
        log_rho, gamma = fa.table3_fedavg(sched, T, K, lr, L, V, m, restore_lr=True)
    elif kind == "exact":
        log_rho, gamma = fa.fedavg_rho_gamma(schedule_lrs(sched, lr, T, K), L, V, 1 / m)
    elif kind == "prox":
        log_rho, gamma = fa.table3_fedprox(T, case[6], L, V, m)
    else:
        log_rho, gamma = fa.fedprox_rho_gamma(schedule_lrs(sched, lr, T, K), case[6], L, V, 1 / m)
    s = 0.5 / math.sqrt(m)
    paper, feas, comp = fa.paper_mu(log_rho, gamma, s), fa.feasible_mu(log_rho, gamma, s), fa.composition_mu(gamma, s)
    assert paper <= comp * (1 + 1e-12)
    assert paper * (1 - 1e-12) <= feas <= comp * (1 + 1e-12)
    if T >= 2:
        assert paper < comp          # rho > 1: the interpolation strictly beats composition


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 5.0), st.floats(0.05, 3.0)), min_size=1, max_size=25))
def test_bounds_ordered_for_arbitrary_rounds(rows):
    log_rho, gamma, sigma = (np.array(c) for c in zip(*rows))
    if gamma.sum() == 0:
        return
    p, f, c = fa.paper_mu(log_rho, gamma, sigma), fa.feasible_mu(log_rho, gamma, sigma), fa.composition_mu(gamma, sigma)
    assert p <= f * (1 + 1e-9) + 1e-12 and f <= c * (1 + 1e-9) + 1e-12   # mu ~ 1e-275 underflows to 0


# ---------------------------------------------------------------- monotone in T towards the limit
@pytest.mark.parametrize("fn,args", [
    (fa.gdp_mu_fedavg_const, (20, 0.05, 1.0, 1.0, 50, 1.0)),
    (fa.gdp_mu_fedavg_cyclic, (20, 0.05, 1.0, 1.0, 50, 1.0)),
    (fa.gdp_mu_fedavg_stagewise, (20, 0.05, 1.0, 50, 1.0)),
    (fa.gdp_mu_fedavg_contdecay, (20, 0.05, 1.0, 50, 1.0)),
    (fa.gdp_mu_fedprox, (3.0, 1.0, 1.0, 50, 1.0)),
])
def test_closed_forms_increase_in_T_to_their_limit(fn, args):
    Ts = [1, 2, 3, 5, 10, 30, 100, 1000, 10 ** 5]
    vals = [fn(T, *args) for T in Ts]
    limit = fn(math.inf, *args)
    assert all(b >= a for a, b in zip(vals, vals[1:]))
    assert all(v <= limit * (1 + 1e-12) for v in vals)
    assert vals[-1] == pytest.approx(limit, rel=1e-4)


@pytest.mark.parametrize("method", ["constant", "cyclic", "fedprox"])
def test_general_formula_increases_in_T_and_converges(method):
    """Rounds that repeat the same (rho, gamma): the exact per-step sensitivities, fed round by round."""
    K, lr, L, V, m = 10, 0.05, 1.0, 1.0, 20
    lrs = schedule_lrs("constant" if method == "fedprox" else method, lr, 400, K)
    rg = (lambda x: fa.fedprox_rho_gamma(x, 3.0, L, V, 1 / m)) if method == "fedprox" else \
        (lambda x: fa.fedavg_rho_gamma(x, L, V, 1 / m))
    mus = []
    for T in (1, 2, 4, 8, 16, 50, 100, 200, 400):
        lrho, g = rg(lrs[:T])
        mus.append(fa.paper_mu(lrho, g, 1 / math.sqrt(m)))
    assert all(b >= a * (1 - 1e-12) for a, b in zip(mus, mus[1:]))
    comp = fa.composition_mu(rg(lrs)[1], 1 / math.sqrt(m))
    assert mus[-1] < comp / 5
    assert (mus[-1] - mus[-2]) / mus[-1] < 1e-6        # flattened out


@pytest.mark.parametrize("sched", ["stagewise", "continuous"])
def test_decaying_schedules_stay_below_eq19_eq20_limits(sched):
    """With gamma_t shrinking, later (nearly sensitivity-free) noisy rounds hide earlier ones: the general
    formula is not monotone in T there, but it stays below the T -> infinity value of Eq. 19 / 20."""
    K, lr, L, V, m = 10, 0.05, 1.0, 1.0, 20
    lrs = schedule_lrs(sched, lr, 1000, K)
    cap = (fa.gdp_mu_fedavg_stagewise(math.inf, K, lr, V, m, 1.0) if sched == "stagewise"
           else fa.gdp_mu_fedavg_contdecay(math.inf, K, lr, V, m, 1.0, restore_lr=True))
    for T in (1, 3, 30, 300, 1000):
        lrho, g = fa.fedavg_rho_gamma(lrs[:T], L, V, 1 / m)
        assert fa.paper_mu(lrho, g, 1 / math.sqrt(m)) <= cap


def test_limits_match_the_extract():
    K, lr, L, V, m, s = 7, 0.1, 1.0, 2.0, 10, 0.5
    r = (1 + lr * L) ** K
    assert fa.gdp_mu_fedavg_const(math.inf, K, lr, L, V, m, s) == pytest.approx(
        2 * lr * V * K / (math.sqrt(m) * s) * math.sqrt((r + 1) / (r - 1)), rel=1e-12)
    assert fa.gdp_mu_fedavg_stagewise(math.inf, K, lr, V, m, s) == pytest.approx(
        2 * math.sqrt(2) * lr * V * K / (math.sqrt(m) * s), rel=1e-12)
    a = 4.0
    assert fa.gdp_mu_fedprox(math.inf, a, L, V, m, s) == pytest.approx(
        2 * V / (math.sqrt(m) * a * s) * math.sqrt((2 * a - L) / L), rel=1e-12)


# ---------------------------------------------------------------- T = 1 is one Gaussian mechanism
@pytest.mark.parametrize("sched", SCHEDULES)
def test_T1_is_a_single_gaussian_mechanism(sched):
    K, lr, L, V, m, sigma = 12, 0.03, 1.7, 4.0, 40, 0.8
    lrs = schedule_lrs(sched, lr, 1, K)
    log_rho, gamma = fa.fedavg_rho_gamma(lrs, L, V, 1 / m)
    single = math.sqrt(m) * gamma[0] / sigma          # sensitivity / aggregate noise
    for fn in (fa.paper_mu, fa.feasible_mu):
        assert fn(log_rho, gamma, sigma / math.sqrt(m)) == pytest.approx(single, rel=1e-13)
    assert fa.gdp_mu_fedavg_const(1, K, lr, L, V, m, sigma) == pytest.approx(2 * lr * V * K / (math.sqrt(m) * sigma))
    assert fa.gdp_mu_fedprox(1, 3.0, L, V, m, sigma) == pytest.approx(2 * V / (math.sqrt(m) * 3.0 * sigma))
    assert fa.gdp_mu_fedavg_stagewise(1, K, lr, V, m, sigma) == pytest.approx(2 * lr * V * K / (math.sqrt(m) * sigma))


# ---------------------------------------------------------------- sensitivities
def test_lemma21_product_equals_eta_KT_form():
    rng = np.random.default_rng(0)
    for _ in range(20):
        e = rng.uniform(0, 0.3, size=rng.integers(1, 30))
        L = rng.uniform(0.1, 3)
        eta_KT = e[0] + sum(e[k] * np.prod(1 + e[:k] * L) for k in range(1, len(e)))   # Lemma 21
        assert math.exp(fa.fedavg_rho_gamma(e, L, 1.0, 1.0)[0][0]) == pytest.approx(1 + eta_KT * L, rel=1e-12)


def test_lemmas_22_23_constant_lr_values_and_table3_sup():
    alpha, L, lr, K, V, m = 3.0, 1.0, 0.1, 15, 2.0, 10
    lrho, g = fa.fedprox_rho_gamma(np.full(K, lr), alpha, L, V, 1 / m)
    aL = alpha - L
    assert g[0] == pytest.approx(2 * V / m * (1 - (1 - lr * alpha) ** K) / alpha, rel=1e-12)      # Lemma 22
    assert math.exp(lrho[0]) == pytest.approx(alpha / aL - L * (1 - lr * aL) ** K / aL, rel=1e-12)   # Lemma 23
    t_lrho, t_g = fa.table3_fedprox(1, alpha, L, V, m)
    assert lrho[0] < t_lrho[0] and g[0] < t_g[0]          # Table 3 is the K -> infinity supremum


@pytest.mark.parametrize("sched", ["cyclic", "continuous"])
def test_table3_bounds_the_exact_sensitivities(sched):
    K, lr, L, V, m, T = 25, 0.2, 1.3, 1.0, 10, 300
    e_lrho, e_g = fa.fedavg_rho_gamma(schedule_lrs(sched, lr, T, K), L, V, 1 / m)
    t_lrho, t_g = fa.table3_fedavg(sched, T, K, lr, L, V, m, restore_lr=True)
    assert np.all(e_lrho <= t_lrho * (1 + 1e-12)) and np.all(e_g <= t_g * (1 + 1e-12))
    if sched == "cyclic":   # with c = H_K / ln(K+1) the sum of the rates is exact
        assert np.allclose(e_g, t_g, rtol=1e-12)
    # as printed (lr dropped) gamma is larger by 1/lr
    assert np.allclose(fa.table3_fedavg(sched, T, K, lr, L, V, m)[1], t_g / lr)


def test_eq19_eq20_bound_the_general_formula():
    K, lr, L, V, m, s = 10, 0.05, 1.0, 1.0, 20, 1.0
    for T in (1, 5, 200):
        lrho, g = fa.table3_fedavg("stagewise", T, K, lr, L, V, m)
        assert fa.paper_mu(lrho, g, s / math.sqrt(m)) <= fa.gdp_mu_fedavg_stagewise(T, K, lr, V, m, s) * (1 + 1e-12)
        lrho, g = fa.table3_fedavg("continuous", T, K, lr, L, V, m)
        assert fa.paper_mu(lrho, g, s / math.sqrt(m)) <= fa.gdp_mu_fedavg_contdecay(T, K, lr, V, m, s) * (1 + 1e-12)


def test_constants_c_and_z():
    for K in (1, 2, 5, 50, 200, 10 ** 4):
        assert 1 <= fa.harmonic_c(K) < 1.543
    assert fa.contdecay_z(5) == pytest.approx(3.29, abs=0.01) and fa.contdecay_z(200) == pytest.approx(8.48, abs=0.01)


# ---------------------------------------------------------------- the paper's minimiser and the feasible bound
def test_paper_minimiser_needs_lambda_above_one():
    for T in (2, 3, 10):
        r = 1.5
        lam = fa.paper_lambdas(np.full(T, math.log(r)), np.ones(T))
        assert lam[0] == pytest.approx(r ** (T - 1) * (r + 1) / (r ** T + 1), rel=1e-12)
        assert lam[0] > 1
    assert fa.paper_lambdas([0.0], [1.0])[0] == pytest.approx(1.0)


def _qp(rho, g, s):
    """Reference: minimise sum (s_t/sigma_t)^2 over carries r_t >= 0 (0 <= lambda <= 1) with L-BFGS-B."""
    T = len(g)
    if T == 1:
        return g[0] ** 2 / s[0] ** 2

    def f(r):
        rr = np.concatenate([[0.0], r, [0.0]])
        sh = rho * rr[:-1] + g - rr[1:]
        w = sh / s ** 2
        return float(sh @ w), -2 * w[:-1] + 2 * rho[1:] * w[1:]
    res = optimize.minimize(f, np.zeros(T - 1), jac=True, method="L-BFGS-B", bounds=[(0, None)] * (T - 1),
                            options=dict(ftol=1e-15, gtol=1e-13, maxiter=20000))
    return res.fun


def test_feasible_bound_matches_a_generic_qp():
    rng = np.random.default_rng(3)
    for trial in range(25):
        T = int(rng.integers(1, 20))
        rho = 1 + rng.uniform(0, 0.4, T) if trial % 2 else rng.uniform(0.5, 1.5, T)
        g = rng.uniform(0, 1, T)
        s = rng.uniform(0.5, 2, T)
        assert fa.feasible_mu(np.log(rho), g, s) ** 2 == pytest.approx(_qp(rho, g, s), rel=1e-7, abs=1e-12)


def test_feasible_equals_composition_for_constant_lr():
    for T in (2, 10, 600):
        lrho, g = fa.table3_fedavg("constant", T, 50, 0.01, 1.0, 1.0, 50)
        assert fa.feasible_mu(lrho, g, 0.1) == pytest.approx(fa.composition_mu(g, 0.1), rel=1e-12)
        lrho, g = fa.table3_fedprox(T, 2.0, 1.0, 1.0, 50)
        assert fa.feasible_mu(lrho, g, 0.1) == pytest.approx(fa.composition_mu(g, 0.1), rel=1e-12)


# ---------------------------------------------------------------- conversions
@pytest.mark.parametrize("mu", [0.3, 1.0])
def test_gdp_to_eps_agrees_with_dp_accounting_pld(mu):
    from dp_accounting.pld import privacy_loss_distribution as pldm
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss
    pld = pldm.from_gaussian_mechanism(standard_deviation=1 / mu, sensitivity=1.0,
                                       value_discretization_interval=1e-5)
    exact = GaussianPrivacyLoss(standard_deviation=1 / mu, sensitivity=1.0)
    for delta in (1e-5, 1e-3, 0.05):
        eps = fa.gdp_to_eps(mu, delta)
        assert eps == pytest.approx(pld.get_epsilon_for_delta(delta), abs=1e-6)
        assert exact.get_delta_for_epsilon(eps) == pytest.approx(delta, rel=1e-8)
        assert fa.gdp_to_delta(mu, eps) == pytest.approx(delta, rel=1e-10)


def test_lemma7_values_and_edges():
    # delta(1) for mu = 1: Phi(-0.5) - e Phi(-1.5)
    from scipy.stats import norm
    assert fa.gdp_to_delta(1.0, 1.0) == pytest.approx(norm.cdf(-0.5) - math.e * norm.cdf(-1.5), rel=1e-12)
    assert fa.gdp_to_eps(0.0, 1e-5) == 0.0
    assert fa.gdp_to_eps(1e-3, 0.5) == 0.0                    # delta(0) = 2 Phi(mu/2) - 1 < 0.5
    assert fa.gdp_to_eps(math.inf, 1e-5) == math.inf
    big = fa.gdp_to_eps(40.0, 1e-10)                           # large mu: no cancellation trouble
    assert math.isfinite(big) and fa.gdp_to_delta(40.0, big) == pytest.approx(1e-10, rel=1e-6)
    eps = [fa.gdp_to_eps(mu, 1e-5) for mu in (0.1, 0.5, 1, 2, 5)]
    assert all(b > a for a, b in zip(eps, eps[1:]))


def test_lemma8_rdp_and_composition():
    assert fa.gdp_to_rdp(2.0, 3.0) == pytest.approx(6.0)
    assert list(fa.gdp_to_rdp_curve(1.0, [2, 4])) == [1.0, 2.0]
    assert fa.compose_gdp([3.0, 4.0]) == pytest.approx(5.0)
    # trade-off function: T_G(0) is 1 - alpha; T_G(mu) is below it
    a = np.array([0.01, 0.1, 0.5])
    assert np.allclose(fa.tradeoff_gdp(0.0, a), 1 - a)
    assert np.all(fa.tradeoff_gdp(1.0, a) < 1 - a)
    # the GDP-RDP bound agrees with dp-accounting's RDP of one Gaussian (exactly mu^2 zeta / 2)
    import dp_accounting
    acc = dp_accounting.rdp.RdpAccountant(orders=[2.0, 8.0])
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1 / 0.7))
    assert np.allclose(acc._rdp, [fa.gdp_to_rdp(0.7, 2.0), fa.gdp_to_rdp(0.7, 8.0)], rtol=1e-12)


def test_bad_input_raises_user_error():
    from otafl_sdr.errors import UserError
    with pytest.raises(UserError):
        fa.gdp_to_eps(1.0, 0.0)
    with pytest.raises(UserError):
        fa.gdp_mu_fedprox(5, 1.0, 2.0, 1.0, 10, 1.0)          # alpha <= L
    with pytest.raises(UserError):
        fa.table3_fedavg("warmup", 3, 2, 0.1, 1.0, 1.0, 10)
    with pytest.raises(UserError):
        fa.paper_mu([0.1, 0.2], [1.0], 1.0)
    with pytest.raises(UserError):
        fa.gdp_mu_fedavg_const(2.5, 3, 0.1, 1.0, 1.0, 10, 1.0)
