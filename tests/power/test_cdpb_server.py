"""Paper 001, server side: the expected-value model (eqs. 52-60) against simulation, the closed-form and
bisection choices of rho (eqs. 28, 29, 33; Algorithm 2), Algorithm 3, and the server's ignorance of K_t."""
import inspect
import math

import numpy as np
import pytest

from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.cdpb_server import (CDPBDesigner, CDPBModel, CDPBServer, ChannelStats, DesignOptions, argmin_1d,
                                         bisection, rho_gamma_idle_closed, rho_gamma_noisy_closed, theorem3_rho)
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.configure.plugins import load_plugins

K, D, SNR_DB = 12, 200, 1.0
P = 10 ** (SNR_DB / 10) * D


def model(portion=0.0, sigma_c2=1.0, artificial=True, K=K):
    return CDPBModel(ChannelStats("rayleigh", np.ones(K)), np.full(K, P), D, sigma_c2, portion=portion,
                     artificial=artificial)


def policy(name, **opts):
    load_plugins()
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 100.0), power=np.full(K, P), dim=D, sigma_c2=1.0,
                      rounds=10, eps=1.0, delta=1e-5, unit="client")
    return POWER_POLICIES.get(name)(load_config(None, ["privacy.targeting=paper"]), info, opts)


def test_rayleigh_statistics_match_block_fading():
    stats = ChannelStats("rayleigh", np.ones(3))
    h2 = np.abs(BlockFading("rayleigh")(np.random.default_rng(0), 400_000)) ** 2
    for x in (0.1, 0.7, 2.0):
        xs = np.full(3, x)
        assert stats.p_above(xs)[0] == pytest.approx(np.mean(h2 >= x), abs=4e-3)
        assert stats.mean_above(xs)[0] == pytest.approx(np.mean(h2 * (h2 >= x)), rel=1e-2)


@pytest.mark.parametrize("name,portion", [("cdpb_idle", 0.0), ("cdpb_noisy", 1.0), ("cdpb_mixed", 0.5)])
def test_expected_count_and_noise_match_simulated_rounds(name, portion):
    """K_t(rho) of eq. (53) and sigma^2(rho) of eqs. (56)/(60) (per coordinate) against realised rounds."""
    rho = 0.6 * P
    pol = policy(name, rho=rho, rounds=10)
    m = pol.server.model
    fading = BlockFading("rayleigh")
    rng = np.random.default_rng(1)
    payload = np.zeros((K, D))
    counts, noise = [], []
    for t in range(1500):
        h = fading(rng, K)
        plan = pol.plan(t, payload, h, 1 + 0j, rng)
        upd = np.array([x == "update" for x in plan.mode])
        nz = np.array([x == "noise" for x in plan.mode])
        counts.append(upd.sum())
        var = np.sum(np.abs(h * plan.alpha)[upd] ** 2 * plan.row_noise_var[upd])      # rho sigma_r^2 each
        var += np.sum(np.abs(h[nz]) ** 2 * P / D)                                       # |h|^2 P / d each
        noise.append(var + 1.0)
    assert np.mean(counts) == pytest.approx(m.count(rho), rel=0.02)
    assert np.mean(noise) == pytest.approx(m.noise(rho), rel=0.03)
    # the closed forms of the paper, per coordinate: (60) for i, (56) for n
    x = rho / P
    if portion == 0.0:
        assert m.noise(rho) == pytest.approx(K * P * math.exp(-x) / D + 1.0, rel=1e-12)
    if portion == 1.0:
        assert m.noise(rho) == pytest.approx((K * P - K * rho * math.exp(-x)) / D + 1.0, rel=1e-12)


def test_rho_gamma_closed_forms():
    """Eq. (29) is the exact minimiser of Lemma 1's bracket for CDPB-i (sigma_c2 = 0); eq. (28) is CDPB-n's
    under App. C's e^y ~ 1 + y, so it is close, not exact."""
    for A in (0.5, 1.0, 4.0, 10.0):
        mi, mn = model(0.0, sigma_c2=0.0), model(1.0, sigma_c2=0.0)
        num_i = argmin_1d(lambda r: mi.gamma_bracket(r, A), P * 1e-6, P)
        num_n = argmin_1d(lambda r: mn.gamma_bracket(r, A), P * 1e-6, P)
        assert rho_gamma_idle_closed(P, 1.0, A) == pytest.approx(num_i, rel=1e-6)
        assert rho_gamma_noisy_closed(P, 1.0, A) == pytest.approx(num_n, rel=0.03)
    # hand value of (29): a_i = 2 -> rho = P (sqrt(9) - 1) / 4 = P / 2
    assert rho_gamma_idle_closed(P, 1.0, 2.0) == pytest.approx(P / 2)


