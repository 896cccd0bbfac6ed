"""`otafl-sdr compare SPEC`: privacy mechanisms x seeds (x a grid, e.g. of eps targets) at equal (eps, delta).

SPEC is a sweep spec (``otafl_sdr/sweeps/sweep.py``) with named ``[arms.NAME]`` (the mechanisms: ``set`` = overrides,
``label``, ``reference = true`` for a no-DP reference arm, reported apart and not held to the target) and,
optionally, the papers' claims to check and the statistics' options::

    [[claims]]
    source = "paper 000, Figs. 6-8"
    more = "upcycled"                 # this arm ...
    less = "fedavg"                   # ... has a larger `metric` than this one
    metric = "accuracy_last_k"        # default: the mean of each run's last k evaluations; or final_accuracy
                                      # (the final round's) or any numeric column of sweep.csv (eps_pld, ...)
    where = { "privacy.eps" = 1.0 }   # optional: only these grid points (default: one verdict per point)
    paper_effect = 0.0146             # optional: the paper's own difference, in the metric's units ...
    paper_effect_source = "Fig. 7(a): 1.465 pp"   # ... and where the paper states it (both or neither)

    [[claims]]                        # or one arm at two grid points ("accuracy falls as eps falls")
    arm = "fedavg"
    more_at = { "privacy.eps" = 1.0 }
    less_at = { "privacy.eps" = 0.1 }

    [compare]
    last_k = 3                        # evaluations averaged into accuracy_last_k (default 3), or
    last_rounds = 5.0                 # the evaluations in each run's last 5 client rounds (the same window
                                      # for every arm, whatever its evaluation grid or iterations per round)
    alpha = 0.05                      # family-wise error rate of the claims (Holm), default 0.05
    power = 0.8                       # the power the seeds-needed figures are for, default 0.8

The cells run as a sweep (resumable, local processes or Ray). Then, in the sweep folder:
``compare.csv`` / ``compare.md``: one row per mechanism and grid point: seeds, accuracy (mean of the last k
evaluations, 95 % t-interval) and the final round's, the tight eps spent (PLD, mean and max over seeds)
against the target, runs over the target, rounds and client rounds, jammer rounds and capped ones, how the
knob was set; reference arms in a table of their own; arms identical on every seed flagged as degenerate.
``claims.md`` / ``claims.csv``: each claim per grid point with its verdict (held / reversed / tie / not
testable; between two private arms whose spent eps differ by more than the target's tolerance, "not at equal eps
(...)"), tested as ``stats`` says (paired by seed, Holm across the claims; the interval at the claim's Holm level),
and the power table (``power_analysis``): per claim the paper's effect, the effect the seeds run can detect and the
seeds the paper's effect needs. ``power.csv``: that table. ``compare --plan SPEC`` prints it before anything
runs, from the folder's cells or a pilot's (``--pilot FOLDER``). ``compare_cells.csv``:
the per-seed values the tests used. Figures (PNG, PDF, SVG; ``sweep_plots``): final_accuracy, accuracy_last_k,
accuracy_rounds (a panel per grid point) and accuracy_vs_eps, labelled with the arms' labels.
"""
from __future__ import annotations

import math
from pathlib import Path

from otafl_sdr.sweeps.power_analysis import DEFAULT_POWER, power_markdown, power_row
from otafl_sdr.sweeps.stats import NOT_RUN, compare_pair, holm_verdicts, identical_arms
from otafl_sdr.errors import UserError
from otafl_sdr.sweeps.sweep import SweepSpec
from otafl_sdr.sweeps.cell_overrides import grid_keys
from otafl_sdr.sweeps.plots import ci95_half, plot_sweep, read_accuracy_points

DEFAULT_METRIC = "accuracy_last_k"
DEGENERATE_FIGURES = ("final_accuracy", "final_loss", "eps_pld", DEFAULT_METRIC)


