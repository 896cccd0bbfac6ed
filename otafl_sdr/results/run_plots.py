"""A run's figures against client rounds (style and writer: ``results.style``; each PNG with a PDF and an
SVG): accuracy (capped-jammer and lost rounds marked), loss, epsilon (one curve per accountant, the target, a
log axis labelled at 1, 2, 5 per decade; ε with its δ in the label) and nmse (the measured aggregate NMSE and
its theory, eq. 15-16 of paper 000, over the iterations that carried an aggregate).

x is in whole client rounds (``run.rounds`` counts them) for every algorithm: a figure's value at client round
k is the last one the run recorded in that client round (Upcycled-FL's server-only step follows its client
round and costs no client round: its model is the one drawn at k, never at k + 0.5); a row without a client
round is placed at its iteration."""
from __future__ import annotations

import math
from pathlib import Path

from otafl_sdr.results.figure_presets import FigurePreset, preset, style
from otafl_sdr.results.style import figure, label_panels, log_axis, save_figure, whole_rounds_axis

KEPT = "the rows, ledger, checkpoint and summary are kept: `otafl-sdr report` redraws the plots"
KINDS = ("accuracy", "loss", "epsilon", "nmse")


def title(summary: dict | None) -> str:
    if not summary:
        return ""
    eps_t = summary.get("eps_target")
    target = "\u221e" if eps_t is None else f"{eps_t:g}" if isinstance(eps_t, (int, float)) else str(eps_t)
    return (f"{summary.get('algorithm', '')} + {summary.get('power_policy', '')} [{summary.get('air', '')}], "
            f"target \u03b5 = {target}").strip()


def client_round_of(row: dict, i: int) -> int:
    """A row's whole client round; its iteration (``round``, else its position) where it has none."""
    cr = row.get("client_round")
    if isinstance(cr, int) and not isinstance(cr, bool) and 0 <= cr < 10**9:
        return cr
    r = row.get("round")
    return r if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 10**9 else i + 1


def per_client_round(rows: list[dict], key: str) -> tuple[list, list]:
    """(client rounds, values): per whole client round the last finite number ``key`` holds in its rows (a
    server-only step's row without it, e.g. its NMSE, leaves the client round's own value)."""
    last: dict[int, float] = {}
    for i, row in enumerate(rows):
        v = row.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            last[client_round_of(row, i)] = float(v)
    xs = sorted(last)
    return xs, [last[x] for x in xs]


def plot_rounds(out: Path, rows: list[dict], summary: dict | None = None, figure_preset=None) -> list[Path]:
    """accuracy.png, loss.png, epsilon.png and nmse.png (with .pdf and .svg) into ``out``; returns the PNGs.
    Drawing figures out of hostile rows (1e308, NaN) warns nothing: a failure is one UserError line."""
    import warnings

    import numpy as np
    p = preset(figure_preset)
    written: list[Path] = []
    if not rows:
        return written
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for kind in KINDS:
            fig = run_figure(kind, rows, summary, p)
            save_figure(p, fig, Path(out) / f"{kind}.png", kept=KEPT)
            written.append(Path(out) / f"{kind}.png")
    return written


def run_figure(kind: str, rows: list[dict], summary: dict | None = None, figure_preset=None):
    """One of a run's figures (``KINDS``) as a matplotlib Figure drawn at the preset's size."""
    from otafl_sdr.errors import UserError
    if kind not in KINDS:
        raise UserError(f"kind {kind!r} is not a run's figure; known: {', '.join(KINDS)}")
    p = preset(figure_preset)
    with style(p):
        return {"accuracy": _accuracy, "loss": _loss, "epsilon": _epsilon, "nmse": _nmse}[kind](p, rows, summary or {})


def _finish(p: FigurePreset, fig, ax, ylabel: str, summary: dict) -> None:
    whole_rounds_axis(ax.xaxis)
    label_panels(p, fig, [ax], "client round", ylabel, title(summary))


def _accuracy(p, rows, summary):
    n = 2 + sum(bool(rows and any(r.get(k) for r in rows)) for k in ("cj_capped", "lost"))
    fig, (ax,) = figure(p, legend_rows=0 if n <= 3 else 2)
    ax.plot(*per_client_round(rows, "test_accuracy"), marker=".", label="test accuracy")
    capped = sorted({client_round_of(r, i) for i, r in enumerate(rows) if r.get("cj_capped")})
    lost = sorted({client_round_of(r, i) for i, r in enumerate(rows) if r.get("lost")})
    if capped:
        ax.vlines(capped, 0, 1, colors="tab:orange", alpha=0.3, label="jammer capped (below design)")
    if lost:
        ax.vlines(lost, 0, 1, colors="tab:red", alpha=0.5, label="lost round")
    if isinstance(summary.get("noise_free_accuracy"), (int, float)):
        ax.axhline(summary["noise_free_accuracy"], color="gray", ls="--", label="noise-free reference")
    _finish(p, fig, ax, "test accuracy", summary)
    return fig


def _loss(p, rows, summary):
    fig, (ax,) = figure(p)
    ax.plot(*per_client_round(rows, "train_loss"), marker=".", label="all clients' data (evaluation only)")
    _finish(p, fig, ax, "training loss", summary)
    return fig


def _epsilon(p, rows, summary):
    eps_keys = sorted({k for row in rows for k in row if k.startswith("eps_")})
    fig, (ax,) = figure(p, legend_rows=0 if len(eps_keys) + 1 <= 3 else 2)
    for k in eps_keys:
        xs, ys = per_client_round(rows, k)
        xs, ys = [a for a, b in zip(xs, ys) if b > 0], [b for b in ys if b > 0]    # a log axis: eps > 0
        if xs:
            ax.plot(xs, ys, marker=".", label=k[4:].upper() if k[4:] in ("pld", "rdp") else k[4:])
    if isinstance(summary.get("eps_target"), (int, float)) and summary["eps_target"] > 0:
        ax.axhline(summary["eps_target"], color="black", ls="--", label=f"target {summary['eps_target']:g}")
    if ax.get_lines():
        ax.set_yscale("log")
        log_axis(ax.yaxis)
    delta = summary.get("delta")
    _finish(p, fig, ax, "\u03b5 spent" + (f" (\u03b4 = {delta:g})" if isinstance(delta, float)
                                          else " (at the run's \u03b4)"), summary)
    return fig


def _nmse(p, rows, summary):
    fig, (ax,) = figure(p)
    xs, ys = per_client_round(rows, "aggregate_nmse")
    ax.plot(xs, ys, marker=".", label="measured")
    xt, yt = per_client_round(rows, "aggregate_nmse_theory")
    ax.plot(xt, yt, ls="--", color="black", label="theory (paper 000, eq. 15-16)")
    if any(v > 0 for v in ys + yt):
        ax.set_yscale("log")
        log_axis(ax.yaxis)
    _finish(p, fig, ax, "aggregate NMSE", summary)
    return fig
