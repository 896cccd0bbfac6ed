"""`otafl-sdr replay` of a jammed round: the aggregate's noise it reports is the noise the aggregate holds.

The receiver measures noise on the reference slots, where the jammer is gated off; a jammed round's aggregate
carries the jammer's noise on top (issue 27: replay said 1.3e-4 where the aggregate's own noise was 2.66e-3).
The IQ is a real superposition made with the phy modem: K clients, the jammer's RRC-shaped CN(0, 2) symbols in
the payload slots (``Modem.jammer_mask``) through h_cj, receiver AWGN; pure numpy, no GNU Radio."""
import json

import numpy as np
import pytest

from otafl_sdr.config.schema import Config
from otafl_sdr.phy import Modem, pack_reals
from otafl_sdr.phy.pulse_shaping import shape
from otafl_sdr.phy.reference import reference_gains
from otafl_sdr.radio.recording import Recorder, round_meta
from otafl_sdr.experiment.replay import cli_replay, replay
from otafl_sdr.transmission import Mechanism, RoundPlan


def _jammed(tmp_path, alpha_cj: float, drop_h_cj: bool = False):
    rng = np.random.default_rng(11)
    cfg, K, d = Config(), 3, 4001
    modem = Modem(cfg.phy)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    alpha_u, h_cj = 5.0, 0.8 - 0.3j
    plan = RoundPlan(round=2, payload=rng.standard_normal((K, d)) / np.sqrt(d), alpha=np.full(K, alpha_u / K) / h,
                     h=h, target_gain=np.full(K, 1.0 / K), alpha_u=alpha_u, alpha_cj=alpha_cj, h_cj=h_cj,
                     sigma_c2=1e-4, mode=["update"] * K, mechanism=Mechanism(round=2, sensitivity=1.0, sigma_eff=0.1))
    n_sym = (d + 1) // 2
    lay = modem.layout(n_sym)
    ref_gain, ref_amp = reference_gains(h, np.ones(K), lay.n_reference)
    y = sum(h[i] * modem.modulate(plan.alpha[i] * pack_reals(plan.payload[i]), ref_gain[i]) for i in range(K))
    jam = modem.jammer_mask(n_sym) * (rng.standard_normal(lay.n_frame) + 1j * rng.standard_normal(lay.n_frame))
    shaped = shape(jam, modem.taps, modem.sps)
    y[modem.guard:modem.guard + len(shaped)] += h_cj * alpha_cj * shaped
    y = np.concatenate([np.zeros(29), y, np.zeros(29)])
    y = y + np.sqrt(plan.sigma_c2) * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    meta = round_meta(cfg, plan, sample_rate=1e6, ref_amplitude=ref_amp, n_symbols=n_sym, modem=modem,
                      air="loopback", hw="test: phy modem + numpy jammer and AWGN")
    if drop_h_cj:
        meta.pop("h_cj")
    return Recorder(tmp_path / "iq").record(plan.round, y.astype(np.complex64), meta), plan


@pytest.mark.parametrize("alpha_cj", [0.0, 0.25])
def test_replay_reports_the_aggregates_own_noise(tmp_path, alpha_cj):
    path, plan = _jammed(tmp_path, alpha_cj)
    out = replay(path)
    assert out["ok"]
    own = float(np.std(out["aggregate"] - plan.expected_aggregate()))     # the noise the aggregate holds
    assert out["sigma_eff_measured"] == pytest.approx(own, rel=0.1)
    assert out["sigma_eff_planned"] == pytest.approx(plan.sigma_eff(), rel=1e-12)
    assert out["sigma_channel_measured"] == pytest.approx(np.sqrt(plan.sigma_c2) / plan.alpha_u, rel=0.15)
    assert out["sigma_eff_measured"] <= out["aggregate_rms"]
    if alpha_cj:      # the jammer dominates: the reference slots alone would say ~20x less
        assert out["sigma_channel_measured"] < own / 10
        assert out["sigma_jammer"] == pytest.approx(abs(0.8 - 0.3j) * alpha_cj / plan.alpha_u, rel=1e-12)
        assert "jammer" in out["sigma_eff_basis"]


def test_a_jammed_recording_without_h_cj_says_the_jammers_share_is_unknown(tmp_path, capsys):
    path, _ = _jammed(tmp_path, 0.25, drop_h_cj=True)
    out = replay(path)
    assert np.isnan(out["sigma_eff_measured"]) and "unknown" in out["sigma_eff_basis"]
    assert cli_replay([str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sigma_eff_measured"] is None and printed["sigma_channel_measured"] > 0
