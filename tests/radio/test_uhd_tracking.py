"""The live view of a uhd run (issue 36, item 4), read back from what was written: one short run (2 client
rounds) of the uhd_sim preset with per-client sounding (``air.coherence = "track"``) through real UHD against
its device simulator, ``run.tensorboard`` and ``run.mlflow`` on (MLflow's store: the run's own, DIR/mlflow).
TensorBoard (EventAccumulator): the link's figures (``link/...``) and each client's phase, offset and gain
(``link/client_0/...``) at the client rounds, equal to the rows' ``link_health``; one constellation image a
round (``link/constellation``), a PNG of the received reference whose points cluster at the round's reference
gain. MLflow (MlflowClient): the same per-client metrics and one image a round.

The host here is slow on purpose: each round's feedback (the receiver's per-client measurement) takes
HOST_TURNAROUND_S longer, past the simulator cable's IDLE_S wait on a silent stream (a loaded host held its
sounding 0.29-0.49 s after sending it: docs/lab.md); the cable holds the capture at the clients' open bursts
(radio/uhd_sim_loopback.py), so every payload still arrives (with the cut at the idle wait, every attempt was
lost as "no preamble detected")."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from otafl_sdr.cli.main import main as cli_main

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.experiment]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_sim.toml"
FIGURES = ("phase_rad", "cfo_hz", "gain_db", "phase_std", "cfo_std_hz", "gain_db_std")
IDLE_S = 0.3                 # the simulator cable's wait on a silent stream (its default)
HOST_TURNAROUND_S = 0.8      # the feedback's extra time on this host: past IDLE_S


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, monkeypatch_module):
    from uhd_sim_helpers import fresh_simulator
    tmp = tmp_path_factory.mktemp("uhd_tracking")
    monkeypatch_module.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = tmp / "run"
    import otafl_sdr.calibration.coherence_loop as loop
    measure = loop.measure_clients

    def slow_host(*args, **kwargs):                     # a loaded host's turnaround, before the measurement
        time.sleep(HOST_TURNAROUND_S)
        return measure(*args, **kwargs)
    monkeypatch_module.setattr(loop, "measure_clients", slow_host)
    with fresh_simulator(tmp, idle_s=IDLE_S):
        assert cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out), "--set", "run.rounds=2",
                         "--set", "air.coherence=track", "--set", "run.tensorboard=true",
                         "--set", "run.mlflow=true"]) == 0
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines()]
    return out, rows


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_rows_carry_each_clients_link_health_and_the_reference(tracked_run):
    _, rows = tracked_run
    assert [r["client_round"] for r in rows] == [1, 2] and not any(r["lost"] for r in rows)
    for r in rows:
        (c,) = r["link_health"]["clients"]
        assert c["client"] == 0 and all(isinstance(c[k], float) for k in FIGURES)
        z = np.array(r["link_health"]["reference"])
        z = z[:, 0] + 1j * z[:, 1]
        g = 10 ** (r["link_health"]["gain_db"] / 20) * np.exp(1j * r["link_health"]["phase_rad"])
        assert 64 <= len(z) <= 128 and abs(np.mean(z) - g) < 0.05       # a cluster at the reference's gain


def test_a_host_slower_than_the_cables_idle_wait_gets_every_payload_through(tracked_run):
    _, rows = tracked_run
    assert [r["attempts"] for r in rows] == [1, 1] and not any(r["lost"] for r in rows)
    assert all(r["link_health"]["feedback_ms"] >= 1e3 * HOST_TURNAROUND_S > 1e3 * IDLE_S for r in rows)
    assert all(r["link_health"]["nmse_pilots"] < 0.1 for r in rows)      # the payload's pilots, not noise


def test_tensorboard_holds_per_client_link_scalars_and_a_constellation_a_round(tracked_run):
    out, rows = tracked_run
    acc = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    for k in FIGURES:
        ev = acc.Scalars(f"link/client_0/{k}")
        assert [e.step for e in ev] == [1, 2], k
        assert [e.value for e in ev] == pytest.approx([r["link_health"]["clients"][0][k] for r in rows], rel=1e-5,
                                                      abs=1e-7), k
    for k in ("gain_db", "phase_rad", "cfo", "nmse_pilots", "rho"):
        assert [e.value for e in acc.Scalars(f"link/{k}")] == pytest.approx([r["link_health"][k] for r in rows],
                                                                            rel=1e-5, abs=1e-9), k
    assert [e.step for e in acc.Scalars("test_accuracy")] == [1, 2]
    assert "link/constellation" in tags["images"]
    images = acc.Images("link/constellation")
    assert [e.step for e in images] == [1, 2]
    for e in images:
        img = np.asarray(Image.open(io.BytesIO(e.encoded_image_string)).convert("RGB"))
        assert img.shape == (e.height, e.width, 3) and min(img.shape[:2]) >= 200
        blue = (img[..., 2] > 150) & (img[..., 0] < 100)                 # the points (tab:blue) are drawn
        assert blue.sum() > 50
    assert acc.PluginTagToContent("hparams") and acc.Tensors("config/text_summary")


def test_mlflow_holds_the_same_per_client_metrics_and_an_image_a_round(tracked_run):
    out, rows = tracked_run
    client = MlflowClient(tracking_uri=f"sqlite:///{out.resolve() / 'mlflow' / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("uhd-sim").experiment_id])
    assert run.info.status == "FINISHED"
    for k in FIGURES:
        hist = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, f"link/client_0/{k}"))
        assert hist == [(r["client_round"], pytest.approx(r["link_health"]["clients"][0][k], rel=1e-9)) for r in rows]
    names = [a.path for a in client.list_artifacts(run.info.run_id, "images") if a.path.endswith(".png")]
    assert sorted(int(n.split("+step+")[1].split("+")[0]) for n in names) == [1, 2]
    assert all(n.split("/")[-1].startswith("link~constellation+") for n in names)
