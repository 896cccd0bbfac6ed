"""`otafl-sdr compare`: mechanisms (arms) x grid x seeds at equal (eps, delta); the table is the run folders'
figures (the mean of the last evaluations and the final round), the claims' verdicts are scipy's paired t-test
(Welch where the seeds differ) under Holm's control, degenerate arms and one-seed specs are said so, the
figures come as PNG, PDF and SVG, the shipped specs validate."""
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from otafl_sdr.cli.main import main
from otafl_sdr.sweeps.sweep import load_spec

SPEC = """
[sweep]
name = "c"
seeds = [1, 2]
set = ["run.rounds=2", "data.dataset=digits", "data.clients=4", "model.name=logreg", "train.local_epochs=1",
       "air.name=sim", "privacy.unit=client", "power.jammer=false", "run.torch_threads=1", "train.tau=0.5",
       "run.figures=false"]

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


def _last_k(path: Path, k: int = 3) -> float:
    acc = [r["test_accuracy"] for r in map(json.loads, path.read_text().splitlines())
           if r.get("test_accuracy") is not None]
    return float(np.mean(acc[-k:]))


def _holm(p):
    """Holm's adjusted p-values, written out independently of compare_stats."""
    order = np.argsort(p)
    adj = np.empty(len(p))
    prev = 0.0
    for rank, i in enumerate(order):
        prev = max(prev, min(1.0, (len(p) - rank) * p[i]))
        adj[i] = prev
    return adj


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> tuple[Path, str]:
    """SPEC's comparison run once for the module (8 cells, two workers): its folder and what it printed. Each
    test reads or tampers with a copy (cells_of)."""
    import contextlib
    import io
    where = tmp_path_factory.mktemp("compared")
    spec = _write(where)
    assert len(load_spec(spec).cells()) == 8
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["compare", str(spec), "--workers", "2", "--quiet"]) == 0
    return where / "out", printed.getvalue()


SHARES = pytest.mark.xdist_group("compare-spec")    # the tests that read `compared`: one worker, one run of it


def cells_of(compared, tmp_path: Path) -> Path:
    """A copy of the module's compare folder at tmp_path / "out" (where _write points a spec)."""
    shutil.copytree(compared[0], tmp_path / "out", symlinks=True)
    return tmp_path / "out"


