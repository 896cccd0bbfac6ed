"""The paper-004 comparison script at CI size (sim_loopback/lapa_figures.py --size ci): real orchestrator runs.
Figure 4 is run once for the module (one worker: each pool worker is a fresh interpreter) and read by its own
test and by the resumable-sweep test, which runs the same command again on that folder (changing nothing)."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "sim_loopback" / "lapa_figures.py"
NO_RUN_FIGURES = ["--set", "run.figures=false"]      # each run's own figures: nobody reads them (the script's are drawn)


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("lapa_figures", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fig4(figures, tmp_path_factory):
    """(folder, its command line, the summary it returned) of figure 4 at CI size, run once."""
    out = tmp_path_factory.mktemp("lapa-fig4")
    args = ["--out", str(out), "--size", "ci", "--which", "fig4", "--workers", "1", "--quiet", *NO_RUN_FIGURES]
    return out, args, figures.main(args)


def test_fig4_aggregation_strategies_ci(figures, fig4):
    out, _, summary = fig4
    assert (out / "fig4.png").stat().st_size > 10_000
    md = (out / "fig4.md").read_text()
    table = {r["key"]: r for r in summary["fig4"]["table"]}
    assert set(table) == {"B1", "B2", "C1", "C2a", "C2b", "C2c"}
    for key, r in table.items():
        assert 0 <= r["acc_mean"] <= 1 and r["label"] in md
        assert np.isnan(r["eps_lapa_sum"])                  # no DP budgets here
    # same channels, nested SER thresholds: stricter selection keeps fewer devices (eq. 22)
    sel = [table[k]["selected"] for k in ("C1", "C2a", "C2b", "C2c")]
    assert sel[0] == 15 and all(a >= b for a, b in zip(sel, sel[1:])) and sel[-1] < sel[0]
    assert len(summary["fig4"]["checks"]) == len(figures.FIG4_PAPER)
    assert json.loads((out / "summary.json").read_text())["fig4"]["ordering"]


def test_fig7_noise_control_ci(figures, tmp_path):
    summary = figures.main(["--out", str(tmp_path), "--size", "ci", "--which", "fig7", "--workers", "1", "--quiet",
                            *NO_RUN_FIGURES])
    assert (tmp_path / "fig7.png").stat().st_size > 10_000
    table = {r["key"]: r for r in summary["fig7"]["table"]}
    assert set(table) == {"C5", "LAPA", "B4", "B3", "C4"}
    for key in ("C5", "LAPA", "B4", "B3"):                 # DP configs: the paper's sum is the larger figure
        r = table[key]
        assert r["eps_lapa_sum"] > r["eps_rdp"] > 0 and np.isfinite(r["eps_pld"])
    assert np.isnan(table["C4"]["eps_lapa_sum"])          # no DP: no per-device budgets
    init, final = table["C5"]["ddpg_reward"][0]
    assert final >= init
    assert table["C4"]["acc_mean"] >= max(table[k]["acc_mean"] for k in ("LAPA", "B4", "B3")) - 0.05


def test_figures_are_a_resumable_sweep(figures, fig4):
    """Each figure is a sweep (configurations as arms x seeds, DIR/runs/FIG/KEY_sN): the same command again on
    the same folder (the module's figure-4 run) runs nothing and gives the same tables; a run whose folder is
    gone is the only one run, and the same seed gives the same run (so the folder ends as it began)."""
    import shutil

    import pandas as pd
    tmp_path, args, _ = fig4
    first = (tmp_path / "summary.json").read_text()                  # (NaN epsilons: compare the JSON text)
    runs = tmp_path / "runs" / "fig4"
    cells = pd.read_csv(runs / "sweep.csv")
    assert sorted(cells["dir"]) == sorted(f"{k}_s0" for k, *_ in figures.FIG4) and set(cells["status"]) == {"ran"}
    before = {d: (runs / d / "summary.json").read_bytes() for d in cells["dir"]}
    md = (tmp_path / "fig4.md").read_text()
    figures.main(args)
    assert (tmp_path / "summary.json").read_text() == first
    assert set(pd.read_csv(runs / "sweep.csv")["status"]) == {"done (skipped)"}
    assert {d: (runs / d / "summary.json").read_bytes() for d in cells["dir"]} == before
    assert (tmp_path / "fig4.md").read_text() == md
    shutil.rmtree(runs / "C2b_s0")
    figures.main(args)
    assert (tmp_path / "summary.json").read_text() == first          # the same seed gives the same run
    status = dict(pd.read_csv(runs / "sweep.csv")[["dir", "status"]].values)
    assert status.pop("C2b_s0") == "ran" and set(status.values()) == {"done (skipped)"}
