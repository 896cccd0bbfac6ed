"""Paper 003's transceiver (Proposition 1), payload, sensitivity and Proposition 2."""
import math

import numpy as np
import pytest
import torch

from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.otafd_transceiver import (OtafdTransceiver, class_weights, design_round, design_zdelta,
                                               device_sensitivity, lambda_max, prop2_rounds)
from otafl_sdr.privacy.otafd_accountant import required_multiplier

C = 4


def counts_fixture(rng, K=5):
    counts = rng.integers(3, 30, size=(K, C))
    counts[np.arange(K), np.arange(K) % C] += 100                 # one dominant class each
    return counts


def policy(counts, snr_lin=100.0, sigma_c2=1.0, T=10, eps=1.0, unit="sample_paper", **opts):
    K = counts.shape[0]
    d = C * C
    info = SystemInfo(p=np.full(K, 1 / K), sizes=counts.sum(1).astype(float), power=np.full(K, snr_lin * d * sigma_c2),
                      dim=d, sigma_c2=sigma_c2, rounds=T, eps=eps, delta=1e-5, unit=unit)
    return OtafdTransceiver(None, info, opts, context={"label_counts": counts, "gamma": 1.0, "eta0": 0.1})


def simplex_rows(rng, K):
    q = rng.random((K, C, C)) ** 3
    return q / q.sum(-1, keepdims=True)


def test_payload_is_classes_squared_and_in_the_simplex():
    from otafl_sdr.channel.sim_air import SimAir
    from otafl_sdr.learning.federated_data import load_federated
    from otafl_sdr.learning.models import build_model
    from otafl_sdr.learning.otafd import DeviceModels
    cfg = load_config(None, ["data.dataset=digits", "data.clients=4", "data.partition=dominant_class",
                             "model.name=logreg", "algorithm.name=otafd", "power.policy=otafd_prop1"])
    data = load_federated(cfg)
    dm = DeviceModels(cfg, data, build_model(cfg, data.input_shape, data.num_classes))
    w = dm.get_flat()
    assert tuple(w.shape) == (4, dm.dim) and dm.dim == 64 * 10 + 10
    q = dm.payload(w)
    assert q.shape == (4, 10, 10)                                    # C x C per device: d = C^2 = 100
    np.testing.assert_allclose(q.sum(-1), 1.0, atol=1e-12)
    assert (q >= 0).all()
    info = SystemInfo(p=data.p, sizes=data.sizes.astype(float), power=np.full(4, 100.0 * 100), dim=100, sigma_c2=1.0,
                      rounds=5, eps=1.0, delta=1e-5, unit="sample_paper")
    pol = OtafdTransceiver(cfg, info, {}, context={"label_counts": dm.counts})
    plan = pol.plan(1, q.reshape(4, 100), np.ones(4, complex), 1.0, np.random.default_rng(0))
    assert plan.payload.shape == (4, 100)
    rec = SimAir(cfg).transmit(plan, np.random.default_rng(1))
    assert rec.channel_uses == 50 and rec.aggregate.shape == (100,)


def test_precoder_inverts_the_channel_and_is_unbiased():
    rng = np.random.default_rng(0)
    counts = counts_fixture(rng)
    K = counts.shape[0]
    pol = policy(counts)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / math.sqrt(2)
    q = simplex_rows(rng, K)
    plan = pol.plan(3, q.reshape(K, -1), h, 1.0, np.random.default_rng(1))
    np.testing.assert_allclose(h * plan.alpha / plan.alpha_u, 1.0, rtol=1e-12)        # channel inversion
    w = class_weights(counts)
    lam = plan.extra["lambda"]
    # eq. (22): P_1 = B_i^k lambda^k conj(h_i) / (B^k sqrt(C) |h_i|^2); the device radiates alpha_i * scale_ik * q
    scale = plan.extra["clean_payload"].reshape(K, C, C)[:, :, 0] / q[:, :, 0]
    p1 = w * lam[None, :] * np.conj(h)[:, None] / (math.sqrt(C) * np.abs(h)[:, None] ** 2)
    np.testing.assert_allclose(plan.alpha[:, None] * scale, math.sqrt(C) * p1, rtol=1e-10)
    # zero bias (Phi_1 = 0): the noiseless aggregate, rescaled, is sum_i w_i^k q_i^k exactly
    clean = plan.extra["clean_payload"].sum(0)
    r = OtafdTransceiver.targets(clean, plan)
    np.testing.assert_allclose(r, (w[:, :, None] * q).sum(0), rtol=1e-12)
    # targets of the noisy aggregate: the sim air's received aggregate, rescaled, carries per-class noise
    # whose empirical variance matches target_noise_std^2
    from otafl_sdr.channel.sim_air import SimAir
    cfg = load_config(None, [])
    diffs = []
    for s in range(400):
        p = pol.plan(3, q.reshape(K, -1), h, 1.0, np.random.default_rng(100 + s))
        rec = SimAir(cfg).transmit(p, np.random.default_rng(s))
        diffs.append(OtafdTransceiver.targets(rec.aggregate, p) - (w[:, :, None] * q).sum(0))
    var = np.var(np.array(diffs), axis=(0, 2))
    np.testing.assert_allclose(var, plan.extra["target_noise_std"] ** 2, rtol=0.15)