def options(spec: SweepSpec, where: str = "compare spec") -> dict:
    """The [compare] table checked: last_k (int >= 1), alpha (in (0, 0.5]), power (in [0.5, 0.999]),
    reference (arm names)."""
    o = dict(spec.compare)
    bad = set(o) - {"last_k", "last_rounds", "alpha", "power", "reference"}
    if bad:
        raise UserError(f"{where}: unknown key(s) compare.{sorted(bad)}; allowed: last_k, last_rounds, alpha, power")
    power = o.get("power", DEFAULT_POWER)
    if not isinstance(power, (int, float)) or isinstance(power, bool) or not 0.5 <= power <= 0.999:
        raise UserError(f"{where}: compare.power must be a number in [0.5, 0.999] (the power the seeds needed are for)")
    k, alpha, ref = o.get("last_k", 3), o.get("alpha", 0.05), o.get("reference", [])
    w = o.get("last_rounds")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 10_000:
        raise UserError(f"{where}: compare.last_k must be an integer in [1, 10000] (evaluations averaged)")
    if w is not None and (not isinstance(w, (int, float)) or isinstance(w, bool) or not 0 < w <= 1e6):
        raise UserError(f"{where}: compare.last_rounds must be a number of client rounds > 0")
    if w is not None and "last_k" in o:
        raise UserError(f"{where}: compare.last_k and compare.last_rounds are two windows; give one")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 < alpha <= 0.5:
        raise UserError(f"{where}: compare.alpha must be a number in (0, 0.5]")
    if not (isinstance(ref, list) and all(a in spec.arms for a in ref)):
        raise UserError(f"{where}: the reference arms must be arms of the spec (arms.NAME.reference = true)")
    return {"last_k": k, "last_rounds": None if w is None else float(w), "alpha": float(alpha),
            "power": float(power), "reference": list(ref)}


def add_last_k(spec: SweepSpec, table, opts: dict, cells: Path | None = None):
    """The table with ``accuracy_last_k`` (mean test accuracy over each run's last k evaluated rows of
    rounds.jsonl, or over those in its last ``last_rounds`` client rounds; the final accuracy where the file
    has none), ``evaluations`` (how many were averaged) and ``window`` (the client rounds they span, whole: a
    server-only iteration, plotted half a client round on, belongs to the client round before it). ``cells``:
    where the cells' rows are read (default the spec's folder; a results page's staged compact data)."""
    import pandas as pd
    cells = spec.out if cells is None else Path(cells)
    means, counts, windows = [], [], []
    for _, r in table.iterrows():
        pts = [(math.floor(x), v) for x, v in read_accuracy_points(cells / str(r["dir"]) / "rounds.jsonl")
               if v is not None]
        if opts["last_rounds"] and pts:
            pts = [(x, v) for x, v in pts if x > pts[-1][0] - opts["last_rounds"]]
        else:
            pts = pts[-opts["last_k"]:]
        final = pd.to_numeric(pd.Series([r.get("final_accuracy")]), errors="coerce").iloc[0]
        ok = bool(pts) and not pd.isna(final)
        means.append(sum(v for _, v in pts) / len(pts) if ok else final)
        counts.append(len(pts) if ok else (0 if pd.isna(final) else 1))
        windows.append(f"{pts[0][0]:d}-{pts[-1][0]:d}" if ok else "")
    return table.assign(**{DEFAULT_METRIC: means, "evaluations": counts, "window": windows})


def reference_arms(spec: SweepSpec, table, opts: dict) -> set:
    """The spec's reference arms, and any arm none of whose runs had an eps target."""
    ref = set(opts["reference"])
    if "eps_target" in table:
        import pandas as pd
        tgt = pd.to_numeric(table["eps_target"], errors="coerce")
        ref |= {m for m, g in tgt.groupby(table["mechanism"]) if g.isna().all()}
    return ref


