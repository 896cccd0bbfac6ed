"""The sweep's figures, shared with `otafl-sdr compare` (style and writer: ``plot_style``; PNG, PDF, SVG):
``final_accuracy`` (mean and 95 % t-interval over seeds per curve, a panel per grid point),
``accuracy_rounds`` (accuracy against client rounds, mean and 95 % band clipped to [0, 1], a panel per
grid point), ``accuracy_vs_eps`` (when the grid moves ``privacy.eps``: accuracy against the PLD eps spent,
delta marked where it differs); the t-interval they share, and the tolerant readers of a cell's files (a
garbled cell is shown as not done, never a traceback)."""
from __future__ import annotations

import math
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.results.style import clip01, colours, figure, label_panels, log_axis, panel_title, save_figure  # noqa: F401 (save_figure: results draws through it)

STANDARD_COLUMNS = {"mechanism", "seed", "status", "arm", "dir", "final_accuracy", "final_loss", "eps_paper",
                    "eps_rdp", "eps_pld", "eps_target", "delta", "rounds", "rounds_planned", "client_rounds",
                    "jammer_rounds", "capped_jammer_rounds", "lost_rounds", "over_target", "eps_planned",
                    "calibration", "wall_s", "accuracy_last_k", "evaluations", "window"}


def read_summary(path: Path) -> dict:
    """A cell's summary.json as a dict; {} when it is unreadable, garbled or not a JSON object (the cell is
    then not 'done' and is resumed or re-run, never trusted)."""
    from otafl_sdr.results.safe_files import load_json
    try:
        return load_json(path, "summary")
    except UserError:
        return {}


def read_accuracy_curve(path: Path) -> list:
    """Test accuracy per row of a cell's rounds.jsonl (None where a row has none, or is garbled)."""
    return [v for _, v in read_accuracy_points(path)]


def read_accuracy_points(path: Path) -> list:
    """(x, test accuracy or None) per row of a cell's rounds.jsonl, x in client rounds: the row's
    ``client_round``, + 0.5 for a server-only iteration (Upcycled-FL's even steps sit between client
    rounds); the row's index + 1 where it has none (older or garbled rows)."""
    from otafl_sdr.results.safe_files import loads, read_text
    try:
        lines = read_text(path, "rounds file").splitlines()
    except UserError:
        return []
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = loads(line, f"'{path}' line {i + 1}")
        except UserError:
            row = None
        row = row if isinstance(row, dict) else {}
        v, cr = row.get("test_accuracy"), row.get("client_round")
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        x = (float(cr) + (0.5 if row.get("uses_clients") is False else 0.0)
             if isinstance(cr, int) and not isinstance(cr, bool) and 0 <= cr < 10**9 else float(len(out) + 1))
        out.append((x, float(v) if ok else None))
    return out


def t95(n: int) -> float:
    """Student's t quantile of a two-sided 95 % interval from n values."""
    from scipy.stats import t
    return float(t.ppf(0.975, n - 1)) if n > 1 else float("nan")


