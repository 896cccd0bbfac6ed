"""`otafl-sdr replay` of an OFDM recording without GNU Radio (the fast suite's check; test_replay_ofdm.py
replays the loopback air's own recordings): a superposed OFDM round built in numpy from a real per-subcarrier
plan (power/ofdm_plan.py) under TDL-C (each client's burst through h_i and its multipath FIR, receiver delay
and AWGN), demodulated by phy/ofdm.demodulate, recorded with radio/recording.ofdm_round_meta and the
receiver's settings: replay returns the same aggregate and timing."""
import numpy as np
import pytest

from otafl_sdr.channel.ofdm_sim import round_firs
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.packing import pack_reals, symbols_for, unpack_reals
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ofdm_plan import plan_ofdm, planned_aggregate
from otafl_sdr.radio.recording import Recorder, ofdm_round_meta
from otafl_sdr.experiment.replay import replay

from loopback_helpers import make_cfg, make_plan

K, D, DELAY = 4, 3001, 9


def test_a_numpy_ofdm_round_replays_to_its_demodulated_aggregate(tmp_path):
    cfg = make_cfg()
    cfg.phy.waveform, cfg.phy.ofdm_cp = "ofdm", 32
    cfg.channel.multipath, cfg.channel.delay_spread_ns = "tdl-c", 2000.0
    rng = np.random.default_rng(4)
    plan = make_plan(cfg, K, D, rng, rnd=2, snr_db=20.0)
    plan_ofdm(plan, cfg, SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 100.0 * D),
                                    dim=D, sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5))
    od, lay = plan.extra["ofdm"], OfdmLayout.from_phy(cfg.phy)
    carriers, n_ofdm, alpha = od["carriers"], od["n_ofdm"], np.asarray(od["alpha"])
    fir = round_firs(cfg, plan.round, K)
    y = np.zeros(lay.burst_samples(n_ofdm) + fir.shape[1] + 2 * DELAY + lay.symbol_len, complex)
    for i in range(K):
        ref = np.where(alpha[i] != 0, od["ref"][i] / np.where(alpha[i] != 0, alpha[i], 1.0), 0.0)
        grid = lay.grid(pack_reals(plan.payload[i]), carriers, n_ofdm, ref) * alpha[i][None, :]
        x = np.convolve(plan.h[i] * lay.modulate(grid), fir[i])
        y[DELAY:DELAY + len(x)] += x
    y += np.sqrt(plan.sigma_c2) * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    search = DELAY + lay.guard + lay.symbol_len - 1             # at most L - 1 past the true start
    backoff = (lay.cp - (fir.shape[1] - 1)) // 2
    res = demodulate(y, lay, symbols_for(D), carriers, n_ofdm, od["ref_amp"], search=search, backoff=backoff)
    assert res.ok and res.timing >= DELAY + lay.guard
    live = unpack_reals(res.symbols, D) / plan.alpha_u
    e = planned_aggregate(plan)
    assert np.sum((live - e) ** 2) / np.sum(e ** 2) < 3 * plan.sigma_eff() ** 2 * D / np.sum(e ** 2)
    meta = ofdm_round_meta(cfg, plan, lay, n_ofdm, carriers, res.timing, sample_rate=1e6, ref_amplitude=od["ref_amp"],
                           air="sim", hw="test: numpy OFDM superposition",
                           receiver={"search": search, "backoff": backoff, "phase_noise": 1e-6})
    path = Recorder(tmp_path / "iq").record(plan.round, y.astype(np.complex64), meta)
    out = replay(path)
    assert out["ok"] and out["waveform"] == "ofdm" and out["timing"] == res.timing
    # the recording holds complex64: the replayed aggregate is the live one within that rounding
    np.testing.assert_allclose(out["aggregate"], live, rtol=0, atol=1e-5 * np.max(np.abs(live)))
    assert out["sigma_eff_planned"] == pytest.approx(plan.sigma_eff(), rel=1e-12)
