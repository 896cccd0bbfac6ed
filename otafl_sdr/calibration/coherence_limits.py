"""How far a client's residual phase and carrier offset may drift before the over-the-air sum pays for it
(issue 34, item 3): drift limits derived from the NMSE excess they cause, from planned quantities only (the
round's theory NMSE and its burst duration; never the payload).

Derivation (first order in the phase error). Client i's payload p_i u_i arrives turned by a residual phase
delta_i(n) = phi_i + 2 pi f_i n / rate over its burst (phi_i at the burst's first sample, f_i in Hz). The
receiver removes only what is common to the sum (the shared reference), so the aggregate's error gains
e = sum_i p_i u_i (exp(j delta_i) - 1); for updates without cross terms (independent: the worst case, the
cross terms of correlated updates cancel part of it) and delta small,

    E ||e||^2 / ||sum_i p_i u_i||^2 = sum_i w_i m_i,    w_i = ||p_i u_i||^2 / ||sum_j p_j u_j||^2,
    m_i = mean over the burst of delta_i(n)^2 = phi_i^2 + phi_i (2 pi f_i T) + (2 pi f_i T)^2 / 3

(T = burst samples / rate). Against the theory NMSE N_th the excess is sum_i w_i m_i / N_th. Allowing an
excess ``excess`` (0.05: NMSE / theory within 1.05) with every client at the limit (sum_i w_i = 1 for
independent updates): m <= excess N_th, so

    |phi| <= sqrt(excess N_th)                       (no offset),
    |f|   <= sqrt(3 excess N_th) / (2 pi T)          (no phase error at the burst's start).

Checked against benchmarks/bench_coherence_tolerance.py (K = 3, N_th = 0.02, spread (+1, -1, 0), independent
updates): a 0.1 rad spread predicts 1 + (2/3) 0.01 / 0.02 = 1.33, measured 1.328 +- 0.006; 1 Hz over a
15,425-sample burst predicts 1.104, measured 1.113 +- 0.005 (tests/calibration/test_coherence_limits.py).
At N_th = 0.02 and excess 0.05: 0.032 rad, and 0.57 Hz for that burst. Where the theory NMSE is large (a DP
aggregate at 26-106, the README's checks) the same excess allows radians: a phase error is invisible there,
which is why the coherence check runs at a high SNR."""
from __future__ import annotations

import math

EXCESS = 0.05          # the NMSE / theory excess a drift may cost before it is a drift (the 1.00 +- 0.05)


def mean_square_phase(phase_rad: float, cfo_hz: float, burst_s: float) -> float:
    """m = mean over a burst of T = ``burst_s`` seconds of (phi + 2 pi f t)^2 (rad^2, module doc)."""
    ramp = 2 * math.pi * float(cfo_hz) * float(burst_s)
    return float(phase_rad) ** 2 + float(phase_rad) * ramp + ramp ** 2 / 3.0


def predicted_excess(phases, cfos_hz, weights, burst_s: float, nmse_theory: float) -> float:
    """sum_i w_i m_i / N_th: the first-order NMSE / theory excess of per-client residuals (module doc)."""
    total = sum(float(w) * mean_square_phase(p, f, burst_s) for p, f, w in zip(phases, cfos_hz, weights))
    return total / float(nmse_theory)


def phase_limit(nmse_theory: float, excess: float = EXCESS) -> float:
    """The largest per-client residual phase (rad) costing at most ``excess`` of the theory NMSE."""
    return math.sqrt(float(excess) * float(nmse_theory))


def cfo_limit_hz(nmse_theory: float, burst_s: float, excess: float = EXCESS) -> float:
    """The largest per-client residual carrier offset (Hz) costing at most ``excess`` over a burst of
    ``burst_s`` seconds."""
    return math.sqrt(3.0 * float(excess) * float(nmse_theory)) / (2 * math.pi * float(burst_s))


__all__ = ["EXCESS", "cfo_limit_hz", "mean_square_phase", "phase_limit", "predicted_excess"]
