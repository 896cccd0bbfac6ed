"""`otafl-sdr replay` of an OFDM recording (phy.waveform = "ofdm", issue 26): the loopback air's OFDM round
(gr-digital's OFDM transmitters through the loopback channel: TDL-C multipath, the jammer, the receiver's
delay, CFO and phase noise) is recorded as SigMF and replayed offline by phy/ofdm.demodulate with the
recording's own per-subcarrier reference, carriers and receiver settings: the replayed aggregate is the one
the live receiver returned (as test_recording_loopback checks for single carrier), and a whole `otafl-sdr run`
with air.record_iq replays into the aggregate the run applied to its model. Hostile OFDM metadata is one
line, exit 2."""
from __future__ import annotations

import json

import numpy as np
import pytest

from otafl_sdr.experiment.replay import cli_replay, replay

from loopback_helpers import make_cfg, make_plan

pytestmark = [pytest.mark.gnuradio]

K, D = 4, 6001


def _cfg():
    cfg = make_cfg(rx_delay=5, rx_cfo=2e-5, rx_phase_noise=1e-4)
    cfg.phy.waveform, cfg.phy.ofdm_fft, cfg.phy.ofdm_cp, cfg.phy.ofdm_used = "ofdm", 128, 32, 104
    cfg.channel.multipath, cfg.channel.delay_spread_ns = "tdl-c", 2000.0
    cfg.air.record_iq = True
    return cfg


def _live_round(tmp_path, jammer=True, rnd=3):
    """(recording path, live Reception, plan) of one loopback OFDM round."""
    from otafl_sdr.power.base import SystemInfo
    from otafl_sdr.power.ofdm_plan import plan_ofdm
    from otafl_sdr.radio.loopback_air import LoopbackAir
    from otafl_sdr.radio.recording import Recorder
    cfg = _cfg()
    plan = make_plan(cfg, K, D, np.random.default_rng(7), rnd=rnd, snr_db=10.0, jammer=jammer)
    plan.extra["air_sigma_c2"] = plan.sigma_c2
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10.0 * D), dim=D,
                      sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5)
    plan_ofdm(plan, cfg, info)
    with LoopbackAir(cfg) as lb:
        rec = lb.transmit(plan, np.random.default_rng(1))
    assert rec.ok, rec.reason
    path = Recorder(tmp_path / "iq").record(plan.round, rec.extra.pop("iq"), rec.extra.pop("iq_meta"))
    return path, rec, plan


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return _live_round(tmp_path_factory.mktemp("ofdm_rec"))


def test_an_ofdm_recording_replays_to_the_live_aggregate(recorded):
    from otafl_sdr.power.ofdm_plan import planned_aggregate
    from otafl_sdr.transmission import aggregate_nmse
    path, rec, plan = recorded
    out = replay(path)
    assert out["ok"] and out["waveform"] == "ofdm" and out["round"] == 3 and out["air"] == "loopback"
    assert out["timing"] == 64 and out["rho"] == pytest.approx(rec.extra["rho"], rel=1e-9)
    np.testing.assert_allclose(out["aggregate"], rec.aggregate, rtol=0, atol=1e-12 * np.max(np.abs(rec.aggregate)))
    assert out["ofdm_symbols"] == plan.extra["ofdm"]["n_ofdm"] and out["data_carriers"] == rec.extra["data_carriers"]
    assert abs(out["cfo"] - 2e-5) < 5e-6
    # the aggregate's own noise is the plan's (channel + jammer): replay's sigma_eff figures say so
    e = planned_aggregate(plan)
    own = float(np.std(out["aggregate"] - e))
    assert out["sigma_eff_planned"] == pytest.approx(plan.sigma_eff(), rel=1e-12)
    assert out["sigma_eff_measured"] == pytest.approx(own, rel=0.1)
    assert aggregate_nmse(out["aggregate"], e) > 0


