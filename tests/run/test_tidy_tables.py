"""The notebook API's frames (issue 36, item 5): ``load(run).table`` is the run's one row; a sweep folder whose
cells disagree on which summary figures are empty loads without pandas' FutureWarning (the README's snippet
runs under ``-W error::FutureWarning``). Folders are written by hand: nothing is run."""
import json
import warnings

import pandas as pd

import otafl_sdr


def _cell(folder, summary: dict, rows: list):
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text("")
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_run_folder_has_its_table(tmp_path):
    _cell(tmp_path / "r", {"final_accuracy": 0.5, "eps_pld": 0.9, "rounds": 2}, [{"round": 1, "test_accuracy": 0.5}])
    table = otafl_sdr.load(tmp_path / "r").table
    assert isinstance(table, pd.DataFrame) and len(table) == 1
    assert table["final_accuracy"].iloc[0] == 0.5 and table["dir"].iloc[0] == str(tmp_path / "r")


def test_cells_with_an_empty_figure_in_one_load_without_future_warnings(tmp_path):
    out = tmp_path / "sweep"
    _cell(out / "a", {"final_accuracy": 0.5, "eps_paper": None, "note": None},
          [{"round": 1, "test_accuracy": None, "eps_paper": None}])
    _cell(out / "b", {"final_accuracy": 0.6, "eps_paper": 1.25, "note": "x"},
          [{"round": 1, "test_accuracy": 0.4, "eps_paper": 1.25}])
    (out / "sweep.toml").write_text("")
    pd.DataFrame({"seed": [1, 2], "arm": ["base", "base"], "dir": ["a", "b"], "status": ["ran", "ran"],
                  "final_accuracy": [0.5, 0.6]}).to_csv(out / "sweep.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        loaded = otafl_sdr.load(out)
    s = loaded.summary.set_index("dir")
    assert pd.isna(s.loc["a", "eps_paper"]) and s.loc["b", "eps_paper"] == 1.25 and s.loc["b", "note"] == "x"
    assert loaded.summary["eps_paper"].dtype == float
    r = loaded.rounds.set_index("dir")
    assert pd.isna(r.loc["a", "test_accuracy"]) and r.loc["b", "test_accuracy"] == 0.4
