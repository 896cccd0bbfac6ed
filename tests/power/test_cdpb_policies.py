"""Paper 001 policies, client side: each policy's power constraint (eq. 3 / 11), the kind of signal every
client transmits (update + own noise, full-power noise, silence), and the chain through the sim air."""
import math

import numpy as np
import pytest

from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.transmission import aggregate_nmse_theory

K, D = 12, 1000
P = 10 ** 0.1 * D
RHO = 0.4 * P                    # p = exp(-0.4) = 0.67: both reliable and unreliable clients occur
POLICIES = ("cdpb_noisy", "cdpb_idle", "cdpb_mixed", "h_min", "gamma_bar", "independent_sampling", "noise_free")


def make(name, unit="client", **opts):
    load_plugins()
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 100.0), power=np.full(K, P), dim=D, sigma_c2=1.0,
                      rounds=10, eps=1.0, delta=1e-5, unit=unit)
    if name != "h_min":
        opts = {"rho": RHO, "rounds": 10, **opts}
    return POWER_POLICIES.get(name)(load_config(None, []), info, opts)


def payload(rng):
    u = rng.normal(size=(K, D))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    u[: K // 2] *= rng.uniform(0.1, 1.0, size=(K // 2, 1))        # half at the bound W = 1, half inside
    return u


@pytest.mark.parametrize("name", POLICIES)
def test_power_constraint_and_signal_kind(name):
    pol = make(name)
    rng = np.random.default_rng(7)
    fading = BlockFading("rayleigh")
    seen = set()
    for t in range(25):
        u, h = payload(rng), fading(rng, K)
        plan = pol.plan(t, u, h, 1 + 0j, rng)
        mode = np.array(plan.mode)
        seen |= set(plan.mode)
        upd, nz, sil = mode == "update", mode == "noise", mode == "silent"
        # eq. (3): energy in expectation over the artificial noise <= P for every client
        e_exp = np.abs(plan.alpha) ** 2 * (np.sum(plan.clean ** 2, axis=1) + D * plan.row_noise_var)
        e_exp = np.where(nz, np.abs(plan.alpha) ** 2 * P, np.where(sil, 0.0, e_exp))
        assert np.all(e_exp <= P * (1 + 1e-9))
        # the realised energy of the transmitted rows: exact when there is no artificial noise,
        # otherwise within the chi-square spread of a Gaussian draw around its mean
        e = plan.transmit_energy()
        if name == "noise_free" or name == "h_min":
            assert np.all(e <= P * (1 + 1e-9))
        assert np.all(e <= P * (1 + 8 * math.sqrt(2 / D)))
        # update rows: channel inversion, they arrive as sqrt(rho) (u_k + r_k) (eq. 4)
        rho = plan.extra["rho"]
        assert np.allclose(h[upd] * plan.alpha[upd], math.sqrt(rho))
        resid = plan.payload[upd] - plan.clean[upd]
        if name == "noise_free" or name == "h_min":
            assert np.all(resid == 0)                                 # no artificial noise
        elif upd.any():
            # own noise fills the power as in eq. (11): d s^2 = |h|^2 P / rho - W^2
            s2 = (np.abs(h[upd]) ** 2 * P / rho - 1.0) / D
            assert np.allclose(plan.row_noise_var[upd], np.maximum(s2, 0))
            emp = np.mean(resid ** 2, axis=1) / plan.row_noise_var[upd]
            assert np.all(np.abs(emp - 1) < 6 * math.sqrt(2 / D))
        # reliable iff |h|^2 P >= rho W^2 (eqs. 6-7); who is unreliable does what its strategy says
        rel = np.abs(h) ** 2 * P >= RHO
        if name in ("cdpb_noisy", "cdpb_idle", "cdpb_mixed", "gamma_bar", "noise_free"):
            if name != "gamma_bar":
                assert np.array_equal(upd, rel)
        if name == "cdpb_noisy":
            assert np.array_equal(nz, ~rel)
            assert np.all(plan.alpha[nz] == 1)                        # no scaling, no phase pre-compensation
            if nz.any():
                assert np.mean(plan.payload[nz] ** 2) == pytest.approx(P / D, rel=6 * math.sqrt(2 / (D * nz.sum())))
        if name in ("cdpb_idle", "noise_free", "gamma_bar", "independent_sampling"):
            assert not nz.any()
        if sil.any():
            assert np.all(plan.alpha[sil] == 0) and np.all(plan.payload[sil] == 0)
        if name == "h_min":
            assert upd.all() and rho == pytest.approx(np.min(np.abs(h) ** 2) * P)
        if name == "independent_sampling":
            assert np.all(~upd | rel)
    expected = {"cdpb_noisy": {"update", "noise"}, "cdpb_idle": {"update", "silent"},
                "cdpb_mixed": {"update", "noise", "silent"}, "h_min": {"update"}, "noise_free": {"update", "silent"},
                "independent_sampling": {"update", "silent"}}
    if name in expected:
        assert seen == expected[name]


def test_mixed_portion_and_sampling_rates():
    rng = np.random.default_rng(3)
    fading = BlockFading("rayleigh")
    mixed, isp = make("cdpb_mixed", portion=0.3), make("independent_sampling", q=0.4)
    n_unrel = n_noise = n_rel = n_sent = 0
    for t in range(300):
        u, h = payload(rng)[:, :8], fading(rng, K)
        rel = np.abs(h) ** 2 * P >= RHO
        m = np.array(mixed.plan(t, u, h, 1 + 0j, rng).mode)
        n_unrel += (~rel).sum()
        n_noise += (m == "noise").sum()
        s = np.array(isp.plan(t, u, h, 1 + 0j, rng).mode)
        n_rel += rel.sum()
        n_sent += (s == "update").sum()
    assert abs(n_noise / n_unrel - 0.3) < 5 * math.sqrt(0.21 / n_unrel)
    assert abs(n_sent / n_rel - 0.4) < 5 * math.sqrt(0.24 / n_rel)


def test_expected_count_makes_the_aggregate_unbiased():
    """With alpha_u = sqrt(rho) K_t(rho) the noiseless aggregate averages to mean_k u_k over the fading."""
    pol = make("cdpb_idle")
    rng = np.random.default_rng(5)
    u = payload(rng)[:, :16]
    fading = BlockFading("rayleigh")
    T = 1500
    agg = np.mean([pol.plan(t, u, fading(rng, K), 1 + 0j, rng).expected_aggregate() for t in range(T)], axis=0)
    p, kbar = math.exp(-RHO / P), pol.design.count
    sd = np.sqrt(np.sum(u ** 2, axis=0) * p * (1 - p) / kbar ** 2 / T)     # std of the mean, per coordinate
    assert np.all(np.abs(agg - u.mean(axis=0)) < 5 * sd)


@pytest.mark.parametrize("name", ["cdpb_noisy", "cdpb_idle", "cdpb_mixed", "h_min", "independent_sampling"])
def test_sim_air_error_matches_the_plan(name):
    """The aggregate the sim air returns deviates from the noiseless one by the plan's own noise budget."""
    pol = make(name, **({"artificial_noise": True} if name == "h_min" else {}))
    air = SimAir(load_config(None, []))
    rng = np.random.default_rng(11)
    h = BlockFading("rayleigh")(rng, K)
    ratios = []
    for t in range(40):
        plan = pol.plan(t, payload(rng), h, 1 + 0j, rng)
        if not np.any(plan.expected_aggregate()):
            continue                                    # nobody sent an update this round
        rec = air.transmit(plan, rng)
        err = np.sum((rec.aggregate - plan.expected_aggregate()) ** 2)
        ratios.append(err / (aggregate_nmse_theory(plan) * np.sum(plan.expected_aggregate() ** 2)))
    assert np.mean(ratios) == pytest.approx(1.0, rel=0.05)


def test_no_amplification_is_claimed_the_design_value_is_kept_beside():
    a, b = make("cdpb_idle", unit="client"), make("cdpb_idle", unit="sample_paper")
    h = BlockFading("rayleigh")(np.random.default_rng(0), K)
    u = payload(np.random.default_rng(1))
    ma = a.plan(1, u, h, 1 + 0j, np.random.default_rng(2)).mechanism
    mb = b.plan(1, u, h, 1 + 0j, np.random.default_rng(2)).mechanism
    # the server can derive who participated (channels follow the run seed): the ledger claims q = 1
    assert ma.sampling_prob == 1.0 and mb.sampling_prob == 1.0
    assert ma.extra["claimed_sampling_prob"] == pytest.approx(math.exp(-RHO / P))
    assert mb.extra["claimed_sampling_prob"] == 1.0
    assert mb.sensitivity == pytest.approx(ma.sensitivity / 100)     # W / |D_k| instead of W
    assert ma.extra["rdp_order"] == 2


def test_bad_options_name_the_key():
    with pytest.raises(ConfigError, match="power.options.portion"):
        make("cdpb_mixed", portion=1.5)
    with pytest.raises(ConfigError, match="power.options.order"):
        make("cdpb_idle", order=1)
    with pytest.raises(ConfigError, match="power.options.portion"):
        make("cdpb_idle", portion=0.5)                  # not an option of cdpb_idle
    with pytest.raises(ConfigError, match="power.options.q"):
        make("independent_sampling", q=0.0)
    with pytest.raises(ConfigError, match="power.options.server_count"):
        make("cdpb_noisy", server_count="sometimes")