def summarise(spec: SweepSpec, table, reference: set = frozenset()):
    """One row per mechanism and grid point (the cells' seeds pooled)."""
    import pandas as pd
    keys = grid_keys(spec)
    rows = []
    for (mech, *point), g in table.groupby(["mechanism"] + keys, sort=False, dropna=False):
        done = g[g["final_accuracy"].notna()]
        acc = done[DEFAULT_METRIC].astype(float)
        fin = done["final_accuracy"].astype(float)
        eps = done["eps_pld"].astype(float)
        is_ref = mech in reference
        rows.append({"mechanism": mech, "label": spec.labels.get(mech, mech), **dict(zip(keys, point)),
                     "reference": is_ref, "seeds": len(done), "of": len(g),
                     "accuracy": acc.mean() if len(acc) else float("nan"),
                     "accuracy_ci95": ci95_half(acc.to_numpy()) if len(acc) else float("nan"),
                     "evaluations": done["evaluations"].min() if len(done) else 0,
                     "window": ", ".join(sorted(set(done["window"].astype(str)) - {""})),
                     "final_accuracy": fin.mean() if len(fin) else float("nan"),
                     "final_accuracy_ci95": ci95_half(fin.to_numpy()) if len(fin) else float("nan"),
                     "eps_target": None if is_ref else _first(g["eps_target"]),
                     "eps_pld_mean": eps.mean() if len(eps) else float("nan"),
                     "eps_pld_max": eps.max() if len(eps) else float("nan"),
                     "over_target": None if is_ref else int(done["over_target"].eq(True).sum()),
                     "rounds": done["rounds"].mean(), "client_rounds": done["client_rounds"].mean(),
                     "jammer_rounds": done["jammer_rounds"].mean(),
                     "capped_jammer_rounds": done["capped_jammer_rounds"].mean(),
                     "calibration": _first(done["calibration"]),
                     "failed": failed_seeds(g),
                     })
    return pd.DataFrame.from_records(rows)


def failed_seeds(g) -> str:
    """The cells of one mechanism at one grid point that have no result, by status: "seeds 4, 6: <status>;
    seed 7: <status>" ("" when every cell finished)."""
    bad = g.loc[g["final_accuracy"].isna()]
    by: dict[str, list] = {}
    for _, r in bad.iterrows():
        by.setdefault(str(r["status"]), []).append(r["seed"])
    return "; ".join(f"seed{'s' if len(seeds) > 1 else ''} {', '.join(str(x) for x in sorted(seeds))}: {status}"
                     for status, seeds in sorted(by.items()))


def _first(col):
    col = col.dropna()
    return col.iloc[0] if len(col) else None


def degenerate(spec: SweepSpec, table) -> list[tuple[str, str]]:
    """Pairs of arms whose runs gave the same figures on every seed at every grid point (the arms' settings
    made no difference: e.g. two budgets that the target calibration maps to one noise)."""
    keys = grid_keys(spec)
    figs = [f for f in DEGENERATE_FIGURES if f in table]
    done = table[table["final_accuracy"].notna()]
    values = {m: {(*(_key(r[k]) for k in keys), _key(r.get("seed"))): tuple(float(r[f]) for f in figs)
                  for _, r in g.iterrows()} for m, g in done.groupby("mechanism", sort=False)}
    return identical_arms(values)


def _key(v):
    return "nan" if isinstance(v, float) and math.isnan(v) else v


def claim_tests(spec: SweepSpec, points: list[dict]) -> list[tuple]:
    """Each claim at each grid point it covers: (claim, (arm, point) of the larger side, (arm, point) of the
    smaller side, the point it is judged at, its text). ``points``: the grid points (one {} without a grid)."""
    out = []
    for c in spec.claims:
        metric = c.get("metric", DEFAULT_METRIC)
        if "arm" in c:       # one arm at two grid points
            out.append((c, (c["arm"], c["more_at"]), (c["arm"], c["less_at"]), {},
                        f"{c['arm']} at {_at(c['more_at'])} > at {_at(c['less_at'])} in {metric}"))
            continue
        out += [(c, (c["more"], pt), (c["less"], pt), pt, f"{c['more']} > {c['less']} in {metric}")
                for pt in points if not any(k in pt and pt[k] != v for k, v in c.get("where", {}).items())]
    return out


