"""audit.png: the canary statistic's two distributions (inserted / absent) and the trade-off curve they
imply (the Gaussian fit's mu_lower) against the accountant's Gaussian trade-off curve (mu of the ledger).

The measured curve's legend states the level the CLI prints (``--confidence``, family-wise over the audit's
bounds), and beside it the level each bound was computed at (Bonferroni: 1 - (1 - confidence) / bounds)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.privacy.audit_stats import gdp_tradeoff
from otafl_sdr.results.figure_presets import preset, style
from otafl_sdr.results.style import figure, save_figure


def confidence_label(audit: dict, stats: dict) -> tuple[str, str]:
    """('95 % lower bound', 'each of 2 bounds at 97.5 % (Bonferroni)'): the CLI's level, then the level each
    bound was computed at ('' where they are the same)."""
    family = audit.get("confidence", stats.get("confidence"))
    each, bounds = stats.get("confidence", family), audit.get("bounds")
    detail = f"each of {bounds} bounds at {100 * each:.4g} % (Bonferroni)" if bounds and each != family else ""
    return f"{100 * family:.4g} % lower bound", detail


def audit_figure(audit: dict, samples: dict, figure_preset=None):
    """The audit's two panels as a matplotlib Figure."""
    p = preset(figure_preset)
    name = audit["eps_lower_statistic"]
    inserted, absent = samples[name]
    with style(p):
        fig, (a1, a2) = figure(p, 2, sharey=False, row_height=p.row_height * 1.2, max_cols=1)
        both = np.concatenate([inserted, absent])
        lo, hi = np.percentile(both, [0.5, 99.5]) if both.size else (0, 1)
        bins = np.linspace(lo, hi if hi > lo else lo + 1, 50)
        a1.hist(absent, bins=bins, alpha=0.6, density=True, label=f"absent ({len(absent)})")
        a1.hist(inserted, bins=bins, alpha=0.6, density=True, label=f"inserted ({len(inserted)})")
        a1.set_xlabel(f"test statistic ({name})")
        a1.set_ylabel("density")
        a1.set_title(f"{audit['air']}: the canary statistic")
        a1.legend()
        alpha = np.linspace(0, 1, 401)
        fig_stats = audit["statistics"][name]
        a2.plot(alpha, 1 - alpha, "k:", lw=0.8, label="perfect privacy")
        a2.plot(alpha, gdp_tradeoff(alpha, audit["mu_booked"]), label=f"accountant: \u03bc = {audit['mu_booked']:.3f} "
                f"(\u03b5 {audit['eps_printed']:.3g})")
        mu_l = max(fig_stats["mu_lower"], 0.0)
        level, detail = confidence_label(audit, fig_stats)
        if np.isfinite(mu_l):
            a2.plot(alpha, gdp_tradeoff(alpha, mu_l), label=f"measured, {level}: "
                    f"\u03bc = {mu_l:.3f} (\u03b5 {audit['eps_lower']:.3g})")
        if np.isfinite(fig_stats["mu_hat"]):
            a2.plot(alpha, gdp_tradeoff(alpha, max(fig_stats["mu_hat"], 0.0)), "--",
                    label=f"measured, point estimate \u03bc = {fig_stats['mu_hat']:.3f}")
        a2.set_xlabel("type I error")
        a2.set_ylabel("type II error")
        a2.set_title("trade-off curves (Gaussian DP)")
        a2.legend(title=detail or None)
    return fig


def plot_audit(path, audit: dict, samples: dict, figure_preset=None) -> None:
    """audit.png (with its PDF and SVG beside it) of ``audit_figure``."""
    p = preset(figure_preset)
    save_figure(p, audit_figure(audit, samples, p), path, dpi=110, kept="audit.json is kept")
