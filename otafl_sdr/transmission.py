"""The data that crosses room boundaries in one round.

``RoundPlan`` is what the power policy decides and every air (sim, loopback, zmq, uhd) carries out;
``Mechanism`` is what the privacy ledger records (before the model is released); ``Reception`` is what
an air hands back. Notation follows paper 000 (eqs. 10, 13-16): client i sends x_i = alpha_i * s(payload_i)
where s() packs d reals into ceil(d/2) complex symbols, the air forms y = sum_i h_i x_i + h_cj alpha_cj n + z
with z ~ CN(0, 2 sigma_c2) per symbol, and the receiver returns unpack(y) / alpha_u."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Mechanism:
    """One round's Gaussian mechanism as the ledger sees it, in the units of the normalised aggregate.

    sensitivity: L2 sensitivity of the aggregate to the neighbouring relation (0 if no client data used).
    sigma_eff:   per-coordinate std of the effective Gaussian noise in the aggregate.
    sampling_prob: probability that a given client contributes (participation amplification; 1 = always).
    extra: accountant-specific figures (e.g. paper 001's RDP order terms, paper 004 budgets)."""

    round: int
    sensitivity: float
    sigma_eff: float
    uses_data: bool = True
    sampling_prob: float = 1.0
    extra: dict = field(default_factory=dict)

    @property
    def noise_multiplier(self) -> float:
        return float("inf") if self.sensitivity == 0 else self.sigma_eff / self.sensitivity


@dataclass
class RoundPlan:
    """What every radio does in one round.

    payload:  (K, d) float64, the real values client i modulates (its normalised update u_i / tau, or
              noise for a policy that sends noise); rows of silent clients are ignored.
    alpha:    (K,) complex transmit factor alpha_i (0 for a silent client). Includes channel inversion.
    h:        (K,) complex channel that the air applies (ground truth; used by sim and loopback only).
    target_gain: (K,) real coefficient the server intends for each payload: the noiseless aggregate is
              sum_i target_gain_i * payload_i (eq. 16 with h_i alpha_i / alpha_u = p_i / s_i).
    alpha_u:  server scaling; alpha_cj, h_cj: jammer factor and channel; sigma_c2: channel noise.
    mode:     per client 'update' | 'noise' | 'silent'."""

    round: int
    payload: np.ndarray
    alpha: np.ndarray
    h: np.ndarray
    target_gain: np.ndarray
    alpha_u: float
    alpha_cj: float
    h_cj: complex
    sigma_c2: float
    mode: list
    mechanism: Mechanism
    power_limit: np.ndarray | None = None   # (K,) P_i, energy per round
    extra: dict = field(default_factory=dict)

    @property
    def clients(self) -> int:
        return self.payload.shape[0]

    @property
    def dim(self) -> int:
        return self.payload.shape[1]

    def expected_aggregate(self) -> np.ndarray:
        """Noiseless aggregate sum_i target_gain_i payload_i over transmitting clients."""
        g = np.where(np.asarray([m == "update" for m in self.mode]), self.target_gain, 0.0)
        return g @ self.payload

    def sigma_eff(self) -> float:
        """Per-real-coordinate noise std of unpack(y)/alpha_u: channel noise plus jammer."""
        var = (self.sigma_c2 + (abs(self.h_cj) * self.alpha_cj) ** 2) / self.alpha_u ** 2
        return float(np.sqrt(var))

    def transmit_energy(self) -> np.ndarray:
        """(K,) energy E||x_i||^2 each client radiates this round."""
        return np.abs(self.alpha) ** 2 * np.sum(self.payload ** 2, axis=1)


@dataclass
class Reception:
    """What an air returns for one round."""

    aggregate: np.ndarray | None      # (d,) real, unpack(y)/alpha_u; None if the burst was lost
    ok: bool = True
    reason: str = ""                   # why the round failed ('no preamble', 'uhd late command', ...)
    faults: dict = field(default_factory=dict)   # counts of asynchronous events etc.
    channel_uses: int = 0              # complex samples on the air for this round (incl. overhead)
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)
    # protective noise planned for this attempt but not confirmed delivered while client data went on the
    # air: source ('jammer', 'client-2') -> what happened ('late command', 'died', ...); set by the
    # transport, charged by rounds/accounting.release as an appended ledger entry
    undelivered: dict = field(default_factory=dict)


def aggregate_nmse(estimate: np.ndarray, expected: np.ndarray) -> float:
    den = float(np.sum(expected ** 2))
    return float(np.sum((estimate - expected) ** 2) / den) if den > 0 else float("nan")


def aggregate_scale_and_residual(estimate: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    """(c, r): the estimate's least-squares scale on the intended sum, c = <g_hat, g> / ||g||^2 (1: no
    common gain error), and the NMSE of what is left, r = ||g_hat - c g||^2 / ||g||^2 (the delivered noise,
    to be read against ``aggregate_nmse_theory``). aggregate_nmse = (c - 1)^2 + r exactly. A reading below
    theory is then told apart: r / theory < 1 is less noise delivered than booked (per round it scatters by
    about sqrt(2 / d)), c != 1 a receiver scale error (issue 34, the 3 % question). Shapes (d,), (d,)."""
    den = float(np.sum(expected ** 2))
    if den <= 0:
        return float("nan"), float("nan")
    c = float(np.dot(estimate, expected) / den)
    return c, float(np.sum((estimate - c * expected) ** 2) / den)


def aggregate_nmse_theory(plan: RoundPlan, expected: np.ndarray | None = None) -> float:
    """sigma_eff^2 d / ||sum_i p_i u_i||^2 (issue 3), plus the power of noise-mode payloads.
    ``expected``: ``plan.expected_aggregate()`` where the caller has it already."""
    expected = plan.expected_aggregate() if expected is None else expected
    den = float(np.sum(expected ** 2))
    noise_var = plan.sigma_eff() ** 2 * plan.dim
    gains = np.abs(plan.h * plan.alpha) / plan.alpha_u
    for i, m in enumerate(plan.mode):
        if m == "noise":
            noise_var += gains[i] ** 2 * float(np.sum(plan.payload[i] ** 2))
    return noise_var / den if den > 0 else float("nan")
