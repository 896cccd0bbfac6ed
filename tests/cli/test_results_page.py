"""`otafl-sdr compare SPEC --page PAGE.md`: a results page generated from a tiny compare folder and nothing
else: its claims, verdicts and mechanisms are compare's own (claims.csv / compare.csv), its figures are copied
beside it, the cost is the run folders' own times (as the cells' compact data beside the page recorded them), a
degenerate arm is said so, and regenerating it with --report-only gives the same page."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.sweeps.page import BUDGET_S, checks, title_and_intro

SPEC = """# Paper 999, Fig. 1: power control against h_min at one target (a test; the comment is the page's intro).
#   .venv/bin/otafl-sdr compare spec.toml --workers 2
[sweep]
name = "tiny"
seeds = [1, 2]
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

[arms.hmin_again]
label = "h_min again"
set = ["power.policy=h_min", "run.progress=false"]      # the same arm: degenerate

[[claims]]
source = "test claim"
more = "pc"
less = "hmin"
"""


@pytest.mark.experiment
def test_page_is_generated_from_the_compare_folder_and_regenerates_identically(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('name = "tiny"', f'name = "tiny"\nout = "{tmp_path / "out"}"'))
    page = tmp_path / "docs" / "results" / "tiny.md"
    assert main(["compare", str(spec), "--workers", "1", "--quiet", "--page", str(page)]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    text = page.read_text()
    # the intro and title come from the spec's comment; the commands that make and regenerate the page are on it
    assert text.startswith("# Paper 999, Fig. 1: tiny\n")
    assert "power control against h_min at one target" in text and "--workers 1" not in text   # engine flags: not echoed
    assert f"compare {spec} --report-only --page docs/results/tiny.md" in text
    assert f"compare {spec} --workers 2 --page docs/results/tiny.md" in text
    # every claim's verdict and numbers are compare's (claims.csv), listed under its verdict
    claims = pd.read_csv(out / "claims.csv")
    assert len(claims) == 1
    for _, c in claims.iterrows():
        assert f"| **{c['verdict']}** | test claim | {c['claim']} at {c['at']} |" in text
        assert f"[{c['verdict']}]" in text.split("## Claims")[0]
    # the mechanisms' accuracies are compare.csv's, all in [0, 1], and the checks say so
    table = pd.read_csv(out / "compare.csv")
    for _, r in table.iterrows():
        assert f"| {r['label']} | {r['privacy.eps']:g} | 2/2 | {r['accuracy']:.3g} +- " in text
        assert 0 <= r["accuracy"] <= 1
    assert f"- accuracies in [0, 1]: yes ({2 * len(table)} means)" in text
    # h_min and "h_min again" (the same settings) gave the same figures on every seed: flagged degenerate
    runs = pd.read_csv(out / "sweep.csv")
    for eps in (50.0,):
        acc = {m: runs[(runs["mechanism"] == m) & (runs["privacy.eps"] == eps)].sort_values("seed")["final_accuracy"]
               .tolist() for m in ("hmin", "hmin_again")}
        assert acc["hmin"] == acc["hmin_again"]
    assert "- degenerate arms (identical on every seed): DEGENERATE: arms 'h_min' and 'h_min again'" in text
    # the cost is the run folders' own: summed wall_s, and the first start to the last end
    wall = sum(json.loads((out / d / "summary.json").read_text())["wall_s"] for d in runs["dir"])
    starts = [(out / d / "config.toml").stat().st_mtime for d in runs["dir"]]
    ends = [(out / d / "summary.json").stat().st_mtime for d in runs["dir"]]
    elapsed = max(ends) - min(starts)
    assert f"wall times sum to {wall:.0f} s; elapsed {elapsed:.0f} s" in text
    assert f"about {BUDGET_S / elapsed:.1f}x this work" in text
    assert "cells: 6 of 6 finished; 2 client rounds per run" in text
    # the figures' PNGs are copied beside the page and linked relative to it
    for name in ("accuracy_last_k", "accuracy_rounds", "final_accuracy"):
        png = page.parent / "tiny" / f"{name}.png"
        assert png.read_bytes() == (out / f"{name}.png").read_bytes()
        assert f"](tiny/{name}.png)" in text
    # regenerated from its cells' compact data, over the page it wrote (its marker line): the same page
    assert main(["compare", str(spec), "--report-only", "--page", "docs/results/tiny.md"]) == 0
    assert page.read_text() == text


def test_a_page_that_is_not_markdown_is_refused_before_anything_runs(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('name = "tiny"', f'name = "tiny"\nout = "{tmp_path / "out"}"'))
    assert main(["compare", str(spec), "--quiet", "--page", str(tmp_path / "page.html")]) == 2
    err = capsys.readouterr().err
    assert "markdown" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_checks_flag_accuracies_outside_0_1_and_runs_over_target():
    summary = pd.DataFrame([
        {"label": "a", "reference": False, "accuracy": 1.2, "final_accuracy": 0.5, "over_target": 2, "seeds": 3,
         "calibration": "paper rule", "failed": "", "privacy.eps": 1.0},
        {"label": "ref", "reference": True, "accuracy": 0.9, "final_accuracy": math.nan, "over_target": math.nan,
         "seeds": 3, "calibration": None, "failed": "", "privacy.eps": 1.0}])
    lines = checks(summary, "", "", ["privacy.eps"])
    assert lines[0] == "- accuracies in [0, 1]: NO: 1.2 (3 means)"
    assert "ref" in lines[2] and "a at privacy.eps=1 (2/3, knob: paper rule)" in lines[3]


def test_title_and_intro_from_the_spec_comment():
    title, intro = title_and_intro("Paper 001, Fig. 4: CDPB against h_min.\nSecond line.\n"
                                   "  .venv/bin/otafl-sdr compare x.toml", "cdpb")
    assert title == "Paper 001, Fig. 4: cdpb"
    assert intro == "Paper 001, Fig. 4: CDPB against h_min. Second line."


@pytest.mark.parametrize("spec,cells", [("paper002_fdp", 90), ("paper001_cdpb_page", 300)])
def test_the_page_specs_validate_every_cell(spec, cells, tmp_path, capsys):
    assert main(["sweep", f"sim_loopback/compare/{spec}.toml", "--dry-run", "--out", str(tmp_path / "s")]) == 0
    assert f"{cells} cells" in capsys.readouterr().out


def _page_refused(tmp_path, capsys, page, words):
    """`compare --report-only --page PAGE` refused in one line (exit 2) before anything is read or written."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('name = "tiny"', f'name = "tiny"\nout = "{tmp_path / "out"}"'))
    before = Path(page).read_bytes() if Path(page).is_file() else None
    assert main(["compare", str(spec), "--report-only", "--page", str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert (Path(page).read_bytes() if Path(page).is_file() else None) == before


@pytest.mark.parametrize("name", ["README.md", "readme.md", "docs/README.md"])
def test_a_page_never_replaces_a_readme(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# the project\n")
    _page_refused(tmp_path, capsys, name, "never replaces a README")
    assert (tmp_path / "README.md").read_text() == "# the project\n"


def test_a_page_is_never_written_inside_the_package_or_the_environment(tmp_path, capsys):
    import sys

    import otafl_sdr
    package = Path(otafl_sdr.__file__).resolve().parent
    _page_refused(tmp_path, capsys, package / "x.md", "inside the package")
    _page_refused(tmp_path, capsys, package / "sweeps" / "page.md", "inside the package")
    _page_refused(tmp_path, capsys, Path(sys.prefix) / "x.md", "inside the Python environment")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    _page_refused(tmp_path, capsys, tmp_path / "venv" / "lib" / "x.md", "inside a virtual environment")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    _page_refused(tmp_path, capsys, tmp_path / "pkg" / "x.md", "inside a Python package")
    assert not (package / "x.md").exists() and not (package / "x").exists()


def test_a_page_overwrites_only_what_it_generated(tmp_path, capsys):
    from otafl_sdr.sweeps.page import check_page
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "architecture.md").write_text("# hand-written\n")
    _page_refused(tmp_path, capsys, docs / "architecture.md", "was not written by `compare --page`")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "compare.md").write_text("| the compare report |\n")
    _page_refused(tmp_path, capsys, tmp_path / "out" / "compare.md", "was not written by `compare --page`")
                                                             # a new page whose figures' folder is docs/
    _page_refused(tmp_path, capsys, tmp_path / "docs.md", "holds other files (architecture.md)")
    (tmp_path / "link.md").symlink_to(docs / "architecture.md")
    _page_refused(tmp_path, capsys, tmp_path / "link.md", "not a plain file")
    marked = tmp_path / "marked.md"
    marked.write_text("# t\n\n<!-- generated by `.venv/bin/otafl-sdr compare s.toml --report-only --page marked.md` "
                      "from out; do not edit by hand -->\n")
    assert check_page(marked) == marked and check_page(tmp_path / "new.md") == tmp_path / "new.md"
