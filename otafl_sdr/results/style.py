"""One style for every figure the testbed draws (a run's, a sweep's, a comparison's), and the one writer.

Each figure is saved as PNG (screens, 150 dpi) with a PDF and an SVG beside it (papers: vector, fonts
embedded as TrueType in the PDF, text kept as text in the SVG), each written through a temporary file.
Colours: the colour-blind-safe tab10 cycle, tab20 beyond ten curves, a sampled colormap beyond twenty
(never a repeated colour); accuracy bands clipped to [0, 1]; log axes labelled at 1, 2, 5 of each decade;
many curves go into facets (one per grid point) rather than onto one axis."""
from __future__ import annotations

import math
import os
from pathlib import Path

from otafl_sdr.errors import UserError

FORMATS = ("png", "pdf", "svg")
WIDTH = 6.4                     # inches: one panel (a column of a two-column paper at ~0.75 scale, a slide)
PANEL_WIDTH = 3.3               # inches per panel when there are several (a page width for three)
ASPECT = 0.62                   # height / width of one panel
RC = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 7.5, "xtick.labelsize": 8,
      "ytick.labelsize": 8, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
      "axes.spines.right": False, "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none",
      "figure.dpi": 100, "savefig.bbox": "tight", "legend.frameon": False, "lines.linewidth": 1.4,
      "lines.markersize": 4}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def pyplot():
    """matplotlib.pyplot on the Agg backend with the style applied."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update(RC)
    return plt


def colours(n: int) -> list:
    """n distinct colours (tab10, tab20, then a sampled colormap)."""
    import matplotlib
    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    cmap = matplotlib.colormaps["turbo"]
    return [cmap(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


def figure(panels: int = 1, width: float = WIDTH, aspect: float = ASPECT, sharey: bool = True,
           max_cols: int = 3):
    """(plt, fig, flat list of axes) for ``panels`` facets on a grid of at most ``max_cols`` columns; the
    unused axes of the last row are removed."""
    plt = pyplot()
    cols = min(max(panels, 1), max_cols)
    rows = math.ceil(max(panels, 1) / cols)
    panel_w = PANEL_WIDTH if cols > 1 else width
    fig, axes = plt.subplots(rows, cols, figsize=(panel_w * cols, max(2.2, panel_w * aspect) * rows + 0.5),
                             sharey=sharey, squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[panels:]:
        fig.delaxes(ax)
    return plt, fig, flat[:max(panels, 1)]


def clip01(x):
    """An accuracy band's edge clipped to [0, 1] (a t-interval over few seeds can leave it)."""
    import numpy as np
    return np.clip(x, 0.0, 1.0)


def log_axis(axis) -> None:
    """A log-scaled axis labelled with plain numbers (0.05, 0.1, 0.2, ...) at 1, 2 and 5 of each decade, or
    at every integer multiple where the data span less than a factor 6 (call it after plotting)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    lo, hi = axis.get_data_interval()
    narrow = lo > 0 and hi / lo < 6
    subs = tuple(float(i) for i in range(1, 10)) if narrow else (1.0, 2.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=30))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def legend(ax, n: int, **kw) -> None:
    """A legend that never hides the data: inside for a few entries, to the right of the axes beyond."""
    if not ax.get_legend_handles_labels()[0]:
        return
    if n <= 5:
        ax.legend(**kw)
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def label_panels(fig, axes: list, xlabel: str, ylabel: str, title: str = "") -> None:
    """Axis labels once per figure (on the panels' edges) where there are several panels, per axis for one;
    the legend (one per figure, of the first panel that has entries) to the right of several panels."""
    if len(axes) == 1:
        axes[0].set_xlabel(xlabel)
        axes[0].set_ylabel(ylabel)
        legend(axes[0], len(axes[0].get_legend_handles_labels()[0]))
    else:
        fig.supxlabel(xlabel, fontsize=9)
        fig.supylabel(ylabel, fontsize=9)
        for ax in axes:
            if ax.get_legend_handles_labels()[0]:
                h, lab = ax.get_legend_handles_labels()
                fig.legend(h, lab, loc="upper left", bbox_to_anchor=(1.0, 0.93))
                break
    if title:
        fig.suptitle(title, fontsize=9)


def panel_title(keys, values) -> str:
    """A panel's grid point, short: the last part of each dotted key (privacy.eps -> eps)."""
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v:g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
                     for k, v in zip(keys, values))


def save_figure(plt, fig, path, dpi: int = 150, kept: str = "the tables and the cells' results are kept") -> list:
    """Tight layout, saved to ``path`` (PNG) and beside it as PDF and SVG, each through a temporary file,
    then closed; returns the paths written. A full disk or a read-only folder is a one-line UserError
    naming what is ``kept`` (an old picture is never half-overwritten)."""
    path = Path(path)
    written = []
    try:
        fig.tight_layout()
        for fmt in FORMATS:
            target = path.with_suffix(f".{fmt}")
            tmp = target.with_name(f".{target.name}.tmp")
            try:
                fig.savefig(tmp, dpi=dpi, format=fmt, metadata=_metadata(fmt))
                os.replace(tmp, target)
            except OSError as e:
                try:
                    tmp.unlink(missing_ok=True)
                except OSError:
                    pass
                raise UserError(f"cannot write plot '{target}' ({e.strerror or type(e).__name__}); {kept}") from None
            written.append(target)
    finally:
        plt.close(fig)
    return written


def _metadata(fmt: str) -> dict:
    """No creation date in the vector files (a redrawn figure is byte-identical for the same data)."""
    return {"pdf": {"CreationDate": None}, "svg": {"Date": None}}.get(fmt, {})
