"""A results page's compact cell data (sweeps/page_data.py, sweeps/cell_data.py): `compare SPEC --page` exports
each finished cell beside the page; with the run folder gone `--report-only --page` regenerates the page byte
for byte (markdown and PNGs) from that data alone; a cell removed from the data is the only one a run re-runs;
a tampered cell is refused in one line, and what a forger without the ledger key can and cannot change."""
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.errors import UserError
from otafl_sdr.sweeps.cell_data import MANIFEST, canonical
from otafl_sdr.sweeps.page_data import cells_folder

pytestmark = [pytest.mark.experiment, pytest.mark.xdist_group("page_cell_data")]

SPEC = """# Paper 999, Fig. 1: power control against h_min, a page made from its compact cell data (a test).
[sweep]
name = "cells"
seeds = [1]
out = "{out}"
set = ["run.rounds=2", "data.dataset=digits", "data.clients=4", "model.name=logreg", "train.local_epochs=1",
       "air.name=sim", "privacy.unit=client", "power.jammer=false", "run.torch_threads=1", "train.tau=0.5"]

[grid]
"privacy.eps" = [50.0]

[arms.pc]
label = "power control"
set = ["power.policy=cj_adaptive"]

[arms.hmin]
label = "h_min"
set = ["power.policy=h_min"]

[[claims]]
source = "test claim"
more = "pc"
less = "hmin"
"""
PC, HMIN = "arm=pc,privacy.eps=50.0,seed=1", "arm=hmin,privacy.eps=50.0,seed=1"
PNGS = ("accuracy_last_k", "accuracy_rounds", "final_accuracy")
COST_LINES = ("- cost on the machine", "- At the measured elapsed time")


def _write_spec(folder: Path) -> Path:
    spec = folder / "spec.toml"
    spec.write_text(SPEC.format(out=folder / "out"))
    return spec


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """One run of the tiny spec with --page (two cells), shared by the module: (folder, spec, page, page text,
    the PNGs' bytes)."""
    folder = tmp_path_factory.mktemp("campaign")
    spec, page = _write_spec(folder), folder / "docs" / "results" / "cells.md"
    assert main(["compare", str(spec), "--workers", "1", "--quiet", "--page", str(page)]) == 0
    return folder, spec, page, page.read_text(), {n: (page.parent / "cells" / f"{n}.png").read_bytes() for n in PNGS}


def _files(cell: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(cell.iterdir())}


