"""``run.mlflow = true`` (issue 36, item 4): what TensorBoard gets, logged to an MLflow store, read back with
MLflow's own client (MlflowClient) from a local store under tmp_path: the rows' numbers as metrics at the
client round (server-only iterations under ``server_step/``), every config key as a param, the resolved config
as the artifact config.toml, the run FINISHED and tagged with its folder. ``MLFLOW_TRACKING_URI`` names the
store (a lab's shared one); unset, the run keeps its own in DIR/mlflow (tests/radio/test_uhd_tracking.py).
Without the package the key is refused in one line (exit 2); a store MLflow cannot open is refused in one
line before round 1."""
import json
import math
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

import otafl_sdr
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.results.tracked_config import hparams

SMALL = {"air.name": "sim", "run.rounds": 2, "data.dataset": "digits", "data.clients": 4, "model.name": "logreg",
         "run.torch_threads": 1, "algorithm.name": "upcycled_fl", "run.mlflow": True, "run.name": "mlflow-test"}


@pytest.mark.experiment
def test_a_run_logs_its_rounds_params_and_config_to_the_store_the_environment_names(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'lab' / 'mlflow.db'}"
    (tmp_path / "lab").mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    res = otafl_sdr.run(SMALL, out=tmp_path / "run")
    assert not (res.out / "mlflow").exists()                       # the environment's store, not the folder's
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("mlflow-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.tags["otafl.out"] == str(res.out.resolve()) and run.data.tags["otafl.session"] == "new"
    rows = [json.loads(x) for x in (res.out / "rounds.jsonl").read_text().splitlines()]
    for key, used in (("test_accuracy", True), ("server_step/test_accuracy", False), ("eps_pld", True),
                      ("sigma_eff", True), ("aggregate_nmse", True)):
        want = [(r["client_round"], r[key.split("/")[-1]]) for r in rows if r["uses_clients"] is used]
        hist = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        assert [s for s, _ in hist] == [s for s, _ in want] == [1, 2], key
        assert [v for _, v in hist] == pytest.approx([v for _, v in want], rel=1e-9), key
    assert not math.isclose(rows[-1]["test_accuracy"], 0.0)
    cfg = load_config(res.out / "config.toml")
    assert run.data.params == {k: str(v) for k, v in hparams(cfg).items()}
    assert run.data.params["run.rounds"] == "2" and run.data.params["algorithm.name"] == "upcycled_fl"
    assert run.info.artifact_uri.startswith((tmp_path / "lab" / "artifacts").as_uri())   # beside the store, not ./mlruns
    text = client.download_artifacts(run.info.run_id, "config.toml", str(tmp_path / "dl"))
    assert Path(text).read_text() == (res.out / "config.toml").read_text()


def test_without_the_package_the_key_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)              # as on a machine where it is not installed
    with pytest.raises(ConfigError, match=r"run.mlflow.*'mlflow' package, which is not installed"):
        otafl_sdr.api.resolve({"run.mlflow": True})
    capsys.readouterr()
    rc = main(["run", "--out", str(tmp_path / "no"), "--air", "sim", "--set", "run.mlflow=true", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "run.mlflow" in err and "Traceback" not in err
    assert not (tmp_path / "no").exists()


@pytest.mark.experiment
def test_a_store_mlflow_cannot_open_is_refused_in_one_line_before_round_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuchscheme://lab/store")
    sets = [x for k, v in SMALL.items() for x in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
    rc = main(["run", "--out", str(tmp_path / "run"), "--quiet", *sets])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "run.mlflow: cannot open the MLflow store 'nosuchscheme://lab/store'" in err
    assert not (tmp_path / "run" / "rounds.jsonl").exists() or not (tmp_path / "run" / "rounds.jsonl").read_text()


@pytest.mark.experiment
def test_an_interrupted_run_is_killed_and_its_resume_a_second_run_holding_every_row(tmp_path, monkeypatch, capsys):
    """A run stopped after client round 1 (a kill between rounds) ends its MLflow run KILLED; `run --resume`
    opens a second run in the same experiment, tagged resumed, holding every row of rounds.jsonl (the kept
    round logged again) and FINISHED: a lab's store shows both sessions and a complete curve."""
    from otafl_sdr.experiment.orchestrator import Experiment

    uri = f"sqlite:///{tmp_path / 'lab' / 'mlflow.db'}"
    (tmp_path / "lab").mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    from otafl_sdr.api import resolve

    cfg = resolve({**SMALL, "algorithm.name": "fedavg", "run.rounds": 3})
    exp = Experiment(cfg, tmp_path / "run")

    def stop(row):
        if row["round"] == 1:
            raise KeyboardInterrupt
    exp.on_round = stop
    assert exp.run().stopped_reason.startswith("interrupted")
    assert main(["run", "--resume", str(tmp_path / "run"), "--quiet"]) == 0, capsys.readouterr().err
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.get_experiment_by_name("mlflow-test").experiment_id
    runs = {r.data.tags["otafl.session"]: r for r in client.search_runs([exp_id])}
    assert set(runs) == {"new", "resumed"} and runs["new"].info.status == "KILLED"
    assert runs["resumed"].info.status == "FINISHED"
    rows = [json.loads(x) for x in (tmp_path / "run" / "rounds.jsonl").read_text().splitlines()]
    assert [r["client_round"] for r in rows] == [1, 2, 3]
    for session, steps in (("new", [1]), ("resumed", [1, 2, 3])):
        hist = sorted((m.step, m.value) for m in client.get_metric_history(runs[session].info.run_id, "eps_pld"))
        assert [s for s, _ in hist] == steps, session
        assert [v for _, v in hist] == pytest.approx([r["eps_pld"] for r in rows][:len(steps)], rel=1e-9)