def ci95_half(x) -> float:
    """Half-width of the 95 % t-interval of the mean of x (over seeds); nan for fewer than two values."""
    import numpy as np
    x = np.asarray(x, dtype=float)
    return t95(len(x)) * float(x.std(ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else float("nan")




def grid_columns(table) -> list:
    """The swept keys of a sweep table (its columns other than the standard ones)."""
    return [c for c in table.columns if c not in STANDARD_COLUMNS]


def plot_sweep(out: Path, table, labels: dict | None = None, grid: list | None = None) -> list:
    """final_accuracy, accuracy_rounds and (when the grid moves privacy.eps) accuracy_vs_eps, as PNG, PDF
    and SVG. Curves: the mechanisms (``labels``: name -> label) where the table has them, else the last
    swept key; panels: the other swept keys' points. Nothing is printed for a garbled cell's figures."""
    import warnings

    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _plot_sweep(Path(out), table, labels or {}, grid)


def _plot_sweep(out: Path, table, labels: dict, grid: list | None) -> list:
    import pandas as pd
    acc_all = pd.to_numeric(table["final_accuracy"], errors="coerce")     # a garbled cell's text: not done
    done = table[acc_all.notna()].assign(final_accuracy=acc_all[acc_all.notna()])
    if done.empty:
        return []
    grid = [k for k in (grid_columns(table) if grid is None else grid) if k in done]
    if "mechanism" in done:
        curve, facets = "mechanism", grid
    elif grid:          # curves: the last key that is not the privacy level (that is the x of accuracy_vs_eps)
        curve = ([k for k in grid if k not in ("privacy.eps", "privacy.delta")] or grid)[-1]
        facets = [k for k in grid if k != curve]
    else:
        curve, facets = "arm", []
    done = done.assign(_curve=done[curve].astype(str))
    names = list(dict.fromkeys(done["_curve"]))
    style = {n: (c, m) for n, c, m in zip(names, colours(len(names)), _markers(len(names)))}
    label = {n: labels.get(n, n if curve in ("mechanism", "arm") else f"{curve}={n}") for n in names}
    panels = _panels(done, facets)
    written = plot_final(out / "final_accuracy.png", panels, style, label, "final_accuracy",
                         "final test accuracy (mean, 95 % CI over seeds)", out.name)
    if "accuracy_last_k" in done:
        written += plot_final(out / "accuracy_last_k.png", panels, style, label, "accuracy_last_k",
                              "test accuracy, mean of the last evaluations (95 % CI)", out.name)
    written += plot_rounds_panels(out, panels, style, label)
    eps_facets = [k for k in facets if k not in ("privacy.eps", "privacy.delta")]
    if "privacy.eps" in done and done["privacy.eps"].nunique() > 1:
        metric = "accuracy_last_k" if "accuracy_last_k" in done else "final_accuracy"
        written += plot_vs_eps(out / "accuracy_vs_eps.png", _panels(done, eps_facets), style, label, metric,
                               out.name)
    return written


def _markers(n: int) -> list:
    from otafl_sdr.results.style import MARKERS
    return [MARKERS[i % len(MARKERS)] for i in range(n)]


def _panels(done, facets: list) -> list:
    """[(title, rows)] one per point of the facet keys (one untitled panel without them)."""
    if not facets:
        return [("", done)]
    return [(panel_title(facets, key if isinstance(key, tuple) else (key,)), g)
            for key, g in done.groupby(facets, sort=True, dropna=False)]


def _mean_ci(x) -> tuple[float, float]:
    import numpy as np
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return float("nan"), float("nan")
    return float(x.mean()), (ci95_half(x) if len(x) > 1 else 0.0)


def plot_final(path: Path, panels: list, style: dict, label: dict, metric: str, xlabel: str, name: str) -> list:
    """One horizontal dot plot per panel: each curve's mean and 95 % interval of ``metric`` over seeds
    (labels on the y axis, so long names are never cut)."""
    names = [n for n in style if any((g["_curve"] == n).any() for _, g in panels)]
    from otafl_sdr.results.style import PANEL_WIDTH, WIDTH
    panel_w = WIDTH if len(panels) == 1 else PANEL_WIDTH        # ~0.25 in per curve, whatever the panel width
    plt, fig, axes = figure(len(panels), aspect=max(0.35, (0.25 * len(names) + 0.5) / panel_w), max_cols=3)
    for ax, (title, g) in zip(axes, panels):
        for j, n in enumerate(names):
            m, half = _mean_ci(g.loc[g["_curve"] == n, metric])
            if math.isfinite(m):
                lo, hi = clip01(m - half), clip01(m + half)
                ax.errorbar([m], [-j], xerr=[[m - lo], [hi - m]], fmt=style[n][1], color=style[n][0], capsize=3)
        ax.set_yticks([-j for j in range(len(names))], [label[n] for n in names])
        ax.set_ylim(-len(names) + 0.5, 0.5)
        ax.set_title(title)
    lo, hi = min(ax.get_xlim()[0] for ax in axes), max(ax.get_xlim()[1] for ax in axes)
    for ax in axes:                   # one x scale for every panel: the grid points compare by eye
        ax.set_xlim(lo, hi)
    label_panels(fig, axes, xlabel, "", f"{name}: {sum(len(g) for _, g in panels)} runs")
    return save_figure(plt, fig, path)


def plot_rounds_panels(out: Path, panels: list, style: dict, label: dict) -> list:
    """accuracy_rounds: test accuracy against client rounds, mean and 95 % band over seeds per curve."""
    import numpy as np
    plt, fig, axes = figure(len(panels))
    for ax, (title, g) in zip(axes, panels):
        for n in style:
            dirs = g.loc[g["_curve"] == n, "dir"]
            runs = [dict((x, v) for x, v in read_accuracy_points(out / str(d) / "rounds.jsonl") if v is not None)
                    for d in dirs]
            runs = [r for r in runs if r]
            if not runs:
                continue
            xs = sorted(set.intersection(*(set(r) for r in runs)))
            if not xs:
                continue
            m = np.array([[r[x] for x in xs] for r in runs])
            mean = m.mean(axis=0)
            ax.plot(xs, mean, color=style[n][0], marker=style[n][1] if len(xs) < 25 else None, label=label[n])
            if len(runs) > 1:
                half = t95(len(runs)) * m.std(axis=0, ddof=1) / math.sqrt(len(runs))
                ax.fill_between(xs, clip01(mean - half), clip01(mean + half), color=style[n][0], alpha=0.15,
                                linewidth=0)
        ax.set_title(title)
    label_panels(fig, axes, "client round", "test accuracy", f"{out.name}: mean and 95 % band over seeds")
    return save_figure(plt, fig, out / "accuracy_rounds.png")


def plot_vs_eps(path: Path, panels: list, style: dict, label: dict, metric: str, name: str) -> list:
    """accuracy_vs_eps: ``metric`` (mean, 95 % CI) against the PLD eps spent (mean over seeds), log axis;
    where the points' deltas differ each delta gets its own line style and legend entry."""
    import numpy as np
    import pandas as pd
    dcol = "delta" if all("delta" in g for _, g in panels) else None
    deltas = sorted({float(d) for _, g in panels for d in pd.to_numeric(g[dcol], errors="coerce") if d == d}
                    if dcol else set())
    dash = {d: ls for d, ls in zip(deltas, ("-", "--", ":", "-."))}
    plt, fig, axes = figure(len(panels))
    for ax, (title, g) in zip(axes, panels):
        for n in style:
            sel = g[g["_curve"] == n]
            for d, gd in (sel.groupby(pd.to_numeric(sel[dcol], errors="coerce")) if dcol else [(None, sel)]):
                pts = []
                for _, ge in gd.groupby("privacy.eps"):
                    m, half = _mean_ci(ge[metric])
                    x = float(np.nanmean(ge["eps_pld"].astype(float)))
                    if math.isfinite(m) and math.isfinite(x) and x > 0:
                        pts.append((x, m, half))
                if not pts:
                    continue
                pts.sort()
                x, m, h = (np.array(v) for v in zip(*pts))
                lab = label[n] + (f" (delta={d:g})" if len(deltas) > 1 and d is not None else "")
                ax.errorbar(x, m, yerr=[m - clip01(m - h), clip01(m + h) - m], color=style[n][0], marker=style[n][1],
                            ls=dash.get(d, "-"), capsize=3, label=lab,
                            markerfacecolor=style[n][0] if d is None or d == deltas[0] else "white")
        ax.set_xscale("log")
        log_axis(ax.xaxis)
        ax.set_title(title)
    label_panels(fig, axes, "eps spent (PLD, mean over seeds)" + (f", at delta {deltas[0]:g}" if len(deltas) == 1
                                                                  else "; open markers, dashed: other deltas"),
                 "test accuracy (mean, 95 % CI)", f"{name}: accuracy against eps")
    return save_figure(plt, fig, path)

