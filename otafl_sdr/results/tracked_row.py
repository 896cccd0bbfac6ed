"""What the trackers (TensorBoard, MLflow: results/tracking.py) take from one round's row (issue 36, item 4).

The step is the client round (``client_round``: what ``run.rounds`` counts), never the iteration, so runs of
different algorithms line up. Every tag has one value per step: a server-only iteration (Upcycled-FL's even
steps: ``uses_clients`` false, the same client round as the iteration before it) writes its figures under
``server_step/``. Scalars: every finite number of the row (booleans left out; ``round`` as ``iteration``);
the uhd air's ``link_health`` (reference statistics only, never client data) as ``link/<figure>`` and, per
client (``air.coherence``: ``link_health.clients``), ``link/client_<i>/<figure>``; its ``reference`` (the
received reference's constellation, calibration/link_health.py) is returned as points for an image.

Shapes: ``TrackedRound.reference`` (m,) complex or None; ``scalars`` {tag: float}."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

CLIENT_FIGURES = ("phase_rad", "phase_std", "cfo_hz", "cfo_std_hz", "gain_db", "gain_db_std", "tracked_cfo_hz")
SERVER_STEP = "server_step/"


@dataclass
class TrackedRound:
    """One row as the trackers write it: ``step`` (the client round), ``scalars`` {tag: value}, ``reference``
    ((m,) complex received-over-sent reference symbols, or None), ``link`` (the row's link_health or {})."""

    step: int
    scalars: dict = field(default_factory=dict)
    reference: np.ndarray | None = None
    link: dict = field(default_factory=dict)


def _number(v) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def tracked(row: dict) -> TrackedRound:
    """The row's step, scalars and constellation points (module doc)."""
    step = int(row.get("client_round") or row.get("round") or 0)
    prefix = SERVER_STEP if row.get("uses_clients") is False else ""
    scalars: dict[str, float] = {}
    for k, v in row.items():
        if k in ("round", "client_round"):
            continue
        x = _number(v)
        if x is not None:
            scalars[prefix + k] = x
    if _number(row.get("round")) is not None:
        scalars[prefix + "iteration"] = float(row["round"])
    link = row.get("link_health") if isinstance(row.get("link_health"), dict) else {}
    for k, v in link.items():
        x = _number(v)
        if x is not None:
            scalars[f"{prefix}link/{k}"] = x
    for c in link.get("clients") or []:
        if not isinstance(c, dict) or _number(c.get("client")) is None:
            continue
        for k in CLIENT_FIGURES:
            x = _number(c.get(k))
            if x is not None:
                scalars[f"{prefix}link/client_{int(c['client'])}/{k}"] = x
    ref = link.get("reference")
    points = None
    if isinstance(ref, list) and ref:
        a = np.asarray(ref, dtype=np.float64).reshape(-1, 2)
        points = a[:, 0] + 1j * a[:, 1]
    return TrackedRound(step=step, scalars=scalars, reference=points, link=link)


__all__ = ["CLIENT_FIGURES", "SERVER_STEP", "TrackedRound", "tracked"]