def judge(spec: SweepSpec, table, alpha: float = 0.05, reference: set = frozenset()) -> list[dict]:
    """Each claim at each grid point it covers, tested per ``stats`` (paired by seed where both sides ran the
    same seeds, Welch otherwise; Holm over all of them): held / reversed / tie / not testable, with the claim's
    paper effect beside it. Two private arms at one point whose spent eps differ by more than the target's
    tolerance (``equal_eps``) are marked "not at equal eps (VERDICT)": their difference is not the mechanisms'
    at one privacy level (they stay in Holm's family, which only makes the others' verdicts more cautious)."""
    keys = grid_keys(spec)
    pts = table[keys].drop_duplicates().to_dict("records") if keys else [{}]
    tests = []
    for c, (arm_a, pt_a), (arm_b, pt_b), pt, text in claim_tests(spec, pts):
        metric = c.get("metric", DEFAULT_METRIC)
        if metric not in table:
            raise UserError(f"claim {c.get('source', '')!r}: metric '{metric}' is not a column of the sweep "
                            f"table ({DEFAULT_METRIC}, final_accuracy, eps_pld, ...)")
        sel_a, sel_b = _select(table, arm_a, pt_a), _select(table, arm_b, pt_b)
        a, b = _by_seed(sel_a, metric, "a"), _by_seed(sel_b, metric, "b")
        same = None if arm_a == arm_b or reference & {arm_a, arm_b} else equal_eps(sel_a, sel_b)
        tests.append({"source": c.get("source", ""), "claim": text, "at": pt, "metric": metric,
                      "paper_effect": c.get("paper_effect"), "paper_effect_source": c.get("paper_effect_source"),
                      "equal_eps": same, **compare_pair(a, b)})
    out = holm_verdicts(tests, alpha)
    for t in out:
        if t["equal_eps"] is False and t["verdict"] != NOT_RUN:
            t["verdict"] = f"{NOT_EQUAL_EPS} ({t['verdict']})"
    return out


NOT_EQUAL_EPS = "not at equal eps"


def equal_eps(sel_a, sel_b) -> bool | None:
    """Whether two arms' finished runs spent one eps: every run's PLD eps within the targeting band's width,
    TOL x the target (privacy/targeting.py: a targeted run spends [(1 - TOL) eps, eps]), of every other run's;
    without a target, TOL x the larger eps spent. None where a side has no eps recorded."""
    import pandas as pd

    from otafl_sdr.privacy.targeting import TOL
    if not all("eps_pld" in s and "final_accuracy" in s for s in (sel_a, sel_b)):
        return None
    done = [s[s["final_accuracy"].notna()] for s in (sel_a, sel_b)]
    eps = [pd.to_numeric(s["eps_pld"], errors="coerce").dropna() for s in done]
    if not all(len(e) for e in eps):
        return None
    both = pd.concat(eps)
    tgt = pd.to_numeric(pd.concat([s.get("eps_target", pd.Series(dtype=float)) for s in done]),
                        errors="coerce").dropna()
    scale = float(tgt.max()) if len(tgt) else float(both.abs().max())
    return bool(both.max() - both.min() <= TOL * scale)


def _by_seed(sel, metric: str, side: str) -> dict:
    import pandas as pd
    vals = pd.to_numeric(sel[metric], errors="coerce")
    seeds = sel["seed"] if "seed" in sel else [(side, i) for i in range(len(sel))]   # no seeds: unpaired
    return {s: float(v) for s, v in zip(seeds, vals) if not pd.isna(v)}


def _at(pt: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in pt.items())


def _select(table, arm: str, pt: dict):
    sel = table[table["mechanism"] == arm]
    for k, v in pt.items():
        sel = sel[sel[k] == v]
    return sel


