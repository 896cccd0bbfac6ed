"""audit.png: the canary statistic's two distributions (inserted / absent) and the trade-off curve they
imply (the Gaussian fit's mu_lower) against the accountant's Gaussian trade-off curve (mu of the ledger)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.privacy.audit_stats import gdp_tradeoff


def plot_audit(path, audit: dict, samples: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = audit["eps_lower_statistic"]
    inserted, absent = samples[name]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
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
    a2.plot(alpha, gdp_tradeoff(alpha, audit["mu_booked"]), label=f"accountant: mu={audit['mu_booked']:.3f} "
            f"(eps {audit['eps_printed']:.3g})")
    mu_l = max(fig_stats["mu_lower"], 0.0)
    if np.isfinite(mu_l):
        a2.plot(alpha, gdp_tradeoff(alpha, mu_l), label=f"measured, {100 * fig_stats['confidence']:.4g} % lower: "
                f"mu={mu_l:.3f} (eps {audit['eps_lower']:.3g})")
    if np.isfinite(fig_stats["mu_hat"]):
        a2.plot(alpha, gdp_tradeoff(alpha, max(fig_stats["mu_hat"], 0.0)), "--",
                label=f"measured, point estimate mu={fig_stats['mu_hat']:.3f}")
    a2.set_xlabel("type I error")
    a2.set_ylabel("type II error")
    a2.set_title("trade-off curves (Gaussian DP)")
    a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