def test_theorem3_closed_form():
    # hand value of eq. (33): tau = 10, K_t = 6, alpha = 2, lambda1/lambda2 = 1e3, A = 4, P = 100, Omega = 1
    a, b = 1e3 / (100 * 6), 4 * 1e3 / (100 * 6)
    expect = 100 * math.sqrt(a / (1 / 100 + b - 1))
    assert theorem3_rho(10, 6.0, 2, 1.0, 1e-3, 4.0, 100.0, 1.0) == pytest.approx(expect, rel=1e-12)
    assert math.isnan(theorem3_rho(1000, 6.0, 2, 1.0, 1e-5, 1.0, 100.0, 1.0))      # radicand <= 0
    # in the designer, K_t in a and b sits at its fixed point K_t = K_t(rho)
    m = model()
    des = CDPBDesigner(m, DesignOptions(lambda2=1e-3, grad_const=4.0, rho_rule="closed_form"))
    rho, how = des.rho_closed_form(2)
    assert how == "closed_form" and 0 < rho < m.rho_max
    assert theorem3_rho(2, m.count(rho), 2, 1.0, 1e-3, 4.0, P, 1.0, 1.0) == pytest.approx(rho, rel=1e-9)


def test_bisection_algorithm2():
    root = bisection(lambda x: x ** 3 - 0.2, 0.0, 1.0, 1e-12, 100)
    assert root == pytest.approx(0.2 ** (1 / 3), abs=1e-11)
    assert bisection(lambda x: x - 0.25, 0.0, 1.0, 1e-3, 1) == pytest.approx(0.5)   # N_max bounds the work


@pytest.mark.parametrize("portion", [1.0, 0.5])
def test_stage2_bisection_minimises_G(portion):
    des = CDPBDesigner(model(portion), DesignOptions(lambda2=1e-3, gamma_bar=0.5, eps_bar=1e5))
    grid = np.geomspace(des.rho_lo, des.m.rho_max, 4000)
    for tau in (5, 40, 300):
        rho = des.rho_bisection(tau)
        g_best = min(des.utility(r, tau) for r in grid)
        assert des.utility(rho, tau) <= g_best * (1 + 1e-6)
        assert abs(des.dG(rho, tau)) < 1e-3 * abs(des.dG(des.m.rho_max * 0.01, tau)) or rho in (des.rho_lo, des.m.rho_max)


def test_algorithm3_picks_the_best_feasible_pair():
    des = CDPBDesigner(model(1.0), DesignOptions(lambda2=1e-3, gamma_bar=0.5, eps_bar=1e5))
    d = des.design()
    assert d.tau_gamma_min <= d.rounds <= d.tau_eps_max
    rng = np.random.default_rng(0)
    for tau in rng.integers(d.tau_gamma_min, min(d.tau_eps_max, 5000), 25):
        assert des.utility(des.rho_bisection(int(tau)), int(tau)) >= d.utility * (1 - 1e-9)
    assert d.eps_round * d.rounds <= 1e5
    # Stage I only (gamma_bar baseline): rho_gamma and tau_gamma_min
    g = CDPBDesigner(model(0.0), DesignOptions(gamma_bar=0.5, stage="gamma")).design()
    assert g.rounds == g.tau_gamma_min and g.rho == pytest.approx(g.rho_gamma)


def test_infeasible_design_names_the_key():
    with pytest.raises(ConfigError, match="power.options.eps_bar"):
        policy("cdpb_noisy", eps_bar=10.0, gamma_bar=1e-2)


def test_server_never_sees_the_round():
    """Server-side scaling depends only on channel statistics: the same for any participation pattern."""
    for name in ("cdpb_idle", "cdpb_noisy", "cdpb_mixed", "noise_free"):
        pol = policy(name, rho=0.5 * P, rounds=20)
        payload = np.random.default_rng(0).normal(size=(K, D)) / math.sqrt(D)
        strong = np.full(K, 3.0 + 0j)                        # everyone reliable
        weak = np.r_[np.full(3, 3.0 + 0j), np.full(K - 3, 0.1 + 0j)]    # most unreliable
        a = pol.plan(4, payload, strong, 1 + 0j, np.random.default_rng(1))
        b = pol.plan(4, payload, weak, 1 + 0j, np.random.default_rng(2))
        assert a.extra["truth"]["participants"] == K and b.extra["truth"]["participants"] == 3
        assert a.alpha_u == b.alpha_u == pytest.approx(math.sqrt(pol.rho) * pol.design.count)
        # the ledger books the realised noise of each round (who sent noise, with what power), so its
        # sigma_eff follows the pattern; the sensitivity and the (unclaimed) sampling do not
        assert a.mechanism.sensitivity == b.mechanism.sensitivity and a.mechanism.sampling_prob == 1.0
        assert a.mechanism.extra["sigma_expected"] == b.mechanism.extra["sigma_expected"]
        # the oracle option (sim comparison only) does depend on the pattern: the test can tell
        orc = policy(name, rho=0.5 * P, rounds=20, server_count="oracle")
        assert orc.plan(4, payload, strong, 1 + 0j, np.random.default_rng(1)).alpha_u != \
            orc.plan(4, payload, weak, 1 + 0j, np.random.default_rng(2)).alpha_u
    # the server's interface has no way to receive channels or modes (only the explicit oracle count)
    for meth in (CDPBServer.alpha_u, CDPBServer.mechanism):
        params = set(inspect.signature(meth).parameters)
        assert params <= {"self", "round_index", "oracle_count"}
