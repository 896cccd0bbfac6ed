"""Paper 000 power control (eq. 14/17, Appendix A) and jammer design (Theorems 2/4)."""
import numpy as np
import pytest

from otafl_sdr.config.schema import Config
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy, jammer_radicand, theorem2_a, sensitivity_bound


def make(K=20, d=1000, snr_db=1.0, eps=1.0, delta=1e-5, rounds=80, jammer=True, alpha_u=0.0, sizes=None):
    cfg = Config()
    cfg.power.jammer = jammer
    cfg.power.alpha_u = alpha_u
    sizes = np.full(K, 100.0) if sizes is None else np.asarray(sizes, float)
    P = 10 ** (snr_db / 10) * d * 1.0
    info = SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, P), dim=d, sigma_c2=1.0,
                      rounds=rounds, eps=eps, delta=delta, unit="sample_paper")   # the paper's formulas
    return CJAdaptivePolicy(cfg, info), info


def random_payload(rng, K, d):
    u = rng.standard_normal((K, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True) * rng.uniform(0.2, 1.0, (K, 1))


def test_power_constraint_holds_every_client_every_round():
    rng = np.random.default_rng(0)
    sizes = rng.integers(20, 300, 30)
    pol, info = make(K=30, sizes=sizes)
    for m in range(200):
        h = (rng.standard_normal(30) + 1j * rng.standard_normal(30)) / np.sqrt(2)
        plan = pol.plan(m, random_payload(rng, 30, info.dim), h, 0.7 + 0.2j, rng)
        energy = plan.transmit_energy()
        assert np.all(energy <= info.power * (1 + 1e-9))
        s = plan.extra["s"]
        assert np.all(s >= 1)
        # s_i is the smallest value meeting P_i: clients with s_i > 1 sit on the bound (payload norm <= 1)
        bound = np.abs(plan.alpha) ** 2
        assert np.allclose(bound[s > 1], info.power[s > 1])
        # channel inversion: h_i alpha_i / alpha_u = p_i / s_i, real and positive
        eff = h * plan.alpha / plan.alpha_u
        assert np.allclose(eff, info.p / s)


def test_jammer_silent_exactly_when_theorem2_says():
    rng = np.random.default_rng(1)
    for eps in (0.05, 0.5, 1.0, 5.0, 50.0, 500.0):
        for alpha_u in (1.0, 10.0, 100.0, 1000.0):
            pol, info = make(eps=eps, alpha_u=alpha_u)
            h_cj = 0.3 - 0.4j
            plan = pol.plan(1, random_payload(rng, 20, info.dim), np.ones(20, complex), h_cj, rng)
            delta_s = sensitivity_bound(info)
            # paper: silent iff M/(2|D|^2 a^2) log(1/delta) < sigma_c2 / alpha_u^2 (|D| = total size)
            a = theorem2_a(eps, info.delta)
            D = info.total_size
            silent_paper = info.rounds / (2 * D ** 2 * a ** 2) * np.log(1 / info.delta) <= info.sigma_c2 / alpha_u ** 2
            assert (plan.alpha_cj == 0) == silent_paper
            assert (jammer_radicand(info, alpha_u, delta_s) <= 0) == silent_paper
            if not silent_paper:
                # 7x the bound of eq. (23)
                bound = alpha_u / abs(h_cj) * np.sqrt(info.rounds / (2 * D ** 2 * a ** 2) * np.log(1 / info.delta)
                                                     - info.sigma_c2 / alpha_u ** 2)
                assert plan.alpha_cj == pytest.approx(min(7 * bound, np.sqrt(info.jammer_power / info.dim)))
                assert plan.extra["cj_capped"] == (7 * bound > np.sqrt(info.jammer_power / info.dim))


def test_jammer_meets_the_target_with_paper_accountant():
    """With alpha_cj at the bound (multiple 1), M rounds reach eps <= target (Theorem 2)."""
    pol, info = make(eps=0.5, alpha_u=500.0, rounds=40)
    pol.multiple = 1.0
    rng = np.random.default_rng(2)
    S = 0.0
    for m in range(info.rounds):
        h = (rng.standard_normal(20) + 1j * rng.standard_normal(20)) / np.sqrt(2)
        plan = pol.plan(m, random_payload(rng, 20, info.dim), h, 0.5 + 0.5j, rng)
        S += plan.mechanism.sensitivity ** 2 / (2 * plan.mechanism.sigma_eff ** 2)
    L = np.log(1 / info.delta)
    eps = 2 * np.sqrt(S * L) + S
    assert eps <= info.eps * (1 + 1e-9)
    assert eps > 0.2 * info.eps   # and it is not vacuous


def test_sigma_eff_combines_channel_and_jammer():
    pol, info = make(alpha_u=50.0, eps=0.1)
    rng = np.random.default_rng(3)
    h_cj = 0.8 + 0.1j
    plan = pol.plan(1, random_payload(rng, 20, info.dim), np.ones(20, complex), h_cj, rng)
    expect = np.sqrt((1.0 + (abs(h_cj) * plan.alpha_cj) ** 2) / 50.0 ** 2)
    assert plan.mechanism.sigma_eff == pytest.approx(expect)
    assert plan.sigma_eff() == pytest.approx(expect)