@pytest.mark.parametrize("split", ["leftover", "equal"])
@pytest.mark.parametrize("case2", ["artificial_noise", "reduce_power"])
def test_power_and_privacy_constraints_hold(split, case2):
    rng = np.random.default_rng(1)
    counts = counts_fixture(rng)
    K = counts.shape[0]
    pol = policy(counts, snr_lin=1e4, split=split, case2=case2)
    w, P = class_weights(counts), pol.P
    for _ in range(20):
        habs = np.abs(rng.standard_normal(K) + 1j * rng.standard_normal(K)) / math.sqrt(2)
        des = pol.design(habs)
        # peak power per class block (eq. 23): lambda^2 w^2 / |h|^2 + C |P_2|^2 <= C P
        used = des.lam[None, :] ** 2 * w ** 2 / habs[:, None] ** 2 + C * des.p2
        assert (used <= C * P[:, None] * (1 + 1e-9)).all()
        zd = pol.zdelta
        noise = (1.0 + des.noise) / des.lam ** 2               # per-coordinate noise of r^k (sigma_c2 = 1)
        assert (noise >= zd ** 2 * (1 - 1e-9)).all()           # Theorem 2 holds in every class
        two = des.case == 2
        np.testing.assert_allclose(noise[two], zd[two] ** 2, rtol=1e-9)   # ... and is tight in Case II
        if case2 == "reduce_power":
            assert (des.noise == 0).all()
        elif split == "equal":
            for k in np.flatnonzero(two):
                np.testing.assert_allclose(des.rcv[:, k], des.rcv[0, k], rtol=1e-12)
        else:
            for k in np.flatnonzero(two & (des.lam < des.lam_max * (1 - 1e-9))):
                np.testing.assert_allclose(used[:, k], C * P, rtol=1e-9)  # every device at full power


def test_case_one_and_two_switch_at_the_threshold():
    rng = np.random.default_rng(2)
    counts = counts_fixture(rng)
    K = counts.shape[0]
    habs = np.linspace(0.5, 1.5, K)
    pol = policy(counts)
    lm = lambda_max(class_weights(counts), habs, pol.P)
    thr = (pol.zdelta * lm) ** 2                               # sigma_c2 at which class k switches
    k = int(np.argmax(thr))
    for factor, want in ((1 + 1e-6, 1), (1 - 1e-6, 2)):
        des = design_round(class_weights(counts), habs, pol.P, thr[k] * factor, pol.zdelta)
        assert des.case[k] == want
        if want == 1:                                          # Case I: no artificial noise, full power (eq. 27)
            assert des.rcv[:, k].sum() == 0 and des.lam[k] == pytest.approx(lm[k], rel=1e-12)
        else:
            assert des.rcv[:, k].sum() > 0
            assert (thr[k] * factor + des.noise[k]) / des.lam[k] ** 2 == pytest.approx(pol.zdelta[k] ** 2, rel=1e-9)
    # Proposition 2's T_0: the same switch, seen as a number of rounds (z*^2 grows linearly in T)
    base = policy(counts, snr_lin=0.05, T=10)
    T0 = base.t0(habs)
    below, above = policy(counts, snr_lin=0.05, T=int(math.floor(T0 * 0.98))), \
        policy(counts, snr_lin=0.05, T=int(math.ceil(T0 * 1.02)))
    assert below.T >= 1 and (below.design(habs).case == 1).all()
    assert (above.design(habs).case == 2).any()


def test_mechanism_is_the_design_target_in_case_two():
    rng = np.random.default_rng(3)
    counts = counts_fixture(rng)
    K = counts.shape[0]
    q = simplex_rows(rng, K)
    h = np.full(K, 1.0 + 0j)
    hi = policy(counts, snr_lin=1e4)                           # high SNR: Case II everywhere
    plan = hi.plan(1, q.reshape(K, -1), h, 1.0, rng)
    assert (plan.extra["case"] == 2).all()
    z = required_multiplier(10, 1.0, 1e-5, "otafd")
    assert plan.mechanism.noise_multiplier == pytest.approx(z, rel=1e-9)
    lo = policy(counts, snr_lin=1e-3)                          # low SNR: Case I, channel noise exceeds it
    plan = lo.plan(1, q.reshape(K, -1), h, 1.0, rng)
    assert (plan.extra["case"] == 1).all() and plan.mechanism.noise_multiplier > z
    cl = policy(counts, snr_lin=1e4, unit="client")           # client level: sum over classes <= 1/z*^2
    plan = cl.plan(1, q.reshape(K, -1), h, 1.0, rng)
    assert plan.mechanism.noise_multiplier >= z * (1 - 1e-9)
    s = plan.extra["target_noise_std"]
    worst = max(math.sqrt(np.sum((device_sensitivity(counts, "client")[i] / s) ** 2)) for i in range(K))
    assert 1 / plan.mechanism.noise_multiplier == pytest.approx(worst, rel=1e-12)


