"""Each command answers its own question (issue 36, item 2): `report` on a compare / sweep folder prints the
comparison and redraws the folder's figures once, writing nothing into the cells; `sweep` and `compare` end
with a table of cells (done / failed / over target) and the folder; the progress bar names its command and
a folder with nothing to run draws none; a finished folder is read from disk by the API without re-checking
any cell. The folders are written by hand (summary.json, rounds.jsonl per cell): nothing is trained."""
import json
from pathlib import Path

import pandas as pd
import pytest

import otafl_sdr
import otafl_sdr.api
from otafl_sdr.cli.main import main
from otafl_sdr.sweeps.sweep import _write_spec, load_spec, sweep_table

COMPARE = """
[sweep]
name = "c"
seeds = [1, 2]
set = ["run.rounds=2", "data.dataset=digits", "data.clients=4", "model.name=logreg", "air.name=sim"]

[grid]
"privacy.eps" = [50.0]

[arms.pc]
label = "power control"
set = ["power.policy=cj_adaptive"]

[arms.hmin]
label = "h_min"
set = ["power.policy=h_min"]

[[claims]]
source = "test"
more = "pc"
less = "hmin"
"""

SWEEP = """
[sweep]
name = "s"
seeds = [1, 2]
set = ["run.rounds=2", "data.dataset=digits", "data.clients=4", "model.name=logreg", "air.name=sim"]

[grid]
"train.lr" = [0.05, 0.1]
"""


def _finished_folder(tmp_path: Path, text: str, over: bool = False):
    """A spec and its folder as a finished run of it leaves them: sweep.toml, sweep.csv, each cell's files."""
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(text.replace("[sweep]\n", f'[sweep]\nout = "{tmp_path / "out"}"\n', 1))
    spec = load_spec(spec_path)
    spec.out.mkdir()
    rows = {}
    for i, c in enumerate(spec.cells()):
        c.out.mkdir()
        (c.out / "config.toml").write_text("")
        acc = [0.2 + 0.1 * i, 0.3 + 0.1 * i]
        summary = {"final_accuracy": acc[-1], "final_loss": 1.0, "eps_pld": 49.5, "eps_target": 50.0, "rounds": 2,
                   "client_rounds": 2, "jammer_rounds": 0, "capped_jammer_rounds": 0, "over_target": over and i == 0,
                   "calibration": "target (pld)"}
        (c.out / "summary.json").write_text(json.dumps(summary))
        (c.out / "rounds.jsonl").write_text("".join(json.dumps({"round": r + 1, "client_round": r + 1,
                                                                 "test_accuracy": a}) + "\n"
                                                     for r, a in enumerate(acc)))
        rows[c.label] = {**summary, "status": "ran"}
    _write_spec(spec)
    sweep_table(spec, spec.cells(), rows).to_csv(spec.out / "sweep.csv", index=False)
    return spec_path, spec


def _files(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_report_on_a_compare_folder_prints_the_comparison_and_writes_nothing_into_the_cells(tmp_path, capsys):
    _, spec = _finished_folder(tmp_path, COMPARE, over=True)
    cells = {c.out: _files(c.out) for c in spec.cells()}
    assert main(["report", str(spec.out)]) == 0
    out = capsys.readouterr().out
    assert "| power control | 50 | 2/2 |" in out and "| h_min | 50 | 2/2 |" in out       # the mechanisms' table
    assert "pc > hmin in accuracy_last_k" in out                                         # the claim's verdict
    assert out.count("== ") == 0                                                         # not cell by cell
    assert "over target" in out and f"folder: {spec.out}" in out
    pc = next(line for line in out.splitlines() if line.startswith("pc "))
    assert pc.split() == ["pc", "2", "2", "0", "1"]                                       # of, done, failed, over
    assert all(_files(c) == before for c, before in cells.items())                       # the cells untouched
    assert (spec.out / "final_accuracy.png").is_file() and (spec.out / "compare.md").is_file()


def test_report_on_a_sweep_folder_prints_its_table_by_grid_point(tmp_path, capsys):
    _, spec = _finished_folder(tmp_path, SWEEP)
    cells = {c.out: _files(c.out) for c in spec.cells()}
    assert main(["report", str(spec.out)]) == 0
    out = capsys.readouterr().out
    assert "grid point" in out and "train.lr=0.05" in out and "train.lr=0.1" in out and "2/2" in out
    assert ["all", "4", "4", "0", "0"] in [line.split() for line in out.splitlines()]
    assert all(_files(c) == before for c, before in cells.items())
    assert (spec.out / "final_accuracy.png").is_file()


def test_sweep_on_a_finished_folder_ends_with_its_cells_and_draws_no_bar(tmp_path, capsys):
    spec_path, spec = _finished_folder(tmp_path, SWEEP)
    assert main(["sweep", str(spec_path)]) == 0
    captured = capsys.readouterr()
    lines = [line.split() for line in captured.out.splitlines()]
    assert ["cells", "of", "done", "failed", "over", "target"] in lines and ["all", "4", "4", "0", "0"] in lines
    assert f"folder: {spec.out}" in captured.out
    assert "100%" not in captured.err


def test_the_api_reads_a_finished_compare_folder_from_disk(tmp_path, monkeypatch):
    spec_path, spec = _finished_folder(tmp_path, COMPARE)
    (spec.out / "compare.csv").write_text("mechanism\npc\n")

    def no_run(*a, **k):
        raise AssertionError("a finished folder was re-run / re-checked")
    monkeypatch.setattr(otafl_sdr.api, "_entry_point", no_run)
    frame = otafl_sdr.compare(spec_path)
    assert set(frame["mechanism"]) == {"pc", "hmin"} and len(frame[frame["metric"] == "test_accuracy"]) == 8


def test_the_compare_bar_says_compare(tmp_path, capsys, monkeypatch):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(COMPARE.replace("[sweep]\n", f'[sweep]\nout = "{tmp_path / "out"}"\n', 1))

    def fake_engine(run_cell, todo, base, threads, workers, rows, bar, on_done=None):
        for c in todo:
            rows[c.label] = {"status": "failed: not run in this test"}
            bar.update(1)
    monkeypatch.setattr("otafl_sdr.sweeps.engines.run_local", fake_engine)
    assert main(["compare", str(spec_path)]) == 1
    captured = capsys.readouterr()
    assert "compare c [local]" in captured.err and "sweep c" not in captured.err
    assert ["pc", "2", "0", "2", "0"] in [line.split() for line in captured.out.splitlines()]
