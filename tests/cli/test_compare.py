"""`otafl-sdr compare`: mechanisms (arms) x grid x seeds at equal (eps, delta); the table is the run folders'
figures, the claims' verdicts are Welch's interval of the difference, the shipped specs validate."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from otafl_sdr.cli import main
from otafl_sdr.sweep import load_spec

SPEC = """
[sweep]
name = "c"
seeds = [1, 2]
set = ["run.rounds=2", "data.dataset=digits", "data.clients=4", "model.name=logreg", "train.local_epochs=1",
       "air.name=sim", "privacy.unit=client", "power.jammer=false", "run.torch_threads=1", "train.tau=0.5"]

[grid]
"privacy.eps,privacy.delta" = [[50.0, 1e-5], [200.0, 1e-3]]

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

[[claims]]
source = "test, one arm at two points"
arm = "pc"
more_at = { "privacy.eps" = 200.0 }
less_at = { "privacy.eps" = 50.0 }
"""


def _write(tmp_path: Path, text: str = SPEC) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text.replace('name = "c"', f'name = "c"\nout = "{tmp_path / "out"}"'))
    return p


def test_compare_table_and_claims_follow_from_the_run_folders(tmp_path, capsys):
    spec = _write(tmp_path)
    assert len(load_spec(spec).cells()) == 8
    assert main(["compare", str(spec), "--workers", "2", "--quiet"]) == 0
    out = tmp_path / "out"
    runs = pd.read_csv(out / "sweep.csv")
    assert set(runs["mechanism"]) == {"pc", "hmin"} and len(runs) == 8
    summaries = {d: json.loads((out / d / "summary.json").read_text()) for d in runs["dir"]}
    for d, s in summaries.items():      # the grid's paired keys reached each run's config
        r = runs[runs["dir"] == d].iloc[0]
        assert s["eps_target"] == r["privacy.eps"] and s["delta"] == r["privacy.delta"]
        assert (r["privacy.eps"], r["privacy.delta"]) in ((50.0, 1e-5), (200.0, 1e-3))
        assert s["eps_pld"] <= s["eps_target"] * (1 + 1e-9)
    table = pd.read_csv(out / "compare.csv")
    assert len(table) == 4
    for _, row in table.iterrows():
        dirs = runs[(runs["mechanism"] == row["mechanism"]) & (runs["privacy.eps"] == row["privacy.eps"])]["dir"]
        acc = np.array([summaries[d]["final_accuracy"] for d in dirs])
        eps = np.array([summaries[d]["eps_pld"] for d in dirs])
        assert row["seeds"] == 2 and row["accuracy"] == pytest.approx(acc.mean(), rel=1e-12)
        half = stats.t.ppf(0.975, 1) * acc.std(ddof=1) / math.sqrt(2)
        assert row["accuracy_ci95"] == pytest.approx(half, rel=1e-9, abs=1e-12)
        assert row["eps_pld_max"] == pytest.approx(eps.max(), rel=1e-12)
        assert row["eps_pld_max"] <= row["eps_target"] and row["over_target"] == 0
    claims = (out / "claims.md").read_text().splitlines()
    assert len([c for c in claims if c.startswith("- [")]) == 3      # 2 grid points + 1 two-point claim
    # the verdict is Welch's 95 % interval of the difference of the two arms' means
    for eps in (50.0, 200.0):
        a = np.array([summaries[d]["final_accuracy"] for d in runs[(runs["mechanism"] == "pc") & (runs["privacy.eps"] == eps)]["dir"]])
        b = np.array([summaries[d]["final_accuracy"] for d in runs[(runs["mechanism"] == "hmin") & (runs["privacy.eps"] == eps)]["dir"]])
        p = stats.ttest_ind(a, b, equal_var=False).pvalue      # Welch: the interval excludes 0 iff p < 0.05
        diff = a.mean() - b.mean()
        want = "tie within the seeds' spread" if not p < 0.05 else "held" if diff > 0 else "reversed"
        line = next(c for c in claims if "pc > hmin" in c and f"privacy.eps={eps}" in c)
        assert line.startswith(f"- [{want}]"), (line, p)
    assert (out / "accuracy_vs_eps.png").stat().st_size > 0 and (out / "accuracy_rounds.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "power control" in printed and "claims" in printed
    # the report can be redrawn without running anything; other fixed settings are refused for this folder
    assert main(["compare", str(spec), "--report-only"]) == 0
    capsys.readouterr()
    assert main(["compare", str(spec), "--set", "run.rounds=3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "other fixed settings" in err and len(err.strip().splitlines()) == 1
    # an arm edited under the same name: its done cells are stale, not skipped as if they were the new arm
    spec.write_text(spec.read_text().replace('set = ["power.policy=h_min"]', 'set = ["power.policy=h_min", "train.lr=0.2"]'))
    assert main(["compare", str(spec), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "another configuration" in err and "arm=hmin" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.replace('more = "pc"', 'more = "nope"'), "is not an arm"),
    (lambda s: s.split("[arms.pc]")[0], "no [arms.NAME]"),
    (lambda s: s.replace('"privacy.eps,privacy.delta" = [[50.0, 1e-5], [200.0, 1e-3]]',
                         '"privacy.eps,privacy.delta" = [[50.0], [200.0, 1e-3]]'), "move together"),
    (lambda s: s.replace('more_at = { "privacy.eps" = 200.0 }', 'more_at = { "train.lr" = 1.0 }'), "grid keys"),
])
def test_bad_compare_specs_are_one_line_errors(tmp_path, capsys, edit, message):
    spec = _write(tmp_path, edit(SPEC))
    assert main(["compare", str(spec), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec,cells", [("cross_paper", 100), ("paper000_no_jammer", 40), ("paper000_jammer", 45),
                                        ("paper001_cdpb", 54), ("paper004_fig7", 25), ("paper003_otafd", 18)])
def test_shipped_comparisons_validate_every_cell(spec, cells, tmp_path, capsys):
    path = f"sim_loopback/compare/{spec}.toml"
    assert main(["sweep", path, "--dry-run", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert f"{cells} cells" in out
    s = load_spec(path)
    assert s.arms and s.claims


def test_verdicts_held_reversed_tie_and_one_seed(tmp_path):
    from otafl_sdr.compare import judge
    spec = load_spec(_write(tmp_path))
    rows = []
    for eps, delta, acc_pc, acc_h in ((50.0, 1e-5, [0.80, 0.82, 0.81], [0.60, 0.61, 0.62]),
                                      (200.0, 1e-3, [0.50, 0.52, 0.51], [0.70, 0.69, 0.71])):
        for m, accs in (("pc", acc_pc), ("hmin", acc_h)):
            rows += [{"mechanism": m, "privacy.eps": eps, "privacy.delta": delta, "final_accuracy": a} for a in accs]
    got = {(c["claim"], tuple(c["at"].values())): c["verdict"] for c in judge(spec, pd.DataFrame(rows))}
    assert got[("pc > hmin in final_accuracy", (50.0, 1e-5))] == "held"
    assert got[("pc > hmin in final_accuracy", (200.0, 1e-3))] == "reversed"
    assert got[("pc at privacy.eps=200.0 > at privacy.eps=50.0 in final_accuracy", ())] == "reversed"
    noisy = pd.DataFrame(rows).assign(final_accuracy=lambda t: t["final_accuracy"] + np.tile([0.0, 0.5, -0.5], 4))
    assert all(c["verdict"] == "tie within the seeds' spread" for c in judge(spec, noisy))
    one = pd.DataFrame(rows).groupby(["mechanism", "privacy.eps"], as_index=False).first()
    assert all(c["verdict"].endswith("(one seed: no spread)") for c in judge(spec, one))
