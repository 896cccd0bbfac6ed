"""Closed-loop tracking of one client's residual phase between rounds (issue 34, item 3): a two-state Kalman
filter (phase theta rad at the round, offset f Hz) fed by each round's per-client phase estimate and its
standard error (calibration/client_coherence.py), predicting the phase the client should pre-compensate in the
next round. Planned quantities only: the estimates come from reference symbols, never from the payload, so
the booking never depends on data.

Model between rounds dt seconds apart: theta' = theta + 2 pi f dt, f' = f + w, w ~ N(0, q dt) with
q = (drift_ppb 1e-9 f_c)^2 Hz^2/s (the oscillator's frequency random walk, radio/uhd_sim_oscillator.py), plus a
phase random walk of ``phase_q`` rad^2/s. The prediction's phase variance grows as 4 pi^2 q dt^3 / 3 between
measurements: with independent TCXOs (0.05 ppb / sqrt(s), 915 MHz) and rounds 18 s apart it is 13 rad rms, so
tracking cannot hold and the round needs its phase measured again (``holds`` is False); with a shared 10 MHz
(no relative offset) it stays at the estimate's own error.

A measured phase whose innovation exceeds ``GATE`` standard errors is a jump (a retune's new LO phase, a
carrier step): the filter re-acquires from it (phase set to the measurement, offset uncertainty reset) and
reports the jump, so the client is named in the round it happened."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

GATE = 5.0             # innovations beyond this many standard errors are a jump, not noise


@dataclass
class PhaseTracker:
    """One client's tracker. ``q_f``: the offset's random walk (Hz^2 / s); ``phase_q``: rad^2 / s; ``f0_std``:
    the offset's standard error at acquisition (Hz)."""

    q_f: float
    phase_q: float = 0.0
    f0_std: float = 1.0
    x: np.ndarray = field(default_factory=lambda: np.zeros(2))
    P: np.ndarray | None = None

    def predict(self, dt: float) -> tuple[float, float]:
        """Advance ``dt`` seconds; (predicted phase rad, its standard error)."""
        if self.P is None:
            return 0.0, math.inf
        F = np.array([[1.0, 2 * math.pi * dt], [0.0, 1.0]])
        Q = np.array([[4 * math.pi ** 2 * self.q_f * dt ** 3 / 3 + self.phase_q * dt, math.pi * self.q_f * dt ** 2],
                      [math.pi * self.q_f * dt ** 2, self.q_f * dt]])
        self.x = F @ self.x
        self.P = F @ self.P @ F.T + Q
        return float(self.x[0]), math.sqrt(float(self.P[0, 0]))

    def update(self, phase: float, phase_std: float) -> str:
        """Fold in a measured phase (rad) with its standard error; returns '' or 'jump' (re-acquired)."""
        r = float(phase_std) ** 2
        if self.P is None:
            self.x, self.P = np.array([phase, 0.0]), np.diag([r, self.f0_std ** 2])
            return ""
        innov = math.remainder(phase - self.x[0], 2 * math.pi)
        s = float(self.P[0, 0]) + r
        if abs(innov) > GATE * math.sqrt(s) and float(self.P[0, 0]) < (math.pi / GATE) ** 2:
            self.x, self.P = np.array([phase, 0.0]), np.diag([r, self.f0_std ** 2])
            return "jump"
        k = self.P[:, 0] / s
        self.x = self.x + k * innov
        self.P = self.P - np.outer(k, self.P[0, :])
        return ""


def holds(predicted_std: float, limit_rad: float) -> bool:
    """Tracking holds while the predicted phase's standard error is within the limit (coherence_limits)."""
    return predicted_std <= limit_rad


__all__ = ["GATE", "PhaseTracker", "holds"]
