"""``run.tensorboard = true`` (issue 27, item 6): the round hook writes each row's numeric fields as TensorBoard
scalars (step = the iteration) into DIR/tensorboard; read back with tensorboard's own EventAccumulator they
equal rounds.jsonl (float32, as TensorBoard stores them), a --resume --extend appends the new rounds, and where
the package is absent the key is refused in one line (exit 2) before anything runs."""
import json
import math
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import otafl_sdr
from otafl_sdr.cli.main import main
from otafl_sdr.errors import ConfigError

SMALL = {"air.name": "sim", "run.rounds": 2, "data.dataset": "digits", "data.clients": 4, "model.name": "logreg",
         "run.torch_threads": 1, "algorithm.name": "upcycled_fl", "run.tensorboard": True}


def scalars(out):
    acc = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def expected(out):
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines()]
    want: dict[str, list] = {}
    for r in rows:
        for k, v in r.items():
            if k != "round" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                want.setdefault(k, []).append((r["round"], v))
    return rows, want


@pytest.mark.experiment
def test_event_files_hold_the_rounds_scalars(tmp_path):
    res = otafl_sdr.run(SMALL, out=tmp_path / "tb")
    rows, want = expected(res.out)
    assert [r["round"] for r in rows] == [1, 2, 3, 4]             # 2 client rounds = 4 Upcycled-FL iterations
    got = scalars(res.out)
    assert set(got) == set(want)
    assert {"test_accuracy", "eps_pld", "sigma_eff", "client_round", "aggregate_nmse"} <= set(got)
    for tag, pts in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in pts], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in pts], rel=1e-6, abs=1e-30), tag
    assert got["test_accuracy"][-1][1] == pytest.approx(res.summary["final_accuracy"], rel=1e-6)


@pytest.mark.experiment
def test_an_extension_appends_its_rounds(tmp_path, capsys):
    out = tmp_path / "tb"
    otafl_sdr.run({**SMALL, "privacy.enforce": False}, out=out)      # the extension goes past the eps target
    assert main(["run", "--resume", str(out), "--extend", "1", "--quiet"]) == 0
    rows, want = expected(out)
    assert len(rows) == 6
    got = scalars(out)
    assert [s for s, _ in got["test_accuracy"]] == [1, 2, 3, 4, 5, 6]
    assert [v for _, v in got["test_accuracy"]] == pytest.approx([v for _, v in want["test_accuracy"]], rel=1e-6)


def test_without_the_package_the_key_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)         # as on a machine where it is not installed
    with pytest.raises(ConfigError, match="run.tensorboard.*'tensorboard' package, which is not installed"):
        otafl_sdr.api.resolve({"run.tensorboard": True})
    capsys.readouterr()
    rc = main(["run", "--out", str(tmp_path / "no"), "--air", "sim", "--set", "run.tensorboard=true", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "run.tensorboard" in err and "Traceback" not in err
    assert not (tmp_path / "no").exists()


@pytest.mark.experiment
def test_a_resume_after_a_crash_shows_each_iteration_once(tmp_path):
    """Interrupted after iteration 4 with the checkpoint at 3: the resume redoes iteration 4, and its event file
    purges the first session's step 4, so TensorBoard shows each iteration once, with the final rows' values."""
    out = tmp_path / "tb"

    def stop_after_4(row):
        if row["round"] == 4:
            raise KeyboardInterrupt

    res = otafl_sdr.run({**SMALL, "run.rounds": 3, "run.checkpoint_every": 3}, out=out, on_round=stop_after_4)
    assert "interrupted" in res.stopped_reason
    assert [s for s, _ in scalars(out)["test_accuracy"]] == [1, 2, 3, 4]
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    rows, want = expected(out)
    assert [r["round"] for r in rows] == [1, 2, 3, 4, 5, 6]
    got = scalars(out)
    for tag in ("test_accuracy", "eps_pld", "client_round"):
        assert [s for s, _ in got[tag]] == [s for s, _ in want[tag]], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in want[tag]], rel=1e-6), tag
