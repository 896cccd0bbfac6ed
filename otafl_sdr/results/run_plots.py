"""A run's figures against client rounds (style and writer: ``plot_style``; each PNG with a PDF and an SVG):
accuracy (capped-jammer and lost rounds marked), loss, epsilon (one curve per accountant, the target, a log
axis labelled at 1, 2, 5 per decade) and nmse (the measured aggregate NMSE and its theory, eq. 15-16 of
paper 000, over the iterations that carried an aggregate: Upcycled-FL's server-only steps carry none).

x is in client rounds (``run.rounds`` counts them): a row's ``client_round``, + 0.5 for a server-only
iteration (Upcycled-FL's even steps sit between two client rounds); the iteration where a row has none."""
from __future__ import annotations

import math
from pathlib import Path

from otafl_sdr.results.style import figure, log_axis, save_figure

KEPT = "the rows, ledger, checkpoint and summary are kept: `otafl-sdr report` redraws the plots"


def title(summary: dict | None) -> str:
    if not summary:
        return ""
    eps_t = summary.get("eps_target")
    return (f"{summary.get('run_name', '')} {summary.get('algorithm', '')} + {summary.get('power_policy', '')} "
            f"[{summary.get('air', '')}]  target eps {eps_t if eps_t is not None else 'inf'}, "
            f"delta {summary.get('delta', '')}, unit {summary.get('privacy_unit', '')}").strip()


def client_round_x(rows: list[dict]) -> list[float]:
    """Each row's position in client rounds (see the module docstring)."""
    xs = []
    for i, row in enumerate(rows):
        cr = row.get("client_round")
        if isinstance(cr, int) and not isinstance(cr, bool) and 0 <= cr < 10**9:
            xs.append(cr + (0.5 if row.get("uses_clients") is False else 0.0))
        else:
            xs.append(float(row.get("round", i + 1)))
    return xs


def connected(rows: list[dict], x: list[float], key: str) -> tuple[list, list]:
    """(xs, values) over the rows where ``key`` is a finite number: one line through them (a row without
    it, e.g. a server-only step's NMSE, is skipped rather than breaking the line into dots)."""
    pts = [(xi, float(row[key])) for xi, row in zip(x, rows) if isinstance(row.get(key), (int, float))
           and not isinstance(row.get(key), bool) and math.isfinite(row[key])]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_rounds(out: Path, rows: list[dict], summary: dict | None = None) -> list[Path]:
    """accuracy.png, loss.png, epsilon.png and nmse.png (with .pdf and .svg) into ``out``; returns the PNGs.
    Drawing figures out of hostile rows (1e308, NaN) warns nothing: a failure is one UserError line."""
    import warnings

    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _plot_rounds(Path(out), rows, summary)


def _plot_rounds(out: Path, rows: list[dict], summary: dict | None) -> list[Path]:
    written: list[Path] = []
    if not rows:
        return written
    x = client_round_x(rows)
    head = title(summary)
    xlabel = "client round" + (" (server-only steps at +0.5)" if any(r.get("uses_clients") is False for r in rows)
                               else "")

    def series(key):
        return connected(rows, x, key)

    def finish(plt, fig, ax, name, ylabel):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if head:
            ax.set_title(head, fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        save_figure(plt, fig, out / name, kept=KEPT)
        written.append(out / name)

    plt, fig, (ax,) = figure()
    ax.plot(*series("test_accuracy"), marker=".", label="test accuracy")
    capped = [xi for xi, row in zip(x, rows) if row.get("cj_capped")]
    lost = [xi for xi, row in zip(x, rows) if row.get("lost")]
    if capped:
        ax.vlines(capped, 0, 1, colors="tab:orange", alpha=0.3, label="jammer capped (below design)")
    if lost:
        ax.vlines(lost, 0, 1, colors="tab:red", alpha=0.5, label="lost round")
    if summary and isinstance(summary.get("noise_free_accuracy"), (int, float)):
        ax.axhline(summary["noise_free_accuracy"], color="gray", ls="--", label="noise-free reference")
    finish(plt, fig, ax, "accuracy.png", "test accuracy")

    plt, fig, (ax,) = figure()
    ax.plot(*series("train_loss"), marker=".", label="training loss (all clients' data; evaluation only)")
    finish(plt, fig, ax, "loss.png", "training loss")

    plt, fig, (ax,) = figure()
    eps_keys = sorted({k for row in rows for k in row if k.startswith("eps_")})
    for k in eps_keys:
        xs, ys = series(k)
        xs, ys = [a for a, b in zip(xs, ys) if b > 0], [b for b in ys if b > 0]    # a log axis: eps > 0
        if xs:
            ax.plot(xs, ys, marker=".", label=k[4:])
    if summary and isinstance(summary.get("eps_target"), (int, float)) and summary["eps_target"] > 0:
        ax.axhline(summary["eps_target"], color="black", ls="--", label=f"target {summary['eps_target']:g}")
    if ax.get_lines():
        ax.set_yscale("log")
        log_axis(ax.yaxis)
    delta = summary.get("delta") if summary else None
    finish(plt, fig, ax, "epsilon.png", "epsilon spent" + (f" (delta = {delta:g})" if isinstance(delta, float)
                                                           else " (at the run's delta)"))

    plt, fig, (ax,) = figure()
    xs, ys = series("aggregate_nmse")
    ax.plot(xs, ys, marker=".", label="measured")
    xt, yt = series("aggregate_nmse_theory")
    ax.plot(xt, yt, ls="--", color="black", label="theory: sigma_eff^2 d / ||sum g_i u_i||^2")
    if any(v > 0 for v in ys + yt):
        ax.set_yscale("log")
        log_axis(ax.yaxis)
    finish(plt, fig, ax, "nmse.png", "aggregate NMSE (evaluation only)")
    return written
