"""The sweep's figures, shared with `otafl-sdr compare` (style, presets and writer: ``results.style``; PNG,
PDF, SVG): ``final_accuracy`` (mean and 95 % t-interval over seeds per arm, a panel per grid point),
``accuracy_rounds`` (accuracy against whole client rounds, mean and 95 % band clipped to [0, 1] for up to
three arms a panel, dodged error bars at a few rounds beyond), ``accuracy_vs_eps`` (when the grid moves
``privacy.eps``: accuracy against the PLD ε spent, dodged error bars, a panel per δ, points without lines
where an arm has fewer than three); the method of every interval (and its n) is written on the figure. Arms
are named by their spec labels, a grid key by its name (ε, δ, ...) and value. The t-interval they share, and
the tolerant readers of a cell's files (a garbled cell is shown as not done, never a traceback)."""
from __future__ import annotations

import math
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.results.figure_presets import preset, style
from otafl_sdr.results.style import (arm_styles, clip01, figure, key_name, label_panels, legend_rows, log_axis,
                                     panel_title, save_figure, whole_rounds_axis)

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


def read_client_round_accuracy(path: Path) -> dict:
    """{whole client round: test accuracy} of a cell's rounds.jsonl: per client round the last accuracy the
    run recorded in it (Upcycled-FL's server-only step belongs to the client round before it; figures never
    place it at half a round); rows without a client round at their position."""
    out: dict = {}
    for x, v in read_accuracy_points(path):
        if v is not None:
            out[int(math.floor(x))] = v
    return out


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




KINDS = ("final_accuracy", "accuracy_last_k", "accuracy_rounds", "accuracy_vs_eps")
BANDS_UP_TO = 3              # arms a panel drawn with bands; beyond, dodged error bars at a few rounds
ERRORBAR_ROUNDS = 6          # rounds with error bars when there are more arms than that


def grid_columns(table) -> list:
    """The swept keys of a sweep table (its columns other than the standard ones)."""
    return [c for c in table.columns if c not in STANDARD_COLUMNS]


def plot_sweep(out: Path, table, labels: dict | None = None, grid: list | None = None, figure_preset=None,
               title: str = "", cells: Path | None = None) -> list:
    """final_accuracy, accuracy_rounds and (when the grid moves privacy.eps) accuracy_vs_eps, as PNG, PDF
    and SVG at the preset's size. Curves: the mechanisms (``labels``: name -> label) where the table has
    them, else the last swept key; panels: the other swept keys' points. Nothing is printed for a garbled
    cell's figures. ``cells``: where the cells' rows are read (default ``out``)."""
    import warnings

    import numpy as np
    p = preset(figure_preset)
    written = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for name, fig in sweep_figures(Path(out), table, labels or {}, grid, p, title, cells=cells).items():
            written += save_figure(p, fig, Path(out) / f"{name}.png")
    return written


def sweep_figures(out: Path, table, labels: dict | None = None, grid: list | None = None, figure_preset=None,
                  title: str = "", kinds=KINDS, cells: Path | None = None) -> dict:
    """{kind: matplotlib Figure} of the figures the table has data for (see ``plot_sweep``); the cells' rows
    read in ``cells`` (default ``out``)."""
    import pandas as pd
    p = preset(figure_preset)
    labels = labels or {}
    acc_all = pd.to_numeric(table["final_accuracy"], errors="coerce")     # a garbled cell's text: not done
    done = table[acc_all.notna()].assign(final_accuracy=acc_all[acc_all.notna()])
    if done.empty:
        return {}
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
    styles = arm_styles(names)
    named = curve in ("mechanism", "arm")
    label = {n: labels.get(n, n) if named else n for n in names}
    legend_title = None if named else key_name(curve)
    panels = _panels(done, facets)
    seeds = _seeds(done, facets)
    head = title or out.name
    figs = {}
    with style(p):
        if "final_accuracy" in kinds:
            figs["final_accuracy"] = plot_final(p, panels, styles, label, "final_accuracy",
                                                f"final test accuracy (mean, 95 % t-interval, {seeds})", head,
                                                legend_title or "")
        if "accuracy_last_k" in kinds and "accuracy_last_k" in done:
            figs["accuracy_last_k"] = plot_final(p, panels, styles, label, "accuracy_last_k",
                                                 f"test accuracy, last evaluations (mean, 95 % t-interval, {seeds})",
                                                 head, legend_title or "")
        if "accuracy_rounds" in kinds:
            figs["accuracy_rounds"] = plot_rounds_panels(p, Path(cells or out), panels, styles, label, head, legend_title)
        eps_facets = [k for k in facets if k not in ("privacy.eps", "privacy.delta")]
        if "accuracy_vs_eps" in kinds and "privacy.eps" in done and done["privacy.eps"].nunique() > 1:
            metric = "accuracy_last_k" if "accuracy_last_k" in done else "final_accuracy"
            figs["accuracy_vs_eps"] = plot_vs_eps(p, done, eps_facets, styles, label, metric, head, legend_title)
    return figs


