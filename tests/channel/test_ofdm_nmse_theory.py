"""rounds.jsonl's ``aggregate_nmse_theory`` for an OFDM round (power/ofdm_plan.ofdm_nmse_theory): the NMSE
against the intended sum sum_i p_i u_i, truncation's bias and the per-subcarrier noise included, so that the
printed NMSE / theory is 1 on a frequency-selective channel as on a flat one (before, the flat theory made an
OFDM round under TDL-C look 6-36x worse than its theory)."""
import numpy as np
import pytest

from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ofdm_plan import ofdm_nmse_theory, plan_ofdm, planned_aggregate
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory
from otafl_sdr.workload.workloads import nmse_theory

from loopback_helpers import make_cfg, make_plan

K, D = 16, 20_000


def _cfg(profile):
    cfg = make_cfg()
    cfg.phy.waveform, cfg.phy.ofdm_fft, cfg.phy.ofdm_cp, cfg.phy.ofdm_used = "ofdm", 128, 32, 104
    cfg.channel.multipath, cfg.channel.delay_spread_ns = profile, 3000.0
    cfg.phy.ofdm_truncation = 0.1                         # a visible truncation bias
    return cfg


@pytest.mark.parametrize("snr_db", [0.0, 10.0, 20.0])
def test_ofdm_nmse_against_the_intended_sum_is_its_theory(snr_db):
    cfg = _cfg("tdl-c")
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * D),
                      dim=D, sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5)
    air, ratios, biased = SimAir(cfg), [], []
    for r in range(6):
        plan = make_plan(cfg, K, D, np.random.default_rng(r), rnd=r, snr_db=snr_db, jammer=r % 2 == 1)
        plan_ofdm(plan, cfg, info)
        expected = plan.expected_aggregate()
        rec = air.transmit(plan, np.random.default_rng(70 + r))
        theory = nmse_theory(plan, expected)
        assert theory == ofdm_nmse_theory(plan, expected)
        ratios.append(aggregate_nmse(rec.aggregate, expected) / theory)
        # the bias is real: the planned aggregate leaves truncated coordinates out
        bias = np.sum((planned_aggregate(plan) - expected) ** 2) / np.sum(expected ** 2)
        biased.append(bias / theory)
        assert theory > aggregate_nmse_theory(plan, expected)
    print(f"{snr_db} dB: NMSE / OFDM theory {np.round(ratios, 3)}, bias share {np.round(biased, 3)}")
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.05)
    assert max(biased) > 0.05                               # the test exercises the bias term


def test_a_flat_ofdm_round_has_the_single_carrier_theory():
    cfg = make_cfg()
    cfg.phy.waveform, cfg.phy.ofdm_fft, cfg.phy.ofdm_cp, cfg.phy.ofdm_used = "ofdm", 128, 32, 104
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10.0 * D),
                      dim=D, sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5)
    plan = make_plan(cfg, K, D, np.random.default_rng(3), rnd=3, snr_db=10.0, jammer=True)
    plan_ofdm(plan, cfg, info)
    expected = plan.expected_aggregate()
    assert ofdm_nmse_theory(plan, expected) == pytest.approx(aggregate_nmse_theory(plan, expected), rel=1e-9)