def spec_notes(path) -> str:
    """The spec file's leading comment (what is compared, the paper's sizes beside the reduced ones)."""
    from otafl_sdr.results.safe_files import read_text
    lines = []
    for ln in read_text(path, "compare spec").splitlines():
        if not ln.startswith("#"):
            break
        lines.append(ln.lstrip("#").strip())
    return "\n".join(lines)


def notes_title(notes: str) -> str:
    """The figures' title from the spec's comment when the spec has no sweep.title: its first clause
    ("Paper 000, Figs. 6-8"), '' without one."""
    first = next((ln for ln in notes.splitlines() if ln and "otafl-sdr compare" not in ln), "")
    return first.split(":", 1)[0].strip() if ":" in first[:80] else ""


def write_report(spec: SweepSpec, table, notes: str = "", cells: Path | None = None) -> tuple[str, str]:
    """compare.csv / .md, claims.md / .csv, compare_cells.csv and the figures, in the spec's folder; returns
    (compare.md, claims.md). ``cells``: where the cells' rows are read (default the spec's folder)."""
    import pandas as pd

    from otafl_sdr.sweeps.report import claims_table, markdown
    from otafl_sdr.results.files import atomic_write_text
    opts = options(spec)
    table = add_last_k(spec, table, opts, cells)
    ref = reference_arms(spec, table, opts)
    summary = summarise(spec, table, ref)
    claims = judge(spec, table, opts["alpha"], ref)
    same = degenerate(spec, table)
    md, cl = markdown(spec, summary, claims, same, opts, grid_keys(spec))
    power = power_rows(claims, opts)
    cl += "\n## Power: the seeds each claim needs\n\n" + "\n".join(power_markdown(power, opts["alpha"], family_size(claims), opts["power"],
                                           f"the per-seed paired differences of this folder's own cells ({spec.out})")) + "\n"
    if notes:
        md = md.replace("\n\n", f"\n\n{notes}\n\n", 1)
    cols = ["mechanism", *grid_keys(spec), "seed", "final_accuracy", DEFAULT_METRIC, "evaluations", "window",
            "eps_pld", "dir"]
    atomic_write_text(spec.out / "compare_cells.csv", table[[c for c in cols if c in table]].to_csv(index=False))
    atomic_write_text(spec.out / "compare.csv", summary.to_csv(index=False))
    atomic_write_text(spec.out / "compare.md", md)
    atomic_write_text(spec.out / "claims.md", cl)
    atomic_write_text(spec.out / "claims.csv", pd.DataFrame.from_records(claims_table(claims)).to_csv(index=False))
    atomic_write_text(spec.out / "power.csv", pd.DataFrame.from_records(power_table(power)).to_csv(index=False))
    plot_sweep(spec.out, table, spec.labels, grid_keys(spec), spec.figure, spec.title or notes_title(notes), cells)
    return md, cl


def family_size(claims: list[dict]) -> int:
    """m, the claim tests in Holm's family (the testable ones)."""
    return sum(c["p_holm"] is not None for c in claims)


def power_rows(claims: list[dict], opts: dict, n_plan: int | None = None, m: int | None = None) -> list[dict]:
    """The power table's rows (``power_analysis.power_row``), one per claim test, at Holm's first step for the
    ``m`` claim tests (default: the testable ones), at ``n_plan`` seeds (default: the pairs each ran)."""
    m = family_size(claims) if m is None else m
    return [power_row(c, n_plan, m, opts["alpha"], opts["power"]) for c in claims]


def power_table(rows: list[dict]) -> list[dict]:
    """power.csv: one flat row per claim test."""
    return [{"claim": r["claim"], "at": _at(r["at"]), "source": r["source"], "paper_effect": r["paper_effect"],
             "paper_effect_source": r["paper_effect_source"], "level": r["level"], "n": r["n"], "sd": r["sd"],
             "min_detectable_effect": r["mde"], "power_at_n": r["power_at_n"], "seeds_needed": r["seeds_needed"],
             "note": r["note"]} for r in rows]
