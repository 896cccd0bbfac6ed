"""Resume: a run interrupted after a checkpoint and resumed equals an uninterrupted run with the same
seed, and its privacy ledger equals it exactly (spend never forgotten, never counted twice)."""
import json

import pytest

from otafl_sdr.experiment.orchestrator import Experiment


def _rows(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def _strip(rows, drop=("wall_s", "air_s", "time", "prev", "hash")):   # the chain covers wall-clock times
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


@pytest.mark.experiment
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, small_cfg):
    small_cfg.algorithm.name = "fedprox"
    small_cfg.run.rounds = 4
    full = Experiment(small_cfg, tmp_path / "full", progress=False).run()
    assert not full.stopped_reason

    exp = Experiment(small_cfg, tmp_path / "cut", progress=False)
    orig = exp.run_round

    def crashing(it, *a, **k):
        row = orig(it, *a, **k)          # round 3 is trained, recorded in the ledger and transmitted...
        if it == 3:
            raise KeyboardInterrupt      # ...but the process dies before the model is checkpointed
        return row
    exp.run_round = crashing
    cut = exp.run()
    assert "interrupted" in cut.stopped_reason
    assert len(_rows(tmp_path / "cut" / "rounds.jsonl")) == 2
    assert len(_rows(tmp_path / "cut" / "privacy_ledger.jsonl")) == 3     # round 3 was spent

    resumed = Experiment.resume(tmp_path / "cut", progress=False).run()
    assert not resumed.stopped_reason
    a = _rows(tmp_path / "full" / "rounds.jsonl")
    b = _rows(tmp_path / "cut" / "rounds.jsonl")
    assert [r["round"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(_strip(a), _strip(b)):
        for k, v in ra.items():
            if isinstance(v, float):
                assert rb[k] == pytest.approx(v, rel=1e-6, abs=1e-9), k
            else:
                assert rb[k] == v, k
    la = _strip(_rows(tmp_path / "full" / "privacy_ledger.jsonl"))
    lb = _strip(_rows(tmp_path / "cut" / "privacy_ledger.jsonl"))
    assert la == lb                                   # exactly: 4 lines, round 3 not counted twice
    assert full.summary["eps_rdp"] == resumed.summary["eps_rdp"]


def test_resume_of_non_results_folder_is_a_user_error(tmp_path):
    from otafl_sdr.errors import UserError
    with pytest.raises(UserError, match="no config.toml"):
        Experiment.resume(tmp_path)
