"""The sweep's plots (final accuracy per arm, accuracy against round with 95 % bands) and the t-interval
they and `otafl-sdr compare` share."""
from __future__ import annotations

import json
import math
from pathlib import Path


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
    """final_accuracy.png (mean +- 95 % t-interval over seeds per arm) and accuracy_rounds.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    done = table[table["final_accuracy"].notna()]
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
    fig.tight_layout()
    fig.savefig(out / "final_accuracy.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    for a in arms:
        curves = []
        for d in done[done["arm"] == a]["dir"]:
            path = out / d / "rounds.jsonl"
            if path.is_file():
                rs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
                curves.append([r.get("test_accuracy") for r in rs])
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
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
