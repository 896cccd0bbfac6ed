"""Paper 004 DDPG power optimisation (eqs. 28-36): the P1 environment, a short training that improves its
reward on a fixed seed, determinism, save/load, and the `ddpg` policy on the sim air."""
import numpy as np
import pytest
import torch

from otafl_sdr import seeding
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.config.schema import Config
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ddpg import DDPGPolicy
from otafl_sdr.power.ddpg_agent import DDPGAgent, DDPGConfig, greedy_rollout, train_ddpg
from otafl_sdr.power.ddpg_env import PowerEnv, forecast_budgets, inversion_amplitudes
from otafl_sdr.power.lapa import LapaPolicy
from otafl_sdr.power.lapa_maths import gauss_c, ota_alpha_u

torch.set_num_threads(1)


def make_env(K=6, T=20, d=500, snr_db=10.0, seed=3, fading=0, **kw):
    """A static channel (the paper's assumption), or ``fading`` Rayleigh sequences of T rounds."""
    rng = np.random.default_rng(seed)
    shape = (fading, T, K) if fading else (K,)
    habs = np.abs((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2))
    budgets = forecast_budgets(10.0 * K, T, K, None, 1.0, 0, 1.0)
    return PowerEnv(G=np.full(K, 1 / K), habs=habs, power=np.full(K, 10 ** (snr_db / 10) * d),
                    ds=np.full(K, 2 / 100), c=gauss_c(1e-5 / T), sigma_c2=1.0, C=1.0, dim=d, budgets=budgets, **kw)


def test_forecast_budgets_respect_the_total_and_grow():
    B = forecast_budgets(30.0, 20, 5, None, 1.0, 0, 10.0)
    assert B.sum() <= 30.0 + 1e-9
    assert np.all(np.diff(B[1:, 0]) > 0)            # e decays -> later rounds get more (eq. 12)
    past = np.full((3, 5), 0.1)
    B2 = forecast_budgets(30.0, 20, 5, None, 1.0, 0, 10.0, past=past)
    assert np.array_equal(B2[:3], past) and B2.sum() <= 30.0 + 1e-9


def test_projection_meets_the_power_constraints():
    env = make_env(p_min=0.2, p_max=0.6, fading=3)
    tot = env.power.sum()
    rng = np.random.default_rng(0)
    for _ in range(100):
        P = env.powers(rng.random(env.K))                       # (S, T, K): every round's powers
        e = np.sum(P ** 2, axis=-1)
        assert np.all(e >= 0.2 * tot * (1 - 1e-6)) and np.all(e <= 0.6 * tot * (1 + 1e-9))
        assert np.all(P <= np.sqrt(env.power) * (1 + 1e-12))


def test_objective_has_the_papers_tradeoff():
    """Too little power: channel noise dominates; too much: the switch comes late (sec. IV-B)."""
    env = make_env()
    a = np.linspace(0, 1, 41)
    L = np.array([env.evaluate(np.full(env.K, x))[0] for x in a])
    T = np.array([env.evaluate(np.full(env.K, x))[1] for x in a])
    best = int(np.argmin(L))
    assert 0 < best < len(a) - 1
    assert np.all(np.diff(T) >= 0)                  # more power -> later (or equal) switch round
    assert T[-1] > T[best]


def test_fading_sequences_reproduce_the_static_objective_when_constant():
    static = make_env()
    rep = make_env()
    seq = PowerEnv(G=rep.G, habs=np.repeat(static.habs, 4, axis=0), power=rep.power, ds=rep.ds, c=rep.c,
                   sigma_c2=1.0, C=1.0, dim=rep.dim, budgets=rep.budgets)
    for x in (0.3, 0.6, 0.9):
        a = np.full(6, x)
        assert seq.evaluate(a)[0] == pytest.approx(static.evaluate(a)[0])
        assert seq.evaluate(a)[1] == static.evaluate(a)[1]