@SHARES
@pytest.mark.experiment
def test_compare_table_and_claims_follow_from_the_run_folders(compared, tmp_path, capsys):
    spec = _write(tmp_path)
    out = cells_of(compared, tmp_path)
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
        acc = np.array([_last_k(out / d / "rounds.jsonl") for d in dirs])     # the robust metric: last 3 evals
        fin = np.array([summaries[d]["final_accuracy"] for d in dirs])
        eps = np.array([summaries[d]["eps_pld"] for d in dirs])
        assert row["seeds"] == 2 and row["accuracy"] == pytest.approx(acc.mean(), rel=1e-12)
        assert row["final_accuracy"] == pytest.approx(fin.mean(), rel=1e-12)
        half = stats.t.ppf(0.975, 1) * acc.std(ddof=1) / math.sqrt(2)
        assert row["accuracy_ci95"] == pytest.approx(half, rel=1e-9, abs=1e-12)
        assert row["eps_pld_max"] == pytest.approx(eps.max(), rel=1e-12)
        assert row["eps_pld_max"] <= row["eps_target"] and row["over_target"] == 0
    claims = pd.read_csv(out / "claims.csv")
    assert len(claims) == 3                                       # 2 grid points + 1 two-point claim
    # every verdict recomputed: scipy's paired t-test over the shared seeds, Holm over the three claims
    def arm(m, eps):
        sel = runs[(runs["mechanism"] == m) & (runs["privacy.eps"] == eps)].sort_values("seed")
        return np.array([_last_k(out / d / "rounds.jsonl") for d in sel["dir"]])
    pairs = [(arm("pc", 50.0), arm("hmin", 50.0)), (arm("pc", 200.0), arm("hmin", 200.0)),
             (arm("pc", 200.0), arm("pc", 50.0))]
    p = np.array([stats.ttest_rel(a, b).pvalue for a, b in pairs])
    for (a, b), pj, ph, (_, c) in zip(pairs, p, _holm(p), claims.iterrows()):
        want = "tie" if not ph < 0.05 else "held" if (a - b).mean() > 0 else "reversed"
        assert c["test"] == "paired t" and c["verdict"] == want
        assert c["p"] == pytest.approx(pj, rel=1e-9) and c["p_holm"] == pytest.approx(ph, rel=1e-9)
    md = (out / "claims.md").read_text()
    assert md.count("| **") == 3 and "Holm" in md
    for name in ("accuracy_vs_eps", "accuracy_rounds", "final_accuracy", "accuracy_last_k"):
        for fmt in ("png", "pdf", "svg"):                          # every figure in the three formats
            assert (out / f"{name}.{fmt}").stat().st_size > 1000, (name, fmt)
    assert "power control" in (out / "accuracy_rounds.svg").read_text()     # the arms' labels, not arm=pc
    printed = compared[1]
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
    (lambda s: s + "\n[compare]\nlast_k = 0\n", "compare.last_k"),
    (lambda s: s + "\n[compare]\nlast_k = 2\nlast_rounds = 5\n", "give one"),
    (lambda s: s + "\n[compare]\nalfa = 0.1\n", "unknown key"),
    (lambda s: s.replace('more = "pc"', 'more = "pc"\nmetric = "nope"'), "metric 'nope'"),
])
def test_bad_compare_specs_are_one_line_errors(tmp_path, capsys, edit, message):
    spec = _write(tmp_path, edit(SPEC))
    assert main(["compare", str(spec), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec,cells", [("cross_paper", 100), ("paper000_no_jammer", 160), ("paper000_jammer", 150),
                                        ("paper001_cdpb", 54), ("paper004_fig7", 300), ("paper003_otafd", 60),
                                        ("paper002_fdp", 90), ("paper002_fdp_target", 90),
                                        ("paper002_fdp_target_k50", 90), ("paper002_fdp_target_m50", 90),
                                        ("paper002_fdp_target_m100", 90),
                                        ("paper004_fig7_mnist", 265)])