def test_the_page_is_regenerated_byte_for_byte_from_its_data_and_a_run_reruns_only_missing_cells(campaign, capsys):
    folder, spec, page, text, pngs = campaign
    root = cells_folder(page)
    assert sorted(p.name for p in root.iterdir()) == sorted([PC, HMIN])
    for cell in (PC, HMIN):               # compact: no checkpoint, model or figure; small; the ledger sealed
        names = set(_files(root / cell))
        assert names == {"cell.json", "config.toml", "summary.json", "rounds.jsonl", "privacy_ledger.jsonl",
                         "ledger.id"}, names
        assert sum(len(b) for b in _files(root / cell).values()) < 16_000
        manifest = json.loads((root / cell / MANIFEST).read_text())
        assert len(manifest["seal"]) == 64 and manifest["ledger_entries"] >= 2
        assert isinstance(manifest["load_5min"], float) and manifest["load_5min"] >= 0     # exported as it finished
    assert f"` from {os.path.relpath(root)}; do not edit by hand -->" in text
    assert "5-minute load " in text and " at the ends of the cells)" in text       # how busy the machine was
    # the run folder gone: --report-only --page makes the same page and the same PNGs from the data alone
    shutil.rmtree(folder / "out")
    capsys.readouterr()
    assert main(["compare", str(spec), "--report-only", "--page", str(page)]) == 0
    out = capsys.readouterr().out
    assert "2 cells checked (all sealed under their ledger keys)" in out
    assert page.read_text() == text
    for n in PNGS:
        assert (page.parent / "cells" / f"{n}.png").read_bytes() == pngs[n], n
    # one cell's data removed: a run re-runs that cell only, says so, and the page's results are the same
    kept = _files(root / HMIN)
    shutil.rmtree(root / PC)
    shutil.rmtree(folder / "out")
    assert main(["compare", str(spec), "--workers", "1", "--quiet", "--page", str(page)]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 cells already in the page's data" in out and "skipped; 1 to run" in out
    assert [p.name for p in (folder / "out").iterdir() if p.is_dir()] == [PC]     # only that cell ran
    assert _files(root / HMIN) == kept and (root / PC / MANIFEST).is_file()
    again = page.read_text()
    same = [ln for ln in text.splitlines() if not ln.startswith(COST_LINES)]
    assert [ln for ln in again.splitlines() if not ln.startswith(COST_LINES)] == same      # only the new cell's
    for n in PNGS:                                                                    # wall time differs
        assert (page.parent / "cells" / f"{n}.png").read_bytes() == pngs[n], n
    # and regenerated from the data again: byte for byte the page that run wrote
    assert main(["compare", str(spec), "--report-only", "--page", str(page)]) == 0
    assert page.read_text() == again


def _copy(campaign, tmp_path) -> tuple[Path, Path, Path]:
    """The campaign's page and compact data copied into ``tmp_path`` (no run folder): (spec, page, cell PC)."""
    src = campaign[2]
    page = tmp_path / "docs" / "results" / "cells.md"
    shutil.copytree(src.parent, page.parent)
    return _write_spec(tmp_path), page, cells_folder(page) / PC


def _forge(cell: Path, name: str, edit) -> None:
    """Change ``name`` in the cell and rewrite the manifest's digest and size to match (what anyone can do; the
    seal is not rewritten, it needs the run's ledger key)."""
    path = cell / name
    path.write_bytes(edit(path.read_bytes()))
    manifest = json.loads((cell / MANIFEST).read_text())
    data = path.read_bytes()
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (cell / MANIFEST).write_bytes(canonical(manifest))


def _accuracy_up(data: bytes) -> bytes:
    rows = [json.loads(ln) for ln in data.decode().splitlines()]
    rows[-1]["test_accuracy"] = 0.99
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _sigma_down(data: bytes) -> bytes:
    lines = [json.loads(ln) for ln in data.decode().splitlines()]
    lines[0]["sigma_eff"] = lines[0]["sigma_eff"] / 2                    # its hash and the next line's link kept
    return "".join(json.dumps(r) + "\n" for r in lines).encode()


TAMPERS = {
    "a row edited": (lambda c: (c / "rounds.jsonl").write_bytes(_accuracy_up((c / "rounds.jsonl").read_bytes())),
                     "rounds.jsonl is not the file its manifest lists (edited)"),
    "a row edited, its digest rewritten": (lambda c: _forge(c, "rounds.jsonl", _accuracy_up),
                                           "its seal does not match under the run's ledger key"),
    "a file added": (lambda c: (c / "checkpoint.pt").write_bytes(b"x"), "files added: checkpoint.pt"),
    "the ledger removed": (lambda c: (c / "privacy_ledger.jsonl").unlink(), "files removed: privacy_ledger.jsonl"),
    "another cell's data": (lambda c: (c / MANIFEST).write_bytes((c.parent / HMIN / MANIFEST).read_bytes()),
                            "is not this cell's manifest"),
}


@pytest.mark.parametrize("what", list(TAMPERS))
def test_a_tampered_cell_is_refused_in_one_line(campaign, tmp_path, capsys, what):
    spec, page, cell = _copy(campaign, tmp_path)
    edit, words = TAMPERS[what]
    edit(cell)
    before = page.read_bytes()
    assert main(["compare", str(spec), "--report-only", "--page", str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and PC in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert page.read_bytes() == before
    assert main(["compare", str(spec), "--workers", "1", "--quiet", "--page", str(page)]) == 2   # nor run over
    assert not (tmp_path / "out" / PC).exists()


NO_KEY = {   # on another machine (the ledger keys are not there): what consistency still catches
    "the last row's accuracy raised, its digest rewritten": (lambda c: _forge(c, "rounds.jsonl", _accuracy_up),
                                                              "is not its last evaluated row's"),
    "a ledger line's noise halved, its digest rewritten": (lambda c: _forge(c, "privacy_ledger.jsonl", _sigma_down),
                                                           "recomputes to"),
    "the config's eps raised, its digest rewritten": (
        lambda c: _forge(c, "config.toml", lambda b: b.replace(b"eps = 50.0", b"eps = 60.0", 1)),
        "its config is not the one the spec gives this cell"),
}


@pytest.mark.parametrize("what", list(NO_KEY))
def test_without_the_ledger_key_inconsistent_data_is_still_refused(campaign, tmp_path, capsys, monkeypatch, what):
    spec, page, cell = _copy(campaign, tmp_path)
    monkeypatch.setenv("OTAFL_LEDGER_KEYS", str(tmp_path / "another machine's keys"))
    edit, words = NO_KEY[what]
    edit(cell)
    assert main(["compare", str(spec), "--report-only", "--page", str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_without_the_ledger_key_a_consistent_forgery_is_read_and_said_unauthenticated(campaign, tmp_path, capsys,
                                                                                       monkeypatch):
    """The documented limit (cell_data's docstring): without the key, rows and summary rewritten together with
    their digests are consistent data; the command says the seals were not checked (authenticity needs the key
    or a re-run)."""
    spec, page, cell = _copy(campaign, tmp_path)
    monkeypatch.setenv("OTAFL_LEDGER_KEYS", str(tmp_path / "another machine's keys"))
    _forge(cell, "rounds.jsonl", _accuracy_up)
    _forge(cell, "summary.json", lambda b: json.dumps({**json.loads(b), "final_accuracy": 0.99}).encode())
    assert main(["compare", str(spec), "--report-only", "--page", str(page)]) == 0
    assert "0 checked under their ledger keys, 2 without" in capsys.readouterr().out


def test_large_rows_are_stored_gzipped_the_same_bytes_every_time(campaign, tmp_path, monkeypatch):
    from otafl_sdr.sweeps import cell_data
    from otafl_sdr.sweeps.cell_data import check_cell, export_cell
    monkeypatch.setattr(cell_data, "COMPRESS_ABOVE", 100)
    run = tmp_path / "run"
    shutil.copytree(cells_folder(campaign[2]) / HMIN, run)          # a finished run's files, its key on this machine
    (run / MANIFEST).unlink()
    first, second = (export_cell(run, tmp_path / d, HMIN) for d in ("a", "b"))
    assert "rounds.jsonl.gz" in first["files"] and "rounds.jsonl" not in first["files"]
    assert first["files"]["rounds.jsonl.gz"] == second["files"]["rounds.jsonl.gz"]     # gzip without a time stamp
    cell = check_cell(tmp_path / "a" / HMIN, (run / "config.toml").read_text())
    assert cell.rows_text == (run / "rounds.jsonl").read_text() and cell.sealed
    with pytest.raises(UserError, match="never replaced"):
        export_cell(run, tmp_path / "a", HMIN)


def test_the_load_phrase_says_what_was_recorded():
    from otafl_sdr.sweeps.page import load_phrase
    assert load_phrase([2.04, 1.96, 2.5]) == "5-minute load 2.0 (max 2.5) at the ends of the cells"
    assert load_phrase([None, 3.0]) == "5-minute load 3.0 (max 3.0) at the ends of 1 of 2 cells"
    assert load_phrase([None, None]) == load_phrase([]) == "load not recorded"

