"""Figure presets: the page size a figure is drawn for (``--figure NAME`` on every command that draws).

A preset fixes the figure's width (the saved PDF is exactly that wide: no tight bounding box that grows it),
the height of one row of panels, and the fonts in points at that size, so that printed at 100 % every text is
at least ``min_font`` points. ``screen`` is the results pages' and a run's report (a screen or a slide);
``ieee-single`` one column of an IEEE two-column paper (3.5 in), ``ieee-double`` the full text width
(7.16 in; IEEE author guidelines: figures 3.5 in or 7.16 in wide, text in them 8 pt, never below 7 pt)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from otafl_sdr.errors import UserError


@dataclass(frozen=True)
class FigurePreset:
    name: str
    width: float            # inches: the figure's (and the saved PDF's) width
    row_height: float       # inches per row of panels
    max_cols: int           # panels per row at most
    font: float             # points: labels, titles
    small_font: float       # points: tick labels, legend (never below min_font)
    min_font: float         # points: the smallest text the preset allows
    title: bool             # a figure title (a journal's caption carries it instead)

    def rc(self) -> dict:
        """The matplotlib rcParams of this preset (used through ``style``, never set globally)."""
        return {"font.size": self.font, "axes.titlesize": self.font, "axes.labelsize": self.font,
                "figure.titlesize": self.font, "figure.labelsize": self.font,
                "legend.fontsize": self.small_font, "legend.title_fontsize": self.small_font,
                "xtick.labelsize": self.small_font, "ytick.labelsize": self.small_font,
                "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
                "axes.spines.top": False, "axes.spines.right": False, "axes.linewidth": 0.6,
                "xtick.major.width": 0.6, "ytick.major.width": 0.6,
                "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none", "figure.dpi": 100,
                "savefig.bbox": None, "savefig.pad_inches": 0.02, "figure.constrained_layout.use": True,
                "figure.constrained_layout.h_pad": 0.02, "figure.constrained_layout.w_pad": 0.02,
                "legend.frameon": False, "legend.handlelength": 2.6, "legend.borderaxespad": 0.3,
                "legend.columnspacing": 1.0, "lines.linewidth": 1.2 if self.width < 4 else 1.4,
                "lines.markersize": 3.5 if self.width < 4 else 4.0, "errorbar.capsize": 2.5,
                "mathtext.default": "regular"}


PRESETS = {
    "screen": FigurePreset("screen", width=6.4, row_height=3.2, max_cols=3, font=9.0, small_font=8.0,
                           min_font=7.0, title=True),
    "ieee-single": FigurePreset("ieee-single", width=3.5, row_height=2.3, max_cols=2, font=8.0, small_font=7.0,
                                min_font=7.0, title=False),
    "ieee-double": FigurePreset("ieee-double", width=7.16, row_height=2.4, max_cols=3, font=8.0,
                                small_font=7.0, min_font=7.0, title=False),
}
DEFAULT = "screen"


def preset(name: str | FigurePreset | None = None) -> FigurePreset:
    """The preset called ``name`` (None: the default); an unknown name is one UserError naming the known ones."""
    if isinstance(name, FigurePreset):
        return name
    if name is None:
        return PRESETS[DEFAULT]
    if name not in PRESETS:
        from otafl_sdr.errors import did_you_mean
        raise UserError(f"--figure {name!r} is not a figure preset{did_you_mean(str(name), PRESETS)}; "
                        f"known: {', '.join(PRESETS)}")
    return PRESETS[name]


@contextlib.contextmanager
def style(p: FigurePreset):
    """rcParams of preset ``p`` for what is drawn and saved inside (matplotlib.rc_context: nothing global
    changes)."""
    import matplotlib
    with matplotlib.rc_context(p.rc()):
        yield p


def add_figure_argument(parser) -> None:
    """``--figure PRESET`` for a command that draws figures."""
    parser.add_argument("--figure", default=DEFAULT, metavar="PRESET",
                        help=f"figure size and fonts: {', '.join(PRESETS)} (IEEE: one column 3.5 in, two "
                             f"columns 7.16 in, fonts >= 7 pt at that size)")