def _seeds(done, facets: list) -> str:
    """'n = 3 seeds' (or 'n = 2-3 seeds' where the arms' points ran different numbers)."""
    counts = done.groupby(["_curve", *facets], dropna=False).size()
    lo, hi = int(counts.min()), int(counts.max())
    return f"n = {lo} seeds" if lo == hi else f"n = {lo}-{hi} seeds"


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


def _dodge(j: int, k: int, width: float) -> float:
    """Offset of the j-th of k arms at one x (centred), ``width`` the span they share."""
    return 0.0 if k <= 1 else width * (j - (k - 1) / 2) / (k - 1)


def plot_final(p, panels: list, styles: dict, label: dict, metric: str, xlabel: str, head: str, ylabel: str = ""):
    """One horizontal dot plot per panel: each arm's mean and 95 % interval of ``metric`` over seeds, one
    row per arm (labels on the y axis, so long names are never cut and no two bars overlap; ``ylabel``: the
    swept key the rows are values of)."""
    names = [n for n in styles if any((g["_curve"] == n).any() for _, g in panels)]
    fig, axes = figure(p, len(panels), row_height=max(p.row_height * 0.8, 0.17 * len(names) + 0.9))
    for ax, (ptitle, g) in zip(axes, panels):
        for j, n in enumerate(names):
            m, half = _mean_ci(g.loc[g["_curve"] == n, metric])
            if math.isfinite(m):
                lo, hi = clip01(m - half), clip01(m + half)
                st = styles[n]
                ax.errorbar([m], [-j], xerr=[[m - lo], [hi - m]], fmt=st.marker, color=st.colour)
        ax.set_yticks([-j for j in range(len(names))], [label[n] for n in names])
        ax.set_ylim(-len(names) + 0.5, 0.5)
        ax.grid(False, axis="y")
        if ptitle:
            ax.set_title(ptitle)
    lo, hi = min(ax.get_xlim()[0] for ax in axes), max(ax.get_xlim()[1] for ax in axes)
    for ax in axes:                   # one x scale for every panel: the grid points compare by eye
        ax.set_xlim(lo, hi)
    label_panels(p, fig, axes, xlabel, ylabel, f"{head}: {sum(len(g) for _, g in panels)} runs")
    return fig


def plot_rounds_panels(p, out: Path, panels: list, styles: dict, label: dict, head: str = "",
                       legend_title: str | None = None):
    """accuracy_rounds: test accuracy against whole client rounds, the mean over seeds per arm with its 95 %
    t-interval: a band for up to BANDS_UP_TO arms a panel, else error bars at a few rounds, dodged."""
    import numpy as np
    entries = len(styles)
    fig, axes = figure(p, len(panels), legend_rows=_legend_rows(p, entries, len(panels)))
    ns = set()
    for ax, (ptitle, g) in zip(axes, panels):
        curves = []
        for n in styles:
            dirs = g.loc[g["_curve"] == n, "dir"]
            runs = [r for r in (read_client_round_accuracy(out / str(d) / "rounds.jsonl") for d in dirs) if r]
            xs = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
            if xs:
                curves.append((n, xs, np.array([[r[x] for x in xs] for r in runs])))
        bands = len(curves) <= BANDS_UP_TO
        span = max((len(xs) for _, xs, _ in curves), default=1)
        for j, (n, xs, m) in enumerate(curves):
            st = styles[n]
            mean = m.mean(axis=0)
            ns.add(len(m))
            ax.plot(xs, mean, color=st.colour, marker=st.marker, ls=st.linestyle, label=label[n],
                    markevery=st.markevery(len(xs)))
            if len(m) < 2:
                continue
            half = t95(len(m)) * m.std(axis=0, ddof=1) / math.sqrt(len(m))
            lo, hi = clip01(mean - half), clip01(mean + half)
            if bands:
                ax.fill_between(xs, lo, hi, color=st.colour, alpha=0.12, linewidth=0)
            else:
                at = sorted(set(np.linspace(0, len(xs) - 1, min(ERRORBAR_ROUNDS, len(xs))).round().astype(int)))
                dx = _dodge(j, len(curves), 0.5 * max(1.0, span / ERRORBAR_ROUNDS))
                ax.errorbar([xs[i] + dx for i in at], mean[at], yerr=[mean[at] - lo[at], hi[at] - mean[at]],
                            fmt="none", ecolor=st.colour, elinewidth=0.8)
        whole_rounds_axis(ax.xaxis)
        if ptitle:
            ax.set_title(ptitle)
    method = _method(ns, "bands" if all(
        sum((g["_curve"] == n).any() for n in styles) <= BANDS_UP_TO for _, g in panels) else "bars")
    label_panels(p, fig, axes, "client round", "test accuracy", head,
                 f"{legend_title}; {method}" if legend_title else method)
    return fig


