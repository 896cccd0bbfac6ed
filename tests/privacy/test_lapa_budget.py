"""Paper 004 LAPA: round budgets (eq. 12), the angle split (eqs. 13-16), the PID-like error (eqs. 10-11),
noise calibration (eq. 19), the over-the-air mechanism and the switch round T_th (eq. 23)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.config.schema import Config
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.power import reliable_aggregation as ra
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.lapa import LapaPolicy
from otafl_sdr.power.lapa_maths import gauss_c, pid_error, round_budget, split_budget
from otafl_sdr.privacy.lapa_budget import LapaSumAccountant


def make(K=5, d=400, T=20, snr_db=0.0, eps=5.0, sizes=None, **opts):
    sizes = np.full(K, 50.0) if sizes is None else np.asarray(sizes, float)
    info = SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, 10 ** (snr_db / 10) * d), dim=d,
                      sigma_c2=1.0, rounds=T, eps=eps, delta=1e-5, unit="sample_paper")   # eq. (18)
    opts.setdefault("weights", "fedavg")
    return LapaPolicy(Config(), info, opts), info


def converging_payloads(rng, K, d, T, spread=0.3, misaligned=()):
    """Updates that shrink towards zero around one direction; ``misaligned`` devices point elsewhere."""
    tgt = rng.standard_normal(d)
    tgt /= np.linalg.norm(tgt)
    for t in range(1, T + 1):
        U = np.exp(-t / 3) * (tgt + spread * rng.standard_normal((K, d)) / np.sqrt(d))
        for k in misaligned:
            v = rng.standard_normal(d)
            U[k] = np.exp(-t / 3) * v / np.linalg.norm(v)
        yield t, U


def run(pol, info, T, seed=0, h=None, observe=True, **kw):
    rng = np.random.default_rng(seed)
    air = SimAir(Config())
    plans = []
    for t, U in converging_payloads(rng, info.clients, info.dim, T, **kw):
        hh = np.ones(info.clients, complex) if h is None else h(rng)
        plan = pol.plan(t, U, hh, 0j, rng)
        rec = air.transmit(plan, rng)
        if observe:
            pol.observe(t, rec.aggregate)
        plans.append(plan)
    return plans


# -- eq. (12) ------------------------------------------------------------------------------------
@given(st.lists(st.floats(0, 20), min_size=1, max_size=40), st.floats(0.1, 100))
def test_round_budgets_never_exceed_the_total(es, eps_total):
    T = len(es)
    spent = 0.0
    for t, e in enumerate(es, start=1):
        b = round_budget(e, eps_total, spent, T, t)
        assert 0 <= b <= eps_total - spent + 1e-12
        spent += b
    assert spent <= eps_total * (1 + 1e-12)


def test_round_budget_spends_everything_when_nothing_changes_and_less_when_it_does():
    T, tot = 10, 7.0
    spent = 0.0
    for t in range(1, T + 1):
        b = round_budget(0.0, tot, spent, T, t)
        assert b == pytest.approx(tot / T)       # e = 0: the even split of the remaining budget
        spent += b
    assert spent == pytest.approx(tot)
    bs = [round_budget(e, tot, 1.0, T, 3) for e in (0.0, 0.5, 1.0, 3.0)]
    assert all(a > b for a, b in zip(bs, bs[1:]))          # larger global change -> smaller budget


# -- eqs. (13)-(16) ------------------------------------------------------------------------------
def test_gompertz_decreases_with_the_angle_and_the_split_keeps_the_sum():
    th = np.linspace(0, np.pi, 50)
    f = ra.gompertz(th, 2.0)
    assert np.all(np.diff(f) < 0) and np.all(f > 0)        # decision: eq. (15) as written, decreasing
    eps = split_budget(3.0, f)
    assert eps.sum() == pytest.approx(3.0) and np.all(eps > 0) and np.all(eps < 3.0)
    assert np.all(np.diff(eps) < 0)                         # aligned devices get the larger budgets


def test_aligned_devices_get_larger_budgets_than_misaligned_ones():
    # large data sets (small sensitivity, little DP noise) so that the angles carry the signal
    pol, info = make(K=6, snr_db=0.0, angle_source="clean", sizes=np.full(6, 5000.0))
    run(pol, info, 8, misaligned=(4, 5))
    eps = pol.log[-1]["eps_k_split"]           # the personalised split (it shares the public total, lapa_public)
    assert eps[:4].min() > 1.2 * eps[4:].max()
    assert pol.theta_s[:4].max() < pol.theta_s[4:].min()
    # the paper's angles (of what the devices sent, noise included) see mostly the DP noise here
    noisy, info = make(K=6, snr_db=0.0)
    run(noisy, info, 8, misaligned=(4, 5))
    e = noisy.log[-1]["eps_k_split"]
    assert e.max() / e.min() < eps.max() / eps.min()


# -- eqs. (10)-(11) ------------------------------------------------------------------------------
def test_pid_error_is_zero_without_history_and_without_change():
    rng = np.random.default_rng(0)
    g = rng.standard_normal(50)
    assert pid_error([g], 5, 1, 1, rng) == 0.0
    assert pid_error([g, g, g, g], 3, 1, 1, rng) == 0.0


def test_pid_error_absolute_and_denoised():
    rng = np.random.default_rng(1)
    d, step = 4000, 0.3
    base = rng.standard_normal(d) / np.sqrt(d)
    clean = [base * (1 + i * step) for i in range(6)]                # ||g_i - g_(i-1)|| = step ||base||
    change = step * np.linalg.norm(base)
    assert pid_error(clean, 5, 1.0, 0.0, rng) == pytest.approx(change, rel=1e-9)
    # history noise of std 0.01 per coordinate: eq. (10) as printed mostly measures the noise ...
    v = 0.01 ** 2
    noisy = [c + 0.01 * rng.standard_normal(d) for c in clean]
    absolute = pid_error(noisy, 5, 1.0, 0.0, rng)
    assert absolute > 2.5 * change
    # ... the denoised error subtracts the planned noise energy and recovers the change (m = 1: the last step)
    den = [pid_error([c + 0.01 * rng.standard_normal(d) for c in clean], 1, 1.0, 0.0, rng, [v] * 6)
           for _ in range(20)]
    assert np.mean(den) == pytest.approx(change, rel=0.1)
    assert pid_error(noisy, 5, 1.0, 0.0, rng, [v] * 6, cap=0.01) <= 0.01


# -- the policy ----------------------------------------------------------------------------------
def test_budget_accounting_bounds_noise_calibration_and_power():
    pol, info = make(K=5, d=2000, T=15, snr_db=0.0, eps=4.0)
    plans = run(pol, info, 15, h=lambda r: (r.standard_normal(5) + 1j * r.standard_normal(5)) / np.sqrt(2))
    acct = LapaSumAccountant(info.delta)
    for plan in plans:
        acct.step(plan.mechanism)
        assert np.all(plan.transmit_energy() <= plan.power_limit * (1 + 1e-9))
    budgets = [entry["budget"] for entry in pol.log]
    assert sum(budgets) <= pol.eps_total + 1e-9
    assert pol.eps_total == pytest.approx(4.0 * 5)                     # eps_total = 0 -> privacy.eps x K
    assert acct.system_total() == pytest.approx(pol.spent)
    assert max(np.max(entry["eps_k"]) for entry in pol.log) <= pol.options.eps_k_max
    c = gauss_c(info.delta / info.rounds)
    for plan, entry in zip(plans, pol.log):
        if not entry["artificial"]:
            continue
        sig = c * (2 * pol.C / info.sizes) / entry["eps_k_split"]     # eq. (19), Delta s = 2C/|D_k| (eq. 18)
        ratio = plan.extra["sigma_k"] / sig                           # one common scale: the public total
        assert np.allclose(ratio, ratio[0])
        assert entry["var_realised"] == pytest.approx(entry["sigma_eff"] ** 2, rel=1e-9)
    # the noise actually added has the calibrated std (d = 2000 coordinates)
    rng = np.random.default_rng(5)
    pol2, info2 = make(K=5, d=2000, T=15, snr_db=0.0, eps=4.0)
    U = rng.standard_normal((5, 2000)) * 0.01
    p2 = pol2.plan(1, U, np.ones(5, complex), 0j, rng)
    emp = np.std(p2.payload - U, axis=1)
    assert np.allclose(emp, p2.extra["sigma_k"], rtol=0.06)


def test_mechanism_matches_the_noise_in_the_aggregate():
    pol, info = make(K=5, d=4000, T=10, snr_db=0.0, eps=4.0)
    rng = np.random.default_rng(3)
    U = rng.standard_normal((5, 4000)) / np.sqrt(4000) * 0.5
    h = (rng.standard_normal(5) + 1j * rng.standard_normal(5)) / np.sqrt(2)
    plan = pol.plan(1, U, h, 0j, rng)
    G = plan.target_gain
    m = plan.mechanism
    assert G.sum() == pytest.approx(1.0)
    assert m.sensitivity == pytest.approx(np.max(G * 2 / info.sizes))    # worst device, G_k Delta s_k
    rec = SimAir(Config()).transmit(plan, rng)
    err = rec.aggregate - plan.extra["clean_aggregate"]                  # artificial + channel noise
    assert np.std(err) == pytest.approx(m.sigma_eff, rel=0.05)
    # channel inversion: each device arrives with gain G_k
    assert np.allclose(h * plan.alpha / plan.alpha_u, G)


def test_switch_round_per_device_rule_and_after_it_channel_noise_suffices():
    pol, info = make(K=5, d=400, T=20, snr_db=-20.0, eps=5.0)
    plans = run(pol, info, 20)
    T_th = pol.switch_round
    assert T_th is not None and 1 < T_th <= 20
    c = gauss_c(info.delta / info.rounds)
    a_clean = np.sqrt(info.power[0]) / (0.2 * 1.0)                     # AWGN, G_k = 1/5, C = 1
    for t, (plan, entry) in enumerate(zip(plans, pol.log), start=1):
        req = c * (2 / info.sizes) / entry["eps_k"]
        ok = np.all(1.0 / (a_clean * entry["G"]) >= req)               # eq. (23), per device
        if t < T_th:
            assert entry["artificial"] and not ok and np.all(plan.extra["sigma_k"] > 0)
        else:
            assert not entry["artificial"] and np.all(plan.extra["sigma_k"] == 0)
            assert np.all(plan.extra["channel_sigma"] >= req * (1 - 1e-9))   # capped alpha_u keeps DP
        if t == T_th:
            assert ok
    # without noise control the artificial noise never stops; the sum rule switches no later
    off, _ = make(K=5, d=400, T=20, snr_db=-20.0, eps=5.0, noise_control=False)
    run(off, info, 20)
    assert off.switch_round is None and all(e["artificial"] for e in off.log)
    s, _ = make(K=5, d=400, T=20, snr_db=-20.0, eps=5.0, switch_rule="sum")
    run(s, info, 20)
    assert s.switch_round is not None and s.switch_round <= T_th


def test_budget_modes_uniform_arb_none():
    pol, info = make(budget="uniform")
    run(pol, info, 5)
    assert all(np.allclose(e["eps_k"], pol.eps_total / (info.rounds * info.clients)) for e in pol.log)
    pol, info = make(budget="arb")
    run(pol, info, 6)
    assert all(np.allclose(e["eps_k"], e["eps_k"][0]) for e in pol.log)   # equal split of eq. (12)
    pol, info = make(budget="none")
    plans = run(pol, info, 3)
    assert all(np.all(p.extra["sigma_k"] == 0) and "eps_k" not in p.mechanism.extra for p in plans)


def test_state_dict_round_trip_continues_identically():
    pol, info = make()
    rng = np.random.default_rng(0)
    gen = converging_payloads(rng, 5, 400, 8)
    for t, U in list(gen)[:4]:
        pol.plan(t, U, np.ones(5, complex), 0j, np.random.default_rng(t))
    clone, _ = make()
    clone.load_state_dict(pol.state_dict())
    U = np.random.default_rng(9).standard_normal((5, 400)) * 0.01
    a = pol.plan(5, U, np.ones(5, complex), 0j, np.random.default_rng(5))
    b = clone.plan(5, U, np.ones(5, complex), 0j, np.random.default_rng(5))
    assert np.array_equal(a.payload, b.payload) and a.mechanism == b.mechanism


def test_bad_options_and_missing_label_counts_are_user_errors():
    with pytest.raises(ConfigError, match="power.options.budget"):
        LapaPolicy.validate_options({"budget": "lots"})
    with pytest.raises(ConfigError, match="power.options.nonsense"):
        LapaPolicy.validate_options({"nonsense": 1})
    with pytest.raises(ConfigError, match="power.options.ser_threshold"):
        LapaPolicy.validate_options({"ser_threshold": 0.9})
    pol, info = make(weights="reliable")
    with pytest.raises(UserError, match="label counts"):
        pol.plan(1, np.zeros((5, 400)), np.ones(5, complex), 0j, np.random.default_rng(0))
