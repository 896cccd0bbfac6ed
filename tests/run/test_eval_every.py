"""run.eval_every: full-data evaluation every N iterations and at the last one; the summary reports the
last evaluated round."""
import json

import pytest

from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.orchestrator import run_experiment


@pytest.mark.experiment
def test_eval_every_skips_evaluation_between_and_keeps_the_last(tmp_path):
    cfg = load_config(None, ["run.rounds=5", "run.eval_every=2", "run.progress=false", "data.dataset=digits",
                             "data.clients=4", "model.hidden=8", "train.local_epochs=1", "air.name=sim",
                             "privacy.enforce=false"])
    outcome = run_experiment(cfg, tmp_path / "r")
    rows = [json.loads(x) for x in (tmp_path / "r" / "rounds.jsonl").read_text().splitlines()]
    evaluated = [r["round"] for r in rows if r["test_accuracy"] is not None]
    assert evaluated == [2, 4, 5]
    assert all(r["train_loss"] is None for r in rows if r["round"] in (1, 3))
    assert outcome.summary["final_accuracy"] == rows[-1]["test_accuracy"]
    assert outcome.summary["final_accuracy_round"] == 5
