"""The paper-001 comparison script end to end at a tiny size (all eight rows through the orchestrator)."""
import csv
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "sim_loopback"))

import cdpb_compare  # noqa: E402

NO_RUN_FIGURES = ["--set", "run.figures=false"]      # each run's own figures: nobody reads them


@pytest.mark.experiment
def test_compare_tiny(tmp_path, capsys):
    out = tmp_path / "cmp"
    rc = cdpb_compare.main(["--out", str(out), "--max-rounds", "2", "--quiet", "--workers", "1",
                            "--set", "data.clients=8", "--set", "run.torch_threads=1", *NO_RUN_FIGURES])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Orderings of paper 001" in text and "cdpb_idle_oracle" in text
    rows = {r["policy"]: r for r in csv.DictReader((out / "cdpb_compare.csv").read_text().splitlines())}
    assert list(rows) == list(cdpb_compare.DEFAULT_ROWS) and len(rows) == 8
    for r in rows.values():
        assert int(r["rounds"]) == min(2, int(r["tau_design"]))
        for k in ("accuracy", "rdp_eps", "eps_cdpb", "eps_rdp", "rdp_eps_paper_literal"):
            assert math.isfinite(float(r[k])) and float(r[k]) >= 0, (r["policy"], k)
        # Theorem 1 is looser than dp-accounting's exact Poisson-subsampled Gaussian for the same records
        assert float(r["eps_cdpb"]) >= float(r["eps_rdp"])
    # same rho and participation, no artificial noise: noise_free leaks more than cdpb_idle
    assert float(rows["noise_free"]["rho"]) == pytest.approx(float(rows["cdpb_idle"]["rho"]))
    assert float(rows["noise_free"]["eps_cdpb"]) > float(rows["cdpb_idle"]["eps_cdpb"])
    assert float(rows["h_min"]["p"]) == 1.0 and float(rows["cdpb_idle"]["p"]) < 1.0
    assert (out / "cdpb_compare.md").read_text().count("\n|") >= 9
    # every run wrote the orchestrator's results contract
    assert (out / "cdpb_noisy-seed0" / "summary.json").is_file()


def test_compare_rejects_unknown_rows(tmp_path, capsys):
    assert cdpb_compare.main(["--out", str(tmp_path / "x"), "--policies", "cdpb_idle,nope"]) == 2
    assert "unknown row 'nope'" in capsys.readouterr().err


@pytest.mark.experiment
def test_compare_is_a_resumable_sweep(tmp_path, capsys):
    """The rows are sweep arms (policy, design options and the design's rounds as the arm's overrides): the same
    command again on the same folder runs nothing and writes the same table; a folder holding something else
    is refused."""
    import pandas as pd
    out = tmp_path / "cmp"
    args = ["--out", str(out), "--max-rounds", "2", "--quiet", "--workers", "1", "--policies", "cdpb_idle,noise_free",
            "--set", "data.clients=8", *NO_RUN_FIGURES]
    assert cdpb_compare.main(args) == 0
    cells = pd.read_csv(out / "sweep.csv")
    assert sorted(cells["dir"]) == ["cdpb_idle-seed0", "noise_free-seed0"] and set(cells["status"]) == {"ran"}
    assert (cells["rounds"] == 2).all()                      # run.rounds = min(tau, --max-rounds) per arm
    table = (out / "cdpb_compare.csv").read_text()
    before = {d: (out / d / "summary.json").read_bytes() for d in cells["dir"]}
    assert cdpb_compare.main(args) == 0
    assert set(pd.read_csv(out / "sweep.csv")["status"]) == {"done (skipped)"}
    assert {d: (out / d / "summary.json").read_bytes() for d in cells["dir"]} == before
    assert (out / "cdpb_compare.csv").read_text() == table
    capsys.readouterr()                                      # another --max-rounds: other runs under the same names
    assert cdpb_compare.main([("3" if a == "2" else a) for a in args]) == 2
    assert "holds runs made with other settings" in capsys.readouterr().err
    assert {d: (out / d / "summary.json").read_bytes() for d in cells["dir"]} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    capsys.readouterr()
    assert cdpb_compare.main(["--out", str(other), "--quiet"]) == 2
    assert "holds no earlier comparison" in capsys.readouterr().err
