"""`otafl-sdr compare SPEC`: privacy mechanisms x seeds (x a grid, e.g. of eps targets) at equal (eps, delta).

SPEC is a sweep spec (``otafl_sdr/sweep.py``) with named ``[arms.NAME]`` (the mechanisms: ``set`` = overrides,
``label``) and, optionally, the papers' claims to check::

    [[claims]]
    source = "paper 000, Figs. 6-8"
    more = "upcycled"                 # this arm ...
    less = "fedavg"                   # ... has a larger `metric` than this one
    metric = "final_accuracy"         # default; any numeric column of sweep.csv (eps_pld, wall_s, ...)
    where = { "privacy.eps" = 1.0 }   # optional: only these grid points (default: one verdict per point)

    [[claims]]                        # or one arm at two grid points ("accuracy falls as eps falls")
    arm = "fedavg"
    more_at = { "privacy.eps" = 1.0 }
    less_at = { "privacy.eps" = 0.1 }

The cells run as a sweep (resumable, local processes or Ray). Then, in the sweep folder:
``compare.csv`` / ``compare.md``: one row per mechanism and grid point: seeds, final accuracy (mean and 95 %
t-interval half-width), the tight eps spent (PLD, mean and max over seeds) against the target, runs over
the target, rounds and client rounds, jammer rounds and capped ones, how the knob was set (``calibration``);
``claims.md``: each claim per grid point, held / tie within the seeds' spread / reversed, with the numbers
(Welch's 95 % interval of the difference of means decides; one seed cannot show a spread and says so);
``accuracy_rounds.png`` (accuracy against round, mean and 95 % band per arm), ``final_accuracy.png`` and,
when the grid has ``privacy.eps``, ``accuracy_vs_eps.png`` (final accuracy against the PLD eps spent).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from .errors import UserError
from .sweep import SweepSpec, add_engine_arguments, check_workers, failed_cells, load_spec, run_sweep
from .sweep_plots import ci95_half, finish_plot, plot_sweep

VERDICTS = ("held", "tie within the seeds' spread", "reversed")


def grid_keys(spec: SweepSpec) -> list[str]:
    return [s for k in spec.grid for s in k.split(",")]


def summarise(spec: SweepSpec, table):
    """One row per mechanism and grid point (the cells' seeds pooled)."""
    import pandas as pd
    keys = grid_keys(spec)
    rows = []
    for (mech, *point), g in table.groupby(["mechanism"] + keys, sort=False, dropna=False):
        done = g[g["final_accuracy"].notna()]
        acc = done["final_accuracy"].astype(float)
        eps = done["eps_pld"].astype(float)
        rows.append({"mechanism": mech, "label": spec.labels.get(mech, mech), **dict(zip(keys, point)),
                     "seeds": len(done), "of": len(g),
                     "accuracy": acc.mean() if len(acc) else float("nan"),
                     "accuracy_ci95": ci95_half(acc.to_numpy()) if len(acc) else float("nan"),
                     "eps_target": _first(g["eps_target"]), "eps_pld_mean": eps.mean() if len(eps) else float("nan"),
                     "eps_pld_max": eps.max() if len(eps) else float("nan"),
                     "over_target": int(done["over_target"].fillna(False).astype(bool).sum()),
                     "rounds": done["rounds"].mean(), "client_rounds": done["client_rounds"].mean(),
                     "jammer_rounds": done["jammer_rounds"].mean(),
                     "capped_jammer_rounds": done["capped_jammer_rounds"].mean(),
                     "calibration": _first(done["calibration"]),
                     "failed": "; ".join(sorted(set(g.loc[g["final_accuracy"].isna(), "status"].astype(str)))),
                     })
    return pd.DataFrame.from_records(rows)


def _first(col):
    col = col.dropna()
    return col.iloc[0] if len(col) else None


def judge(spec: SweepSpec, table) -> list[dict]:
    """Each claim at each grid point it covers: held / tie within the seeds' spread / reversed."""
    from scipy.stats import t
    keys = grid_keys(spec)
    out = []
    for c in spec.claims:
        metric = c.get("metric", "final_accuracy")
        if "arm" in c:       # one arm at two grid points
            pairs = [((c["arm"], c["more_at"]), (c["arm"], c["less_at"]), c["more_at"] | c["less_at"],
                      f"{c['arm']} at {_at(c['more_at'])} > at {_at(c['less_at'])} in {metric}")]
        else:
            pts = table[keys].drop_duplicates().to_dict("records") if keys else [{}]
            pairs = [((c["more"], pt), (c["less"], pt), pt, f"{c['more']} > {c['less']} in {metric}")
                     for pt in pts if not any(k in pt and pt[k] != v for k, v in c.get("where", {}).items())]
        for (arm_a, pt_a), (arm_b, pt_b), pt, text in pairs:
            a = _select(table, arm_a, pt_a)[metric].dropna().astype(float).to_numpy()
            b = _select(table, arm_b, pt_b)[metric].dropna().astype(float).to_numpy()
            rec = {"source": c.get("source", ""), "claim": text, "at": pt if "arm" not in c else {},
                   "more_mean": a.mean() if len(a) else None, "less_mean": b.mean() if len(b) else None,
                   "n": (len(a), len(b))}
            if not len(a) or not len(b):
                rec.update(verdict="not run", low=None, high=None)
            elif len(a) < 2 or len(b) < 2:
                diff = a.mean() - b.mean()
                rec.update(verdict=(VERDICTS[0] if diff > 0 else VERDICTS[2] if diff < 0 else VERDICTS[1])
                           + " (one seed: no spread)", low=diff, high=diff)
            else:
                va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
                diff, se = a.mean() - b.mean(), math.sqrt(va + vb)
                dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se > 0 else 1.0
                half = float(t.ppf(0.975, dof)) * se
                verdict = VERDICTS[0] if diff - half > 0 else VERDICTS[2] if diff + half < 0 else VERDICTS[1]
                rec.update(verdict=verdict, low=diff - half, high=diff + half)
            out.append(rec)
    return out


def _at(pt: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in pt.items())


def _select(table, arm: str, pt: dict):
    sel = table[table["mechanism"] == arm]
    for k, v in pt.items():
        sel = sel[sel[k] == v]
    return sel


def _cell(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def markdown(spec: SweepSpec, summary, claims: list[dict]) -> tuple[str, str]:
    keys = grid_keys(spec)
    head = ["mechanism", *keys, "seeds", "accuracy (95% CI)", "eps PLD mean / max", "target", "over",
            "rounds", "client rounds", "jammer (capped)", "knob"]
    lines = [f"# {spec.name}: {len(summary)} mechanism x grid points", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for _, r in summary.iterrows():
        lines.append("| " + " | ".join([
            str(r["label"]), *(_cell(r[k]) for k in keys), f"{r['seeds']}/{r['of']}",
            f"{_cell(r['accuracy'])} +- {_cell(r['accuracy_ci95'], 2)}",
            f"{_cell(r['eps_pld_mean'], 4)} / {_cell(r['eps_pld_max'], 4)}", _cell(r["eps_target"]),
            str(r["over_target"]), _cell(r["rounds"]), _cell(r["client_rounds"]),
            f"{_cell(r['jammer_rounds'])} ({_cell(r['capped_jammer_rounds'])})", _cell(r["calibration"])]) + " |")
    failed = summary[summary["failed"] != ""]
    for _, r in failed.iterrows():
        lines.append(f"\n{r['label']} {[r[k] for k in keys]}: {r['failed']}")
    cl = [f"# {spec.name}: the papers' claims", ""]
    for c in claims:
        at = f" at {_at(c['at'])}" if c["at"] else ""
        cl.append(f"- [{c['verdict']}] {c['source']}: {c['claim']}{at}: {_cell(c['more_mean'])} vs "
                  f"{_cell(c['less_mean'])} (difference 95% CI [{_cell(c['low'])}, {_cell(c['high'])}], "
                  f"seeds {c['n'][0]}/{c['n'][1]})")
    return "\n".join(lines) + "\n", "\n".join(cl) + "\n"


def plot_accuracy_vs_eps(out: Path, spec: SweepSpec, summary) -> None:
    if "privacy.eps" not in grid_keys(spec) or summary.empty:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    others = [k for k in grid_keys(spec) if k not in ("privacy.eps", "privacy.delta")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, g in summary.groupby(["label"] + others, sort=False):
        g = g.sort_values("eps_pld_mean")
        name = key if isinstance(key, str) else ", ".join(map(str, key))
        ax.errorbar(g["eps_pld_mean"], g["accuracy"], yerr=g["accuracy_ci95"].fillna(0), marker="o", capsize=3,
                    label=name)
    ax.set_xscale("log")
    finish_plot(plt, fig, ax, "eps spent (PLD, mean over seeds)", "final test accuracy (mean, 95 % CI)",
                f"{spec.name}: accuracy against eps", out / "accuracy_vs_eps.png")


def spec_notes(path) -> str:
    """The spec file's leading comment (what is compared, the paper's sizes beside the reduced ones)."""
    from .safe_files import read_text
    lines = []
    for ln in read_text(path, "compare spec").splitlines():
        if not ln.startswith("#"):
            break
        lines.append(ln.lstrip("#").strip())
    return "\n".join(lines)


def write_report(spec: SweepSpec, table, notes: str = "") -> tuple[str, str]:
    from .results import atomic_write_text
    summary = summarise(spec, table)
    claims = judge(spec, table)
    md, cl = markdown(spec, summary, claims)
    if notes:
        md = md.replace("\n\n", f"\n\n{notes}\n\n", 1)
    atomic_write_text(spec.out / "compare.csv", summary.to_csv(index=False))
    atomic_write_text(spec.out / "compare.md", md)
    atomic_write_text(spec.out / "claims.md", cl)
    plot_accuracy_vs_eps(spec.out, spec, summary)
    return md, cl


def add_arguments(p) -> None:
    p.add_argument("spec", help="comparison spec: a sweep spec with [arms.NAME] mechanisms and [[claims]]")
    add_engine_arguments(p)
    p.add_argument("--seeds", type=int, default=None, help="use only the spec's first N seeds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra fixed override for every cell (e.g. run.rounds=5), repeatable")
    p.add_argument("--report-only", action="store_true", help="redraw the report from the cells already run")


def main(args) -> int:
    check_workers(args.workers)
    spec = load_spec(args.spec, args.out)
    if not spec.arms:
        raise UserError(f"compare spec '{args.spec}' has no [arms.NAME] tables (the mechanisms to compare)")
    keys = set(grid_keys(spec))
    for c in spec.claims:
        sides = ("arm",) if "arm" in c else ("more", "less")
        for side in sides:
            if c.get(side) not in spec.arms:
                raise UserError(f"compare spec '{args.spec}': claim {side} = {c.get(side)!r} is not an arm; "
                                f"arms: {', '.join(spec.arms)}")
        points = [c.get("more_at"), c.get("less_at")] if "arm" in c else [c.get("where", {})]
        if not all(isinstance(pt, dict) and set(pt) <= keys for pt in points):
            raise UserError(f"compare spec '{args.spec}': claim {c.get('source', '')!r}: "
                            f"{'more_at and less_at' if 'arm' in c else 'where'} must be tables of grid keys "
                            f"({', '.join(sorted(keys)) or 'none'})")
    if args.seeds is not None:
        if args.seeds < 1:
            raise UserError("--seeds must be >= 1")
        spec.seeds = spec.seeds[:args.seeds]
    if any("=" not in s for s in args.set):
        raise UserError("--set takes KEY=VALUE")
    spec.fixed = spec.fixed + list(args.set)
    if args.report_only:
        import pandas as pd
        csv = spec.out / "sweep.csv"
        if not csv.is_file():
            raise UserError(f"--report-only: no {csv} (run the comparison first)")
        try:
            table = pd.read_csv(csv)
        except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as e:
            raise UserError(f"--report-only: '{csv}' is not a sweep table ({type(e).__name__}); run the comparison "
                            f"again to rewrite it") from None
        missing = {"arm", "dir", "status", "final_accuracy"} - set(table.columns)
        if missing:
            raise UserError(f"--report-only: '{csv}' lacks the column(s) {', '.join(sorted(missing))}; it is not "
                            f"a sweep table")
        plot_sweep(spec.out, table)
    else:
        table = run_sweep(spec, engine=args.engine, workers=args.workers, address=args.address,
                          progress=not args.quiet)
    md, cl = write_report(spec, table, spec_notes(args.spec))
    print(md)
    print(cl)
    print(f"compare {spec.name}: {spec.out / 'compare.md'}, {spec.out / 'claims.md'}, plots in {spec.out}")
    failed = failed_cells(table)
    for _, r in failed.iterrows():
        print(f"otafl-sdr: cell {r['dir']}: {r['status']}", file=sys.stderr)
    return 1 if len(failed) else 0
