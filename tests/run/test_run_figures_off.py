"""`run.figures = false`: a run draws no figures at its end (a sweep's many cells, a test that reads none; about
3.4 s of CPU a run here) and says so in its summary's notes; its rows, ledger, checkpoint and summary are
written as always, its hash chain is a default run's when the key is left at true, and `otafl-sdr report`
draws the figures afterwards."""
import json

import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.config.schema import hashed_toml
from otafl_sdr.configure.load import default_experiment

pytestmark = [pytest.mark.experiment]

SMALL = ["air.name=sim", "run.rounds=2", "run.progress=false", "data.dataset=digits", "data.clients=3",
         "model.hidden=8", "run.torch_threads=1", "algorithm.name=fedavg"]


def test_a_run_without_figures_writes_its_results_and_report_draws_them(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--out", str(out), "--quiet", *[a for s in SMALL + ["run.figures=false"]
                                                         for a in ("--set", s)]]) == 0
    assert not [p for p in out.iterdir() if p.suffix in (".png", ".pdf", ".svg")]
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["stopped_reason"] and summary["rounds"] == 2
    assert any("run.figures = false" in n and "otafl-sdr report" in n for n in summary["notes"])
    assert len((out / "rounds.jsonl").read_text().splitlines()) == 2
    assert (out / "privacy_ledger.jsonl").stat().st_size > 0 and (out / "checkpoint.pt").is_file()
    assert main(["verify", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    capsys.readouterr()
    assert {p.name for p in (out / "report").glob("*.png")} == {"accuracy.png", "loss.png", "epsilon.png",
                                                                 "nmse.png"}


def test_the_key_at_its_default_leaves_the_hashed_config_as_before_it_existed():
    assert "figures" not in hashed_toml(default_experiment(SMALL))
    assert "figures = false" in hashed_toml(default_experiment(SMALL + ["run.figures=false"]))
