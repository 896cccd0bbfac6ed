"""One style for every figure the testbed draws (a run's, a sweep's, a comparison's), and the one writer.

Sizes and fonts come from a figure preset (``figure_presets``: ``screen``, ``ieee-single``, ``ieee-double``;
``--figure NAME``): the figure is exactly the preset's width (constrained layout, no tight bounding box that
grows it), every text at least 7 pt at that size, the legend inside the figure. Figures are matplotlib
``Figure`` objects (no pyplot state). Each is saved as PNG (screens, 150 dpi) with a PDF and an SVG beside it
(papers: vector, fonts embedded as TrueType in the PDF, text kept as text in the SVG), each written through a
temporary file. Arms: the colour-blind-safe tab10 cycle (tab20 beyond ten, a sampled colormap beyond twenty:
never a repeated colour), each with its own marker and line style, so arms whose values coincide stay
visible (their markers staggered along the line); accuracy bands clipped to [0, 1]; log axes labelled at 1,
2, 5 of each decade; many curves go into facets (one per grid point) rather than onto one axis."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.results.figure_presets import FigurePreset, preset, style  # noqa: F401 (style: the drawers' context)

FORMATS = ("png", "pdf", "svg")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (8, 2)), (0, (3, 1, 3, 4)))
GREEK = {"eps": "\u03b5", "delta": "\u03b4", "sigma": "\u03c3", "alpha": "\u03b1", "mu": "\u03bc", "tau": "\u03c4",
         "lambda": "\u03bb"}


@dataclass(frozen=True)
class ArmStyle:
    """How one arm is drawn: colour, marker and line style each its own, and where its markers sit."""
    colour: tuple
    marker: str
    linestyle: object
    index: int
    of: int

    def markevery(self, points: int):
        """Markers staggered so coinciding arms' markers do not hide each other: every ``step``-th point (one
        step per arm, at most about 15 markers on a line), starting at this arm's offset (distinct while there
        are at least as many points as arms)."""
        step = max(1, min(self.of, points), math.ceil(points / 15))
        return (self.index % step, step)


def colours(n: int) -> list:
    """n distinct colours (tab10, tab20, then a sampled colormap)."""
    import matplotlib
    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    cmap = matplotlib.colormaps["turbo"]
    return [cmap(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


def arm_styles(names: list) -> dict:
    """{name: ArmStyle}: a distinct (colour, marker, line style) per arm, each part distinct as long as the
    cycles last (10 markers, 8 line styles)."""
    cs = colours(len(names))
    return {n: ArmStyle(cs[i], MARKERS[i % len(MARKERS)], LINESTYLES[i % len(LINESTYLES)], i, len(names))
            for i, n in enumerate(names)}


def figure(p: FigurePreset, panels: int = 1, row_height: float | None = None, sharey: bool = True,
           legend_rows: int = 0, max_cols: int | None = None):
    """(fig, flat list of axes): a matplotlib Figure of the preset's width with ``panels`` facets on a grid
    of at most the preset's columns (the unused axes of the last row removed); ``legend_rows``: lines of a
    legend above the panels, for which the figure is made taller. Call it inside ``style(p)``."""
    from matplotlib.figure import Figure
    cols = min(max(panels, 1), max_cols or p.max_cols)
    rows = math.ceil(max(panels, 1) / cols)
    height = (row_height or p.row_height) * rows + legend_rows * p.small_font * 1.5 / 72
    if p.title:
        height += p.font * 1.6 / 72
    fig = Figure(figsize=(p.width, height), layout="constrained")
    axes = fig.subplots(rows, cols, sharey=sharey, squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[panels:]:
        fig.delaxes(ax)
    return fig, flat[:max(panels, 1)]


def legend_rows(p: FigurePreset, entries: int, panels: int) -> int:
    """Lines of the legend above the panels (0: it fits inside the one panel)."""
    if entries == 0 or (panels == 1 and entries <= 3):
        return 0
    return math.ceil(entries / legend_columns(p, entries))


def legend_columns(p: FigurePreset, entries: int) -> int:
    return max(1, min(entries, 2 if p.width < 4 else 4))


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


def whole_rounds_axis(axis) -> None:
    """An axis of client rounds: ticks at whole rounds only, at most 5 (a narrow panel's labels must not touch)."""
    from matplotlib.ticker import MaxNLocator
    axis.set_major_locator(MaxNLocator(nbins=4, integer=True, min_n_ticks=2))


def label_panels(p: FigurePreset, fig, axes: list, xlabel: str, ylabel: str, title: str = "",
                 legend_title: str | None = None) -> None:
    """Axis labels once per figure (on the panels' edges) where there are several panels, per axis for one;
    one legend (of the first panel that has entries): inside one panel with a few entries, else above the
    panels, or right of them, centred, under a title (never outside the figure's width, never into the
    figure's title); the title where the preset has titles."""
    handles, labels = [], []
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            break
    if len(axes) == 1:
        axes[0].set_xlabel(xlabel)
        axes[0].set_ylabel(ylabel)
    else:
        fig.supxlabel(xlabel)
        fig.supylabel(ylabel)
    if handles:
        if legend_rows(p, len(handles), len(axes)) == 0:
            axes[0].legend(handles, labels, title=legend_title)
        else:
            titled = bool(title and p.title)       # a title above: the legend to the right (inside the width),
            if titled and legend_title:            # its title one phrase a line, centred beside the panels (at the
                legend_title = legend_title.replace("; ", ";\n")     # top it would run into the figure's title)
            fig.legend(handles, labels, loc="outside right center" if titled else "outside upper center",
                       ncols=1 if titled else legend_columns(p, len(handles)), title=legend_title)
    if title and p.title:
        fig.suptitle(title)


def key_name(key: str) -> str:
    """A config key as a figure names it: its last part, Greek where it is a symbol (privacy.eps -> ε)."""
    last = key.rsplit(".", 1)[-1]
    return GREEK.get(last, last.replace("_", " "))


def panel_title(keys, values) -> str:
    """A panel's grid point, short: each key's name (privacy.eps -> ε) and value."""
    return ", ".join(f"{key_name(k)} = {v:g}" if isinstance(v, float) else f"{key_name(k)} = {v}"
                     for k, v in zip(keys, values))


def save_figure(p: FigurePreset, fig, path, dpi: int = 150,
                kept: str = "the tables and the cells' results are kept") -> list:
    """``fig`` saved to ``path`` (PNG) and beside it as PDF and SVG at the preset's size, each through a
    temporary file; returns the paths written. A full disk or a read-only folder is a one-line UserError
    naming what is ``kept`` (an old picture is never half-overwritten)."""
    path = Path(path)
    written = []
    with style(p):
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
    return written


def _metadata(fmt: str) -> dict:
    """No creation date in the vector files (a redrawn figure is byte-identical for the same data)."""
    return {"pdf": {"CreationDate": None}, "svg": {"Date": None}}.get(fmt, {})
