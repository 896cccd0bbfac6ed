"""The received reference's constellation as an image (issue 36, item 4): the live view's picture of the link
in one round, for TensorBoard and MLflow (results/tracking.py).

The points are the round's received preamble symbols divided by the ones sent (phy/modem.DemodResult.reference,
carried in the row's ``link_health.reference``): on a link that still matches its calibration they sit in a
tight cluster at 1 (0 dB, 0 rad, marked x); the cluster's offset is the reference gain and phase, its spread
the noise, an arc a residual carrier offset. Drawn with matplotlib's Agg canvas (no pyplot state).

Shapes: ``points`` (m,) complex; the image (H, W, 3) uint8 RGB."""
from __future__ import annotations

import numpy as np

SIZE_IN, DPI = 4.0, 80          # 320 x 320 pixels
CONSTELLATION_TAG = "link/constellation"     # the image's tag (TensorBoard) and key (MLflow)


def constellation_image(points: np.ndarray, title: str = "") -> np.ndarray:
    """(m,) complex points -> (H, W, 3) uint8 RGB image of their constellation (module doc)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    z = np.asarray(points, dtype=np.complex128).ravel()
    fig = Figure(figsize=(SIZE_IN, SIZE_IN), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    t = np.linspace(0, 2 * np.pi, 181)
    ax.plot(np.cos(t), np.sin(t), color="0.8", lw=0.8)
    ax.axhline(0, color="0.85", lw=0.6)
    ax.axvline(0, color="0.85", lw=0.6)
    ax.scatter(z.real, z.imag, s=6, color="tab:blue", alpha=0.7, label="received / sent")
    ax.plot([1.0], [0.0], marker="x", color="tab:red", ms=9, mew=2, ls="", label="calibration holds")
    lim = max(1.5, float(np.max(np.abs(z))) * 1.1 if len(z) else 1.5)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.set_xlabel("in-phase")
    ax.set_ylabel("quadrature")
    ax.legend(loc="lower left", fontsize=7)
    if title:
        ax.set_title(title, fontsize=8)
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


def reference_title(step: int, link: dict) -> str:
    """The image's title: the client round and the reference's gain and phase (link_health's figures)."""
    parts = [f"client round {step}"]
    if isinstance(link.get("gain_db"), (int, float)):
        parts.append(f"gain {link['gain_db']:+.2f} dB")
    if isinstance(link.get("phase_rad"), (int, float)):
        parts.append(f"phase {link['phase_rad']:+.3f} rad")
    return ", ".join(parts)


def reference_image(t):
    """(H, W, 3) uint8 of a TrackedRound's constellation (results/tracked_row.py), or None when its row carries
    no reference."""
    if t.reference is None or not len(t.reference):
        return None
    return constellation_image(t.reference, reference_title(t.step, t.link))


__all__ = ["CONSTELLATION_TAG", "constellation_image", "reference_image", "reference_title"]