def test_short_ddpg_training_improves_its_reward_on_a_fixed_seed():
    env = make_env()
    grid = max(-np.log(env.evaluate(np.full(env.K, x))[0]) for x in np.linspace(0, 1, 201))
    agent = DDPGAgent(env.K + 2, env.K, DDPGConfig(warmup=16, updates=4), seeding.torch_generator(0, "ddpg"))
    res = train_ddpg(env, agent, episodes=20, steps=8)
    final = -np.log(res.objective)
    assert final > res.initial_reward + 1.0
    assert final > grid - 0.3                       # close to the best common power level
    # the kept actor reproduces the reported powers
    r, p, _, a = greedy_rollout(agent, env, 8)
    assert r == pytest.approx(final) and np.allclose(p, res.powers) and np.allclose(a, res.action)


def test_training_is_deterministic_and_the_agent_saves_and_loads(tmp_path):
    env = make_env(K=4)
    runs = []
    for _ in range(2):
        agent = DDPGAgent(env.K + 2, env.K, DDPGConfig(warmup=8, batch=16), seeding.torch_generator(7, "ddpg"))
        runs.append((train_ddpg(env, agent, episodes=2, steps=6), agent))
    assert np.array_equal(runs[0][0].powers, runs[1][0].powers)
    assert runs[0][0].episode_rewards == runs[1][0].episode_rewards
    agent = runs[0][1]
    agent.save(tmp_path / "agent.pt")
    loaded = DDPGAgent.load(tmp_path / "agent.pt", seeding.torch_generator(1, "x"))
    s, _ = env.reset()
    assert np.array_equal(agent.act(s), loaded.act(s))
    with pytest.raises(UserError, match="not found"):
        DDPGAgent.load(tmp_path / "nope.pt", seeding.torch_generator(1, "x"))
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(UserError):
        DDPGAgent.load(tmp_path / "junk.pt", seeding.torch_generator(1, "x"))


def test_ddpg_policy_runs_on_the_sim_air_and_reloads(tmp_path):
    K, d = 5, 300
    sizes = np.full(K, 80.0)
    info = SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, 10.0 * d), dim=d, sigma_c2=1.0,
                      rounds=6, eps=5.0, delta=1e-5)
    opts = {"weights": "fedavg", "episodes": 3, "steps": 6, "warmup": 8, "batch": 16, "save": str(tmp_path / "a.pt")}
    pol = DDPGPolicy(Config(), info, opts)
    air = SimAir(Config())
    rng = np.random.default_rng(0)
    for t in range(1, 4):
        U = rng.standard_normal((K, d)) / np.sqrt(d) * 0.5
        h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
        plan = pol.plan(t, U, h, 0j, seeding.rng(0, "policy", t))
        assert np.all(plan.transmit_energy() <= plan.power_limit * (1 + 1e-9))
        assert np.allclose(plan.power_limit, info.power * pol.frac)
        pol.observe(t, air.transmit(plan, rng).aggregate)
    assert pol.train_result is not None and pol.trained_rounds == [1]
    assert np.all((pol.frac > 0) & (pol.frac <= 1))
    assert (tmp_path / "a.pt").is_file()
    again = DDPGPolicy(Config(), info, {"weights": "fedavg", "steps": 6, "load": str(tmp_path / "a.pt")})
    again.plan(1, np.zeros((K, d)), np.ones(K, complex), 0j, np.random.default_rng(0))
    assert again.train_result.episode_rewards == []            # loaded, not trained
    with pytest.raises(ConfigError, match="power.options.contraction"):
        DDPGPolicy.validate_options({"contraction": 1.5})


