"""The shared pre-equalised reference of a round (who sends the preamble / pilots, at what gain), as every
node derives it from the plan without it crossing the network: the sim air's multipath receiver, the
loopback air, the zmq airs and the uhd air / testbed design it with these functions (phy/reference.py has
the maths). Which clients send the reference and at what amplitude depend only on planned quantities
(``allowance``), never on the payload's values (issue 24)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy.modem import Modem
from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.phy.reference import PAYLOAD_NORM_BOUND, reference_budget, reference_gains


def reference_design(modem: Modem, h_known: np.ndarray, allowance: np.ndarray, dim: int) -> tuple[np.ndarray, complex]:
    """(ref_gain (K,), ref_amplitude): the shared pre-equalised reference for the clients whose
    ``allowance`` (``allowance(plan, active)``) is positive, as the loopback air designs it."""
    n_sym = symbols_for(dim)
    e_ref = modem.layout(n_sym).reference_energy
    return reference_gains(h_known, reference_budget(allowance, e_ref, n_sym), e_ref)


def planned_energy(plan) -> np.ndarray:
    """(K,) the planned, data-independent bound on each client's payload energy:
    |alpha_i|^2 (W^2 + d var_i), W = ``PAYLOAD_NORM_BOUND`` the clip of the normalised update u_i / tau
    (||u_i / tau|| <= 1, enforced by the trainer's clip) and var_i the per-coordinate variance of the
    artificial noise the policy planned inside the row (``row_noise_var`` of paper 001's plans, eq. 11;
    0 elsewhere). Its expectation for a full-norm update, whatever the data."""
    alpha2 = np.abs(np.asarray(plan.alpha, dtype=np.complex128)) ** 2
    var = getattr(plan, "row_noise_var", None)
    var = np.zeros(len(alpha2)) if var is None else np.nan_to_num(np.asarray(var, dtype=np.float64), nan=0.0)
    return alpha2 * (PAYLOAD_NORM_BOUND ** 2 + plan.dim * np.maximum(var, 0.0))


def allowance(plan, active: np.ndarray) -> np.ndarray:
    """(K,) reference allowance per client, the one rule of every air: for a sender (``active``) its
    per-round power limit P_i of eq. 11 of paper 000 where the plan gives a finite one (0 if P_i <= 0), else
    ``planned_energy`` (never the payload's own energy: an all-zero payload and a large one get the same
    reference, issue 24); 0 for a client that does not send."""
    active = np.asarray(active, dtype=bool)
    fallback = planned_energy(plan)
    if plan.power_limit is None:
        limit = fallback
    else:
        P = np.broadcast_to(np.asarray(plan.power_limit, dtype=np.float64), fallback.shape)
        limit = np.where(np.isfinite(P), np.maximum(np.nan_to_num(P, posinf=0.0, neginf=0.0), 0.0), fallback)
    return np.where(active, limit, 0.0)


def sending(plan) -> np.ndarray:
    """(K,) bool: the clients that transmit this round (not silent, alpha_i != 0); planned, not data."""
    return np.array([m != "silent" for m in plan.mode], dtype=bool) & (np.asarray(plan.alpha) != 0)