def test_shipped_comparisons_validate_every_cell(spec, cells, tmp_path, capsys):
    path = f"sim_loopback/compare/{spec}.toml"
    assert main(["sweep", path, "--dry-run", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert f"{cells} cells" in out
    s = load_spec(path)
    assert s.arms and s.claims


def _table(acc: dict, seeds=(1, 2, 3)) -> pd.DataFrame:
    """A sweep table: {(arm, eps, delta): per-seed accuracies}; accuracy_last_k = final_accuracy."""
    rows = []
    for (m, eps, delta), accs in acc.items():
        rows += [{"mechanism": m, "privacy.eps": eps, "privacy.delta": delta, "seed": sd, "final_accuracy": a,
                  "accuracy_last_k": a} for sd, a in zip(seeds, accs)]
    return pd.DataFrame(rows)


def test_verdicts_are_scipys_paired_t_with_holm(tmp_path):
    from otafl_sdr.sweeps.compare import judge
    spec = load_spec(_write(tmp_path))
    acc = {("pc", 50.0, 1e-5): [0.80, 0.83, 0.71], ("hmin", 50.0, 1e-5): [0.60, 0.64, 0.50],
           ("pc", 200.0, 1e-3): [0.50, 0.62, 0.41], ("hmin", 200.0, 1e-3): [0.70, 0.81, 0.62]}
    got = judge(spec, _table(acc))
    a, b = np.array(acc[("pc", 50.0, 1e-5)]), np.array(acc[("hmin", 50.0, 1e-5)])
    c, d = np.array(acc[("pc", 200.0, 1e-3)]), np.array(acc[("hmin", 200.0, 1e-3)])
    pairs = [(a, b), (c, d), (c, a)]
    p = np.array([stats.ttest_rel(x, y).pvalue for x, y in pairs])
    assert p[0] < 0.05 and p[1] < 0.05 and stats.ttest_ind(a, b, equal_var=False).pvalue > p[0]   # pairing matters
    for (x, y), pj, ph, g in zip(pairs, p, _holm(p), got):
        assert g["test"] == "paired t" and g["n"] == 3
        assert g["p"] == pytest.approx(pj, rel=1e-12) and g["p_holm"] == pytest.approx(ph, rel=1e-12)
        half = stats.t.ppf(0.975, 2) * (x - y).std(ddof=1) / math.sqrt(3)
        assert (g["low"], g["high"]) == pytest.approx(((x - y).mean() - half, (x - y).mean() + half), rel=1e-12)
        assert g["wilcoxon_p"] == pytest.approx(stats.wilcoxon(x - y).pvalue, rel=1e-12)
        assert g["verdict"] == ("tie" if not ph < 0.05 else "held" if (x - y).mean() > 0 else "reversed")
    assert [g["verdict"] for g in got[:2]] == ["held", "reversed"]


def test_welch_where_the_seeds_differ_one_seed_and_identical_arms(tmp_path):
    from otafl_sdr.sweeps.compare import degenerate, judge
    spec = load_spec(_write(tmp_path))
    t = _table({("pc", 50.0, 1e-5): [0.80, 0.82, 0.81], ("pc", 200.0, 1e-3): [0.8, 0.9, 0.85]})
    t = pd.concat([t, _table({("hmin", 50.0, 1e-5): [0.60, 0.61, 0.62], ("hmin", 200.0, 1e-3): [0.8, 0.9, 0.85]},
                             seeds=(7, 8, 9))])
    got = judge(spec, t)
    x, y = np.array([0.80, 0.82, 0.81]), np.array([0.60, 0.61, 0.62])
    assert got[0]["test"] == "Welch t" and got[0]["n"] == (3, 3)
    assert got[0]["p"] == pytest.approx(stats.ttest_ind(x, y, equal_var=False).pvalue, rel=1e-12)
    gap = _table({("pc", 50.0, 1e-5): [0.80, 0.83, 0.71], ("hmin", 50.0, 1e-5): [0.60, 0.64, float("nan")]})
    got = judge(spec, gap)[0]                          # a failed cell: paired on the seeds both sides completed
    assert got["test"] == "paired t" and got["n"] == 2 and got["more_mean"] == pytest.approx(0.815)
    assert got["p"] == pytest.approx(stats.ttest_rel([0.80, 0.83], [0.60, 0.64]).pvalue, rel=1e-12)
    one = _table({k: [0.5] for k in [("pc", 50.0, 1e-5), ("hmin", 50.0, 1e-5), ("pc", 200.0, 1e-3),
                                      ("hmin", 200.0, 1e-3)]}, seeds=(1,))
    one.loc[one["mechanism"] == "pc", "accuracy_last_k"] = 0.7
    assert all(g["verdict"] == "not testable (one seed)" and g["p_holm"] is None for g in judge(spec, one))
    same = _table({("pc", 50.0, 1e-5): [0.8, 0.7, 0.6], ("hmin", 50.0, 1e-5): [0.8, 0.7, 0.6],
                   ("pc", 200.0, 1e-3): [0.5, 0.6, 0.7], ("hmin", 200.0, 1e-3): [0.5, 0.6, 0.7]})
    got = judge(spec, same)
    assert [g["verdict"] for g in got[:2]] == ["not testable (identical arms)"] * 2
    assert got[2]["verdict"] == "tie" and got[2]["p_holm"] == pytest.approx(got[2]["p"])   # the only testable one
    assert degenerate(spec, same) == [("pc", "hmin")]


def test_the_robust_metric_last_k_evaluations_or_last_client_rounds(tmp_path):
    """accuracy_last_k: the mean of a run's last k evaluations, or of those in its last W client rounds (the same
    window for FedAvg, evaluated every 5 client rounds, and Upcycled-FL, every 2.5 with server-only steps)."""
    from otafl_sdr.sweeps.compare import add_last_k, options
    spec = load_spec(_write(tmp_path))
    spec.out.mkdir()
    fedavg = [{"round": r, "client_round": r, "uses_clients": True, "test_accuracy": r / 100 if r % 5 == 0 else None}
              for r in range(1, 21)]
    upcycled = [{"round": it, "client_round": (it + 1) // 2, "uses_clients": it % 2 == 1,
                 "test_accuracy": it / 200 if it % 5 == 0 else None} for it in range(1, 41)]
    for d, rows in (("a", fedavg), ("b", upcycled)):
        (spec.out / d).mkdir()
        (spec.out / d / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = pd.DataFrame({"dir": ["a", "b"], "final_accuracy": [0.2, 0.2]})
    k3 = add_last_k(spec, table, options(spec))
    assert k3["accuracy_last_k"].tolist() == pytest.approx([(0.10 + 0.15 + 0.20) / 3, (0.15 + 0.175 + 0.20) / 3])
    assert k3["window"].tolist() == ["10-20", "15-20"] and k3["evaluations"].tolist() == [3, 3]
    spec.compare = {"last_rounds": 10}
    w10 = add_last_k(spec, table, options(spec))      # client rounds (10, 20] and (10.5, 20.5]
    assert w10["accuracy_last_k"].tolist() == pytest.approx([(0.15 + 0.20) / 2, (0.125 + 0.15 + 0.175 + 0.20) / 4])
    assert w10["window"].tolist() == ["15-20", "13-20"]     # whole client rounds (issue 37)


def _run_spec(tmp_path, text, capsys):
    spec = _write(tmp_path, text)
    assert main(["compare", str(spec), "--workers", "2", "--quiet"]) == 0
    capsys.readouterr()
    return tmp_path / "out"


@SHARES
@pytest.mark.experiment
def test_a_spec_with_identical_arms_is_flagged_degenerate(compared, tmp_path, capsys):
    """Both arms cj_adaptive at eps 50: the pc arm's two cells are SPEC's (copied from its folder), the hmin
    arm's two are run here (the same configuration under another arm's name)."""
    text = SPEC.replace('"power.policy=h_min"', '"power.policy=cj_adaptive"').replace(
        '"privacy.eps,privacy.delta" = [[50.0, 1e-5], [200.0, 1e-3]]', '"privacy.eps,privacy.delta" = [[50.0, 1e-5]]')
    text = text.split("[[claims]]\nsource = \"test, one arm")[0]
    for seed in (1, 2):
        cell = f"arm=pc,privacy.eps=50.0,privacy.delta=1e-05,seed={seed}"
        shutil.copytree(compared[0] / cell, tmp_path / "out" / cell, symlinks=True)
    out = _run_spec(tmp_path, text, capsys)
    assert pd.read_csv(out / "sweep.csv").groupby("arm")["status"].agg(set).to_dict() == {
        "arm=pc,privacy.eps=50.0,privacy.delta=1e-05": {"done (skipped)"}, "arm=hmin,privacy.eps=50.0,privacy.delta=1e-05": {"ran"}}
    assert "DEGENERATE: arms 'power control' and 'h_min' gave identical results on every seed" in \
        (out / "compare.md").read_text()
    assert pd.read_csv(out / "claims.csv")["verdict"].tolist() == ["not testable (identical arms)"]


@SHARES
@pytest.mark.experiment
def test_a_one_seed_spec_is_not_testable_and_a_reference_arm_stands_apart(compared, tmp_path, capsys):
    """SPEC with seed 1 only and h_min a reference arm, over a copy of SPEC's folder: its four cells are SPEC's
    seed-1 cells (the same configurations: skipped, not run again); the report is this spec's."""
    text = SPEC.replace("seeds = [1, 2]", "seeds = [1]").replace('label = "h_min"', 'label = "h_min"\nreference = true')
    cells_of(compared, tmp_path)
    out = _run_spec(tmp_path, text, capsys)
    runs = pd.read_csv(out / "sweep.csv")
    assert len(runs) == 4 and set(runs["seed"]) == {1} and set(runs["status"]) == {"done (skipped)"}
    assert set(pd.read_csv(out / "claims.csv")["verdict"]) == {"not testable (one seed)"}
    md = (out / "compare.md").read_text()
    private, reference = md.split("Reference arms")
    assert "power control" in private and "h_min" not in private and "h_min" in reference
    table = pd.read_csv(out / "compare.csv")
    assert table.loc[table["mechanism"] == "hmin", "over_target"].isna().all()


@pytest.mark.parametrize("key,message", [("privacy.eps=3", "is a grid key"), ("power.policy=h_min", "set by arm")])
def test_compare_set_on_a_grid_or_arm_key_is_refused(tmp_path, capsys, key, message):
    spec = _write(tmp_path)
    assert main(["compare", str(spec), "--set", key, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
