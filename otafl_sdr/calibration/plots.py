"""Calibration plots (matplotlib, Agg): the received pilot constellation per transmitter, the channel
estimates with their standard errors, and the power sweep with its fit. Each function writes one PNG
and returns its path."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

MAX_POINTS = 1500          # pilot points drawn per transmitter


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_constellations(results, path: str | Path) -> Path:
    """One panel per transmitter: received pilots z_k conj(x_k)/|x_k|^2 (referred like h), the estimate
    h_hat with a 3-sigma circle, and the ground truth when known (loopback)."""
    plt = _plt()
    n = len(results)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    for ax, r in zip(axes.ravel(), results):
        e = r.estimates[0]
        pts = e.points[:: max(1, len(e.points) // MAX_POINTS)]
        ax.plot(pts.real, pts.imag, ".", ms=1.5, alpha=0.4, color="tab:blue", label="received pilots")
        ax.plot(r.h.real, r.h.imag, "x", color="tab:red", ms=9, mew=2, label="estimate")
        th = np.linspace(0, 2 * np.pi, 100)
        ax.plot(r.h.real + 3 * r.h_std * np.cos(th), r.h.imag + 3 * r.h_std * np.sin(th), "-", color="tab:red",
                lw=0.8)
        if r.truth is not None and len(r.estimates) == 1:
            t = r.truth["h"]
            ax.plot(t.real, t.imag, "+", color="k", ms=9, mew=1.5, label="truth")
        ax.axhline(0, color="0.8", lw=0.5)
        ax.axvline(0, color="0.8", lw=0.5)
        ax.set_aspect("equal", "datalim")
        ax.set_title(f"{r.name}: SNR {r.snr_db:.1f} dB", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=6, loc="best")
    fig.suptitle("received pilot constellation (per unit digital amplitude)", fontsize=10)
    return _save(plt, fig, path)


def plot_channels(results, path: str | Path) -> Path:
    """|h_hat| and arg h_hat per transmitter with +-2 standard-error bars (truth as crosses if known)."""
    plt = _plt()
    names = [r.name for r in results]
    x = np.arange(len(results))
    h = np.array([r.h for r in results])
    s = np.array([r.h_std for r in results])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(5.0, 0.7 * len(results) + 2), 5.5), sharex=True)
    a1.errorbar(x, np.abs(h), yerr=2 * s, fmt="o", capsize=3, label="estimate +- 2 s.e.")
    a2.errorbar(x, np.angle(h), yerr=2 * s / np.maximum(np.abs(h), 1e-300), fmt="o", capsize=3)
    truth = [r.truth for r in results]
    if all(t is not None for t in truth):
        ht = np.array([t["h"] for t in truth])
        a1.plot(x, np.abs(ht), "k+", ms=10, label="truth")
        a2.plot(x, np.angle(ht), "k+", ms=10)
    a1.set_ylabel("|h| (per unit amplitude)")
    a2.set_ylabel("arg h (rad)")
    a2.set_xticks(x)
    a2.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
    a1.legend(fontsize=8)
    a1.set_title("channel estimates")
    return _save(plt, fig, path)


def plot_power(sweep, path: str | Path) -> Path:
    """Received power against 20 log10(amplitude), one line per TX gain, with the fitted model; points
    left out of the fit (compression) are hollow."""
    plt = _plt()
    n = len(sweep.fits)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.0 * rows), squeeze=False)
    for ax, (name, f) in zip(axes.ravel(), sweep.fits.items()):
        a_db = 20 * np.log10(f.amplitude)
        for j, g in enumerate(np.unique(f.gain_db)):
            sel = f.gain_db == g
            col = f"C{j}"
            ax.plot(a_db[sel & f.used], f.rx_power_db[sel & f.used], "o", color=col, ms=4, label=f"G = {g:g} dB")
            ax.plot(a_db[sel & ~f.used], f.rx_power_db[sel & ~f.used], "o", mfc="none", color=col, ms=4)
            grid = np.linspace(a_db.min(), a_db.max(), 20)
            ax.plot(grid, f.predict_db(10 ** (grid / 20), g), "-", color=col, lw=0.8)
        ax.set_title(f"{name}: {f.k_amp:.3f} dB/dB, gain {f.k_gain:.3f}, rms {f.rms_db:.2f} dB", fontsize=8)
        ax.set_xlabel("20 log10 amplitude (dB)", fontsize=8)
        ax.set_ylabel("received power (dB)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    return _save(plt, fig, path)
