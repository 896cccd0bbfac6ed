"""The sweep's plots (final accuracy per arm, accuracy against round with 95 % bands), the t-interval
they and `otafl-sdr compare` share, and the tolerant readers of a cell's files (a garbled cell is shown
as not done, never a traceback)."""
from __future__ import annotations

import math
from pathlib import Path

from .errors import UserError


def read_summary(path: Path) -> dict:
    """A cell's summary.json as a dict; {} when it is unreadable, garbled or not a JSON object (the cell is
    then not 'done' and is resumed or re-run, never trusted)."""
    from .safe_files import load_json
    try:
        return load_json(path, "summary")
    except UserError:
        return {}


def read_accuracy_curve(path: Path) -> list:
    """Test accuracy per row of a cell's rounds.jsonl (None where a row has none, or is garbled)."""
    from .safe_files import loads, read_text
    try:
        lines = read_text(path, "rounds file").splitlines()
    except UserError:
        return []
    curve = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = loads(line, f"'{path}' line {i + 1}")
        except UserError:
            row = None
        v = row.get("test_accuracy") if isinstance(row, dict) else None
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        curve.append(float(v) if ok else None)
    return curve


def t95(n: int) -> float:
    """Student's t quantile of a two-sided 95 % interval from n values."""
    from scipy.stats import t
    return float(t.ppf(0.975, n - 1)) if n > 1 else float("nan")


def ci95_half(x) -> float:
    """Half-width of the 95 % t-interval of the mean of x (over seeds); nan for fewer than two values."""
    import numpy as np
    x = np.asarray(x, dtype=float)
    return t95(len(x)) * float(x.std(ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else float("nan")


def plot_sweep(out: Path, table) -> None:
    """final_accuracy.png (mean +- 95 % t-interval over seeds per arm) and accuracy_rounds.png (no warnings
    printed for a garbled cell's figures)."""
    import warnings

    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        _plot_sweep(out, table)


def _plot_sweep(out: Path, table) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    acc_all = pd.to_numeric(table["final_accuracy"], errors="coerce")     # a garbled cell's text: not done
    done = table[acc_all.notna()].assign(final_accuracy=acc_all[acc_all.notna()])
    if done.empty:
        return
    arms = list(dict.fromkeys(done["arm"]))
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(arms) + 2), 4))
    for j, a in enumerate(arms):
        acc = done[done["arm"] == a]["final_accuracy"].astype(float).to_numpy()
        half = ci95_half(acc) if len(acc) > 1 else 0.0
        ax.errorbar([j], [acc.mean()], yerr=[half], fmt="o", capsize=4)
    ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("final test accuracy (mean, 95 % CI over seeds)")
    ax.set_title(f"sweep {out.name}: {len(done)} runs")
    save_figure(plt, fig, out / "final_accuracy.png")
    fig, ax = plt.subplots(figsize=(7, 4))
    for a in arms:
        curves = []
        for d in done[done["arm"] == a]["dir"]:
            path = out / str(d) / "rounds.jsonl"
            if path.is_file():
                curves.append(read_accuracy_curve(path))
        n = min((len(c) for c in curves), default=0)
        if n == 0:
            continue
        m = np.array([[np.nan if v is None else v for v in c[:n]] for c in curves], dtype=float)
        evaluated = ~np.isnan(m).all(axis=0)         # run.eval_every > 1 leaves rounds without accuracy
        m = m[:, evaluated]
        x = np.arange(1, n + 1)[evaluated]
        if not len(x):
            continue
        mean = np.nanmean(m, axis=0)
        ax.plot(x, mean, label=a, marker="." if len(x) < 30 else None)
        if len(curves) > 1:
            half = t95(len(curves)) * np.nanstd(m, axis=0, ddof=1) / math.sqrt(len(curves))
            ax.fill_between(x, mean - half, mean + half, alpha=0.2)
    finish_plot(plt, fig, ax, "round (iteration)", "test accuracy", f"sweep {out.name}: mean and 95 % band over seeds",
                out / "accuracy_rounds.png")


def finish_plot(plt, fig, ax, xlabel: str, ylabel: str, title: str, path) -> None:
    """Labels, a small legend, tight layout; saved to ``path`` (110 dpi) and closed."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    save_figure(plt, fig, path)


def save_figure(plt, fig, path, dpi: int = 110, kept: str = "the tables and the cells' results are kept") -> None:
    """Tight layout, saved to ``path`` through a temporary file and closed; a full disk or a read-only
    folder is a one-line UserError naming what is ``kept`` (the old picture is never half-overwritten)."""
    import os
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.tight_layout()
        fig.savefig(tmp, dpi=dpi, format="png")
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise UserError(f"cannot write plot '{path}' ({e.strerror or type(e).__name__}); {kept}") from None
    finally:
        plt.close(fig)