def test_the_cli_prints_and_saves_the_ofdm_aggregate(recorded, tmp_path, capsys):
    path, rec, _ = recorded
    npy = tmp_path / "agg.npy"
    assert cli_replay([str(path), "--out", str(npy)]) == 0
    text = capsys.readouterr().out
    assert "OFDM:" in text and "data carriers" in text and "Traceback" not in text
    np.testing.assert_allclose(np.load(npy), rec.aggregate, rtol=0, atol=1e-12 * np.max(np.abs(rec.aggregate)))
    assert cli_replay([str(path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["waveform"] == "ofdm" and stats["nmse_pilots"] is None and stats["gain_abs_min"] > 0


def _edit(src, dst, **ofdm):
    import shutil
    meta = json.loads(src.read_text())
    meta["global"]["otafl:extra"]["ofdm"].update(ofdm)
    for k in [k for k, v in ofdm.items() if v is None]:
        del meta["global"]["otafl:extra"]["ofdm"][k]
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src.with_suffix(".sigmf-data"), dst / src.with_suffix(".sigmf-data").name)
    (dst / src.name).write_text(json.dumps(meta))
    return dst / src.name


@pytest.mark.parametrize("ofdm, words", [
    ({"carriers": [0, 0]}, "'carriers' is not a list of distinct data subcarriers"),
    ({"carriers": [6]}, "'carriers' is not a list of distinct data subcarriers"),     # a comb pilot
    ({"carriers": "x"}, "'carriers' is not a list"),
    ({"ref_amplitude": [1.0, 2.0]}, "'ref_amplitude' is not 104 finite numbers"),
    ({"n_ofdm": -1}, "'n_ofdm' is -1"),
    ({"n_ofdm": 1}, "do not fit 1 OFDM symbols"),
    ({"backoff": 99}, "'backoff' is 99"),
    ({"search": None}, "lacks search (written before OFDM replay was built?)"),
    ({"phase_noise": float("nan")}, "'phase_noise' is"),
])
def test_hostile_ofdm_metadata_is_one_line(recorded, tmp_path, capsys, ofdm, words):
    path = _edit(recorded[0], tmp_path / "bad", **ofdm)
    assert cli_replay([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_capture_without_the_burst_is_a_lost_round(recorded, tmp_path, capsys):
    """Noise in place of the IQ (the data file's hash dropped from the metadata): no training found, exit 1
    (lost), not a traceback."""
    path = _edit(recorded[0], tmp_path / "noise")
    meta = json.loads(path.read_text())
    meta["global"].pop("core:sha512", None)
    path.write_text(json.dumps(meta))
    n = np.fromfile(path.with_suffix(".sigmf-data"), "<c8").size
    rng = np.random.default_rng(0)
    (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype("<c8").tofile(path.with_suffix(".sigmf-data"))
    assert cli_replay([str(path)]) == 1
    assert "lost: no OFDM training symbols detected" in capsys.readouterr().out


@pytest.mark.slow
def test_an_ofdm_run_records_and_replays_to_the_aggregate_it_applied(tmp_path):
    """`otafl-sdr run` on loopback OFDM with air.record_iq: round 1's recording replays to the aggregate
    the run applied to its model (FedAvg: w1 = w0 + tau x aggregate, eq. 7)."""
    import torch
    from otafl_sdr.cli.main import main as cli_main
    from otafl_sdr.experiment.orchestrator import make_experiment
    from otafl_sdr.configure.load import default_experiment
    cfg = default_experiment(["run.rounds=1", "run.progress=false", "air.name=loopback", "air.record_iq=true",
                              "algorithm.name=fedavg", "data.dataset=digits", "data.clients=4", "model.hidden=16",
                              "phy.waveform=ofdm", "phy.ofdm_cp=32", "channel.multipath=tdl-c",
                              "channel.delay_spread_ns=2000", "privacy.targeting=paper"])
    before = make_experiment(cfg, tmp_path / "init")
    before.build()
    before.close()                  # its built parts stay; the folder's lock is released
    w0 = before.trainer.get_flat().detach().double()
    out = tmp_path / "run"
    make_experiment(cfg, out).run()
    w1 = torch.load(out / "checkpoint.pt", weights_only=True)["w"].double()
    meta = out / "iq" / "round_0001.sigmf-meta"
    agg_file = tmp_path / "agg.npy"
    assert cli_main(["replay", str(meta), "--out", str(agg_file)]) == 0
    np.testing.assert_allclose(np.load(agg_file) * cfg.train.tau, (w1 - w0).numpy(), rtol=1e-5, atol=1e-6)
    notes = [a for a in json.loads(meta.read_text())["annotations"] if a["core:label"].startswith("ofdm")]
    assert len(notes) == cfg.phy.ofdm_train + json.loads(meta.read_text())["global"]["otafl:extra"]["ofdm"]["n_ofdm"]