def test_one_sample_moves_the_targets_by_at_most_sqrt2_over_Bk():
    """The derived sensitivity (label-preserving replacement, model fixed): only block k moves, by <= sqrt2/B^k."""
    from otafl_sdr.learning.federated_data import load_federated
    from otafl_sdr.learning.models import build_model
    from otafl_sdr.learning.otafd import DeviceModels
    torch.manual_seed(0)
    cfg = load_config(None, ["data.dataset=digits", "data.clients=3", "data.partition=dominant_class",
                             "model.name=logreg", "algorithm.name=otafd", "power.policy=otafd_prop1"])
    data = load_federated(cfg)
    dm = DeviceModels(cfg, data, build_model(cfg, data.input_shape, data.num_classes))
    w = dm.get_flat() * 20                                     # a confident model: larger moves
    w_cls = class_weights(dm.counts)
    base = (w_cls[:, :, None] * dm.payload(w)).sum(0)
    i, k = 1, int(np.argmax(dm.counts[1]))
    where = int(np.flatnonzero(data.client_y[i].numpy() == k)[0])
    other = data.test_x[data.test_y == k]
    worst = 0.0
    for x_new in other[:40]:
        dm.x_pad[i, where] = x_new
        moved = (w_cls[:, :, None] * dm.payload(w)).sum(0) - base
        assert np.abs(np.delete(moved, k, axis=0)).max() < 1e-12
        worst = max(worst, float(np.linalg.norm(moved[k])))
    bound = device_sensitivity(dm.counts, "sample")[i, k]
    assert bound == pytest.approx(math.sqrt(2) / dm.counts[:, k].sum())
    assert 0 < worst <= bound


def test_prop2_matches_the_unsimplified_eq30():
    rng = np.random.default_rng(4)
    counts = counts_fixture(rng)
    K = counts.shape[0]
    eps, delta, T, eta0, gamma, L1, L2, fmax = 1.0, 1e-5, 10, 0.1, 1.0, 2.0, 3.0, 2.3
    pol = policy(counts, T=T, sensitivity="paper", L1=L1, L2=L2, f_max=fmax)
    rho = math.log(1 / delta) / (counts.sum(1) ** 2 * eps ** 2)            # rho_i (inferred in the extract)
    Bk, Bi = counts.sum(0), counts.sum(1)
    A2 = 6 * eta0 * gamma ** 2 * L2 ** 2 * L1
    b = A2 * sum(4 * C * counts[i, k] * np.max(counts[:, k] ** 2 * rho) / (Bi[i] * Bk[k] ** 2)
                 for i in range(K) for k in range(C))
    want = 3 * K * fmax / eta0 / b
    zd = design_zdelta(counts, required_multiplier(T, eps, delta, "otafd", 0.0), "sample", "paper")
    assert prop2_rounds(counts, zd, T, fmax, eta0, gamma, L1, L2) == pytest.approx(want, rel=1e-12)
    assert pol.suggested_rounds == min(max(round(want), 1), 1000)


def test_bad_options_name_the_key():
    counts = counts_fixture(np.random.default_rng(5))
    for opts, key in (({"split": "random"}, "power.options.split"), ({"calibrate": "x"}, "power.options.calibrate"),
                      ({"L1": 0}, "power.options.L1"), ({"rounds": "auto"}, "power.options.rounds")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            policy(counts, **opts)
    with pytest.raises(ConfigError, match="power.options.nope"):
        OtafdTransceiver.validate_options({"nope": 1})


def test_simplex_projection_of_noisy_targets():
    from otafl_sdr.learning.otafd import project_simplex
    rng = np.random.default_rng(6)
    v = rng.normal(size=(200, C))
    p = project_simplex(v)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    assert (p >= 0).all()
    q = rng.dirichlet(np.ones(C), size=20)
    np.testing.assert_allclose(project_simplex(q), q, atol=1e-15)           # points of the simplex stay
    # optimality (KKT): p - v = -theta + nu with nu >= 0 only where p = 0
    for x, y in zip(v, p):
        g = y - x
        theta = -g[y > 0].mean()
        np.testing.assert_allclose(g[y > 0], -theta, atol=1e-12)
        assert (g[y == 0] + theta >= -1e-12).all()
