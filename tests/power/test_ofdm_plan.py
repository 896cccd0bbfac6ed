"""power/ofdm_plan.py: the policy's alpha per subcarrier (truncated channel inversion), the round's carrier
map, the pre-equalised reference and the per-subcarrier mechanism, all from CSI and planned quantities."""
import numpy as np
import pytest

from otafl_sdr.channel.ofdm_sim import subcarrier_shapes
from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ofdm_plan import plan_ofdm, plan_subcarriers, planned_aggregate

from loopback_helpers import make_cfg, make_plan

K, D = 8, 4000


def _cfg(profile="tdl-c", spread_ns=2000.0, truncation=0.01):
    cfg = make_cfg()
    cfg.phy.waveform, cfg.phy.ofdm_cp, cfg.phy.ofdm_truncation = "ofdm", 24, truncation
    cfg.channel.multipath, cfg.channel.delay_spread_ns = profile, spread_ns
    return cfg


def _info(snr_db=1.0):
    return SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * D),
                      dim=D, sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5)


def _plan(cfg, rnd=0, seed=0, snr_db=1.0):
    plan = make_plan(cfg, K, D, np.random.default_rng(seed), rnd=rnd, snr_db=snr_db)
    flat = plan.mechanism
    plan_ofdm(plan, cfg, _info(snr_db))
    return plan, flat


def test_per_subcarrier_inversion_scaling_and_truncation():
    rng = np.random.default_rng(0)
    G = (rng.standard_normal((K, 52)) + 1j * rng.standard_normal((K, 52))) / np.sqrt(2)
    alpha = np.full(K, 2.0 + 0j)
    P = np.full(K, 9.0)
    a, s, trunc = plan_subcarriers(alpha, G, P, np.ones(K, bool), 0.05)
    assert np.array_equal(trunc, np.abs(G) ** 2 < 0.05)
    assert np.all(a[trunc] == 0)
    ok = ~trunc
    # inversion: h alpha_ik G_ik / alpha_i = 1 / s_ik, the eq. 11 scaling s_ik >= 1 per subcarrier
    assert np.allclose((a * G / alpha[:, None])[ok], 1 / s[ok])
    assert np.all(s >= 1) and np.all(np.abs(a) <= np.sqrt(P[0]) * (1 + 1e-12))
    # silent clients send nothing anywhere
    a2, _, t2 = plan_subcarriers(alpha, G, P, np.array([False] + [True] * (K - 1)), 0.05)
    assert np.all(a2[0] == 0) and np.all(t2[0])


def test_the_power_limit_holds_for_every_payload_in_the_clip_ball():
    """sum_k |alpha_ik|^2 ||u_ik||^2 <= P_i for the worst unit payload: all its energy on the subcarrier
    with the largest |alpha_ik| (module doc of power/ofdm_plan.py)."""
    cfg = _cfg()
    plan, _ = _plan(cfg, snr_db=-5.0)
    a = plan.extra["ofdm"]["alpha"]
    assert np.all(np.max(np.abs(a), axis=1) ** 2 <= plan.power_limit * (1 + 1e-9))


def test_flat_channel_gives_the_flat_mechanism_exactly():
    cfg = _cfg("flat", 0.0)
    plan, flat = _plan(cfg)
    m = plan.mechanism
    assert m.sensitivity == flat.sensitivity and m.sigma_eff == flat.sigma_eff
    assert m.extra["waveform"] == "ofdm" and m.extra["truncated"] == 0
    assert np.allclose(plan.extra["ofdm"]["eff_gain"][:, OfdmLayout().data_pos], plan.target_gain[:, None])
    assert np.allclose(planned_aggregate(plan), plan.expected_aggregate())


def test_frequency_selective_plan_never_exceeds_the_flat_gains_and_skips_dead_carriers():
    cfg = _cfg(truncation=0.2)
    for rnd in range(4):
        plan, flat = _plan(cfg, rnd=rnd, seed=rnd)
        od = plan.extra["ofdm"]
        eff = np.abs(od["eff_gain"])
        assert np.all(eff <= plan.target_gain[:, None] * (1 + 1e-9))
        assert plan.mechanism.sensitivity <= flat.sensitivity * (1 + 1e-12)
        assert plan.mechanism.sigma_eff == flat.sigma_eff
        trunc = od["truncated"]
        G = subcarrier_shapes(cfg, rnd, K)
        assert np.array_equal(trunc, np.abs(G) ** 2 < 0.2)
        assert np.all(od["alpha"][trunc] == 0)
        lay = OfdmLayout.from_phy(cfg.phy)
        dead = lay.data_pos[np.all(trunc[:, lay.data_pos], axis=0)]
        assert not set(dead) & set(od["carriers"])
        # the reference: c / H_ik on the untruncated subcarriers of the senders; A_k = c x senders on k
        ref = od["ref"]
        H = plan.h[:, None] * G
        sent = ref != 0
        c = (ref * H)[sent]
        assert np.allclose(c, c[0]) and np.all(~sent[trunc])
        assert np.allclose(od["ref_amp"], c[0].real * sent.sum(axis=0))


def test_the_plan_is_decided_from_csi_never_from_the_payload():
    cfg = _cfg(truncation=0.1)
    a, _ = _plan(cfg, rnd=2, seed=5)
    b = make_plan(cfg, K, D, np.random.default_rng(5), rnd=2)
    b.payload = np.zeros_like(b.payload)                    # another payload, same channels
    plan_ofdm(b, cfg, _info())
    for key in ("alpha", "eff_gain", "truncated", "carriers", "ref", "ref_amp"):
        assert np.array_equal(a.extra["ofdm"][key], b.extra["ofdm"][key]), key
    assert a.mechanism.sensitivity == b.mechanism.sensitivity


def test_a_cyclic_prefix_shorter_than_the_delay_extent_is_refused_in_one_line():
    from otafl_sdr.configure.validation import validate
    from otafl_sdr.errors import ConfigError
    cfg = _cfg("tdl-a", 3000.0)                 # 3 samples RMS at 1 MS/s: taps over 29 samples
    cfg.phy.ofdm_cp = 16
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    msg = str(e.value)
    assert "\n" not in msg and "phy.ofdm_cp" in msg and "29 samples" in msg
    cfg.phy.ofdm_cp = 30
    validate(cfg)