def _method(ns: set, what: str) -> str:
    """How the intervals were made, with their n: written on the figure (the legend's title)."""
    if not ns or max(ns) < 2:
        return "mean of 1 seed (no interval)"
    n = f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"
    return f"mean; {what}: 95 % t-interval, n = {n} seeds"


def _legend_rows(p, entries: int, panels: int) -> int:
    """Legend lines above the panels (one more for its title); none under a title (the legend is then right
    of the panels: style.label_panels)."""
    rows = 0 if p.title else legend_rows(p, entries, panels)
    return rows + 1 if rows else 0


def plot_vs_eps(p, done, facets: list, styles: dict, label: dict, metric: str, head: str = "",
                legend_title: str | None = None):
    """accuracy_vs_eps: ``metric`` (mean, 95 % t-interval) against the PLD ε spent (mean over seeds), one
    panel per point of ``facets`` and per δ (never two δ on one axis), error bars dodged; a log axis where the
    ε span a decade or more; lines only through three points or more."""
    import numpy as np
    import pandas as pd
    dcol = "delta" if "delta" in done else None
    if dcol:
        done = done.assign(_delta=pd.to_numeric(done[dcol], errors="coerce"))
    deltas = sorted({float(d) for d in done["_delta"] if d == d}) if dcol else []
    by = facets + (["_delta"] if len(deltas) > 1 else [])
    panels = ([("", done)] if not by else
              [(panel_title([k if k != "_delta" else "delta" for k in by], key if isinstance(key, tuple) else (key,)), g)
               for key, g in done.groupby(by, sort=True, dropna=False)])
    fig, axes = figure(p, len(panels), legend_rows=_legend_rows(p, len(styles), len(panels)))
    ns = set()
    for ax, (ptitle, g) in zip(axes, panels):
        series = []
        for n in styles:
            pts = []
            for _, ge in g[g["_curve"] == n].groupby("privacy.eps"):
                m, half = _mean_ci(ge[metric])
                x = float(np.nanmean(pd.to_numeric(ge["eps_pld"], errors="coerce")))
                if math.isfinite(m) and math.isfinite(x) and x > 0:
                    pts.append((x, m, half))
                    ns.add(int(pd.to_numeric(ge[metric], errors="coerce").notna().sum()))
            if pts:
                series.append((n, sorted(pts)))
        xs_all = [x for _, pts in series for x, _, _ in pts]
        logx = bool(xs_all) and max(xs_all) / min(xs_all) >= 10
        for j, (n, pts) in enumerate(series):
            st = styles[n]
            x, m, h = (np.array(v) for v in zip(*pts))
            off = _dodge(j, len(series), 0.12)
            xd = x * 10 ** off if logx else x + off * (max(xs_all) - min(xs_all) or 1.0)
            ax.errorbar(xd, m, yerr=[m - clip01(m - h), clip01(m + h) - m], color=st.colour, marker=st.marker,
                        ls=st.linestyle if len(pts) >= 3 else "none", label=label[n])
        if logx:
            ax.set_xscale("log")
            log_axis(ax.xaxis)
        if ptitle:
            ax.set_title(ptitle)
    delta = f", \u03b4 = {deltas[0]:g}" if len(deltas) == 1 else ""
    method = _method(ns, "bars")
    label_panels(p, fig, axes, f"\u03b5 spent (PLD{delta}, mean over seeds)", "test accuracy", f"{head}: accuracy against \u03b5",
                 f"{legend_title}; {method}" if legend_title else method)
    return fig
