"""channel/ofdm_sim.py: the sim air's OFDM model (pure numpy; tests/radio/test_loopback_ofdm.py checks the
loopback flowgraph against it)."""
import numpy as np
import pytest

from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.channel.ofdm_sim import delay_extent, round_firs, subcarrier_shapes
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ofdm_plan import plan_ofdm, planned_aggregate
from otafl_sdr.transmission import aggregate_nmse

from loopback_helpers import make_cfg, make_plan

K, D = 16, 20_000


def _cfg(profile="tdl-c", spread_ns=3000.0):
    cfg = make_cfg()
    cfg.phy.waveform, cfg.phy.ofdm_fft, cfg.phy.ofdm_cp, cfg.phy.ofdm_used = "ofdm", 128, 32, 104
    cfg.channel.multipath, cfg.channel.delay_spread_ns = profile, spread_ns
    return cfg


def test_shapes_are_the_seeded_taps_on_each_subcarrier_with_mean_power_one():
    cfg = _cfg()
    mp = Multipath.from_config(cfg)
    fir = round_firs(cfg, 3, 200)
    assert fir.shape == (200, mp.length) and delay_extent(cfg) == mp.length - 1
    assert np.allclose(fir[:, mp.delays], mp.round_taps(cfg.run.seed, 3, 200))
    G = subcarrier_shapes(cfg, 3, 200)
    assert np.mean(np.abs(G) ** 2) == pytest.approx(1.0, abs=0.05)       # Parseval, unit-energy taps
    assert np.std(np.abs(G[0])) > 0.2                                    # frequency-selective
    flat = make_cfg()
    assert np.all(subcarrier_shapes(flat, 3, 4) == 1) and delay_extent(flat) == 0


@pytest.mark.parametrize("snr_db", [0.0, 10.0, 20.0])
@pytest.mark.parametrize("profile", ["tdl-a", "tdl-b", "tdl-c", "exponential"])
def test_sim_ofdm_nmse_is_its_theory(profile, snr_db):
    cfg = _cfg(profile)
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * D),
                      dim=D, sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5)
    air, ratios = SimAir(cfg), []
    for r in range(4):
        plan = make_plan(cfg, K, D, np.random.default_rng(r), rnd=r, snr_db=snr_db, jammer=r % 2 == 1)
        plan_ofdm(plan, cfg, info)
        e = planned_aggregate(plan)
        rec = air.transmit(plan, np.random.default_rng(50 + r))
        assert rec.ok and rec.extra["waveform"] == "ofdm"
        ratios.append(aggregate_nmse(rec.aggregate, e) / (plan.sigma_eff() ** 2 * D / np.sum(e ** 2)))
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.05)