def test_env_under_a_privacy_filter_counts_the_noise_the_filter_leaves():
    """privacy.targeting = 'target': a round's aggregate noise is max(the filter's requirement, the channel noise
    with no device noise) -- the filter tops up, it cannot take channel noise away -- so too little power costs
    and enough power is flat (the paper's c Ds/eps_k requirement plays no part)."""
    base = make_env(fading=3)
    req = np.full(base.T, 0.02)
    env = make_env(fading=3, req_var=req)
    for x in (0.0, 0.4, 0.8, 1.0):
        a = np.full(env.K, x)
        P = env.powers(a)
        on = env.G > 0
        a_clean = np.min(env.habs[..., on] * P[..., on] / env.G[on], axis=-1) / env.C
        L = np.sum(np.maximum(env.sigma_c2 / a_clean ** 2, req) * env.weights, axis=1)
        assert env.evaluate(a)[0] == pytest.approx(np.mean(L) / env.L_ref)
    L = np.array([env.evaluate(np.full(env.K, x))[0] for x in np.linspace(0, 1, 21)])
    assert np.all(np.diff(L) <= 1e-12)                 # more power never costs under the filter
    assert L[0] > 10 * L[-1]                           # too little power: channel noise far above the requirement


def _target(eps, rounds, delta=1e-5):
    from otafl_sdr.privacy.targeting import solve
    return solve(eps, delta, rounds, "pld", 1.0)


def test_ddpg_under_a_target_raises_powers_that_leave_too_much_channel_noise():
    """A learned action far below channel inversion (channel noise alone above the filter's z_t sens) is raised
    by one common factor to the least level that meets z_t sens; an action already loud enough is kept."""
    K, d, T = 5, 300, 4
    sizes = np.full(K, 80.0)
    info = SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, 1.0 * d), dim=d, sigma_c2=1.0,
                      rounds=T, eps=1.0, delta=1e-5, unit="sample_paper")
    pol = DDPGPolicy(Config(), info, {"weights": "fedavg", "episodes": 1, "steps": 2})
    rng = np.random.default_rng(1)
    hs = [(rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2) for _ in range(T)]
    pol.calibrate_to(_target(1.0, T), {t + 1: (hs[t], 0j) for t in range(T)})
    pol.t = 1
    G = np.full(K, 1.0 / K)
    sens = float(np.max(G * pol.ds))
    z_req = pol._z_required(G=G)
    z_of = lambda p: 1.0 / (ota_alpha_u(np.abs(hs[0]), p, G, np.full(K, pol.C)) * sens)
    pol.action = np.full(K, 0.2)                        # 32 dB below channel inversion
    quiet = pol.amplitudes(hs[0], G)
    assert z_of(quiet) <= z_req * (1 + 1e-9) and z_of(quiet) >= z_req * (1 - 1e-6)   # raised just enough
    assert np.all(quiet <= np.sqrt(info.power) * (1 + 1e-12))
    pol.action = np.ones(K)                             # channel inversion at full power: kept
    loud = pol.amplitudes(hs[0], G)
    assert np.allclose(loud, inversion_amplitudes(np.abs(hs[0]), info.power, G, pol.C))


def test_filter_water_fills_the_rounds_a_deep_fade_cannot_take():
    """A planned round whose channel noise alone is above the even share (a deep fade at the policy's largest
    amplitudes) gets its cap; the others share the rest, and no round is asked for more than is left."""
    K, d, T = 4, 200, 4
    sizes = np.full(K, 50.0)
    info = SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, 1.0 * d), dim=d, sigma_c2=1.0,
                      rounds=T, eps=1.0, delta=1e-5, unit="client")
    pol = LapaPolicy(Config(), info, {"weights": "fedavg"})
    hs = [np.ones(K, complex) * 3.0 for _ in range(T)]
    hs[2] = hs[2] * 1e-3                                # round 3: a deep fade
    pol.calibrate_to(_target(1.0, T), {t + 1: (hs[t], 0j) for t in range(T)})
    G = np.full(K, 1.0 / K)
    caps = pol._mu2_caps(1, G)
    assert caps[2] < pol.mu2_target / T < min(caps[[0, 1, 3]])
    lam = 1.0 / pol._z_required(1, G) ** 2
    assert lam == pytest.approx((pol.mu2_target - caps[2]) / 3)
    assert lam > pol.mu2_target / T                     # the even share would leave the fade's shortfall unspent
    assert 3 * lam + caps[2] == pytest.approx(pol.mu2_target)
