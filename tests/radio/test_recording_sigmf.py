"""SigMF recording of a round's received IQ and offline replay (issue 3, item 4).

The IQ is a real superposition made with the phy modem (K clients, pre-equalised reference, receiver
CFO and AWGN); replay must give exactly the aggregate the live receiver computed from the same samples."""
import json
import subprocess
import sys

import numpy as np
import pytest

from otafl_sdr.config.schema import Config
from otafl_sdr.errors import UserError
from otafl_sdr.phy import Modem, pack_reals, unpack_reals
from otafl_sdr.phy.reference import reference_gains
from otafl_sdr.radio.recording import Recorder, read_recording, record_round, round_meta
from otafl_sdr.experiment.replay import cli_replay, replay
from otafl_sdr.transmission import Mechanism, RoundPlan, aggregate_nmse, aggregate_nmse_theory

pytestmark = [pytest.mark.net]


def _plan(rng, K=3, d=1001, round_=3):
    payload = rng.standard_normal((K, d)) / np.sqrt(d)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    p = np.full(K, 1.0 / K)
    alpha_u = 5.0
    alpha = p * alpha_u / h                                     # channel inversion, perfect CSI
    return RoundPlan(round=round_, payload=payload, alpha=alpha, h=h, target_gain=p, alpha_u=alpha_u,
                     alpha_cj=0.0, h_cj=0j, sigma_c2=1e-4, mode=["update"] * K,
                     mechanism=Mechanism(round=round_, sensitivity=1.0, sigma_eff=0.1))


def _received_iq(plan, modem, rng, rx_cfo=3e-5, slack=37):
    """y = sum_i h_i x_i with a pre-equalised reference, then receiver CFO, a delay and AWGN (complex64)."""
    n_sym = (plan.dim + 1) // 2
    ref_gain, ref_amp = reference_gains(plan.h, np.ones(plan.clients), modem.layout(n_sym).n_reference)
    y = sum(plan.h[i] * modem.modulate(plan.alpha[i] * pack_reals(plan.payload[i]), ref_gain[i])
            for i in range(plan.clients))
    y = np.concatenate([np.zeros(slack), y, np.zeros(slack)])
    y = y * np.exp(2j * np.pi * rx_cfo * np.arange(len(y)))
    y = y + np.sqrt(plan.sigma_c2) * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    return y.astype(np.complex64), ref_amp


@pytest.fixture
def recorded(tmp_path):
    rng = np.random.default_rng(7)
    cfg = Config()
    plan = _plan(rng)
    modem = Modem(cfg.phy)
    iq, ref_amp = _received_iq(plan, modem, rng)
    n_sym = (plan.dim + 1) // 2
    live = modem.demodulate(iq, n_sym, ref_amp)                   # the receiver, live
    assert live.ok
    agg_live = unpack_reals(live.symbols, plan.dim) / plan.alpha_u
    meta = round_meta(cfg, plan, sample_rate=1e6, ref_amplitude=ref_amp, n_symbols=n_sym, modem=modem,
                      air="loopback", hw="test: phy modem + numpy AWGN")
    path = Recorder(tmp_path / "iq").record(plan.round, iq, meta)
    return path, plan, iq, agg_live, live


def test_replay_gives_the_live_aggregate(recorded):
    path, plan, iq, agg_live, live = recorded
    out = replay(path)
    assert out["ok"] and out["round"] == 3 and out["d"] == plan.dim
    np.testing.assert_array_equal(out["aggregate"], agg_live)     # same samples, same receiver
    assert out["timing"] == live.timing and out["cfo"] == live.cfo
    nmse = aggregate_nmse(out["aggregate"], plan.expected_aggregate())          # and it is the aggregate
    assert nmse < 2 * aggregate_nmse_theory(plan)
    assert abs(out["cfo"] - 3e-5) < 1.5e-5                      # the receiver offset it removed


def test_recording_is_valid_sigmf_with_the_round_metadata(recorded):
    from sigmf import sigmffile
    path, plan, iq, _, _ = recorded
    assert path.name == "round_0003.sigmf-meta"
    assert path.with_suffix(".sigmf-data").stat().st_size == iq.size * 8
    smf = sigmffile.fromfile(str(path))                          # checks the sha512 too
    smf.validate()
    g = smf.get_global_info()
    assert g["core:datatype"] == "cf32_le" and g["core:sample_rate"] == 1e6
    assert g["otafl:round"] == 3 and g["otafl:alpha_u"] == plan.alpha_u and g["otafl:d"] == plan.dim
    assert g["otafl:phy"]["sps"] == Config().phy.sps and "phase_noise" in g["otafl:modem"]
    assert smf.get_captures()[0]["core:frequency"] == Config().uhd.freq
    np.testing.assert_array_equal(smf.read_samples(), iq)
    x, meta = read_recording(path.with_suffix(".sigmf-data"))
    np.testing.assert_array_equal(x, iq)
    assert meta["n_symbols"] == (plan.dim + 1) // 2 and meta["seed"] == 0


def test_retried_attempts_get_their_own_files(tmp_path):
    rec = Recorder(tmp_path)
    meta = dict(sample_rate=1e6, round=5, alpha_u=1.0, d=4, n_symbols=2, ref_amplitude=1.0, phy={})
    a = rec.record(5, np.ones(10, np.complex64), meta)
    b = rec.record(5, np.ones(10, np.complex64), meta, attempt=1)
    assert (a.name, b.name) == ("round_0005.sigmf-meta", "round_0005_try1.sigmf-meta")
    assert rec.paths == [a, b]


def test_a_recording_of_noise_replays_as_a_lost_burst(recorded, tmp_path):
    path, plan, iq, _, _ = recorded
    _, meta = read_recording(path)
    noise = (np.random.default_rng(1).standard_normal(iq.size) * 0.1).astype(np.complex64)
    p = record_round(tmp_path / "n", 4, noise, meta)
    out = replay(p)
    assert not out["ok"] and out["aggregate"] is None and "preamble" in out["reason"]
    assert cli_replay([str(p)]) == 1


def test_bad_recordings_are_one_line_user_errors(recorded, tmp_path, capsys):
    path, *_ = recorded
    with pytest.raises(UserError, match="not found"):
        replay(tmp_path / "nope.sigmf-meta")
    data = path.with_suffix(".sigmf-data")
    raw = bytearray(data.read_bytes())
    raw[100] ^= 0xFF                                              # corrupt one byte: checksum fails
    data.write_bytes(bytes(raw))
    with pytest.raises(UserError, match="not valid SigMF"):
        replay(path)
    meta = json.loads(path.read_text())
    meta["global"] = {k: v for k, v in meta["global"].items() if not k.startswith("otafl:")}
    meta["global"].pop("core:sha512")
    path.write_text(json.dumps(meta))
    with pytest.raises(UserError, match="not written by otafl-sdr"):
        replay(path)
    assert cli_replay([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_replay_command(recorded, tmp_path):
    path, plan, _, agg_live, _ = recorded
    out_npy = tmp_path / "agg.npy"
    r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "replay", str(path), "--out", str(out_npy)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "round 3" in r.stdout and "cfo" in r.stdout
    np.testing.assert_array_equal(np.load(out_npy), agg_live)
    r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "replay", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
