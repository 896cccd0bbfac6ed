"""The shared pre-equalised reference of a round (who sends the preamble / pilots, at what gain), as every
node derives it from the plan without it crossing the network: the loopback air, the in-process zmq air
and the testbed's server design it with these two functions (phy/reference.py has the maths)."""
from __future__ import annotations

import numpy as np

from .modem import Modem
from .packing import symbols_for
from .reference import reference_budget, reference_gains


def reference_design(modem: Modem, h_known: np.ndarray, allowance: np.ndarray, dim: int) -> tuple[np.ndarray, complex]:
    """(ref_gain (K,), ref_amplitude): the shared pre-equalised reference for the clients whose
    ``allowance`` (P_i for a sender, 0 otherwise) is positive, as the loopback air designs it."""
    n_sym = symbols_for(dim)
    e_ref = modem.layout(n_sym).reference_energy
    return reference_gains(h_known, reference_budget(allowance, e_ref, n_sym), e_ref)


def allowance(plan, active: np.ndarray) -> np.ndarray:
    """Reference allowance per client: P_i for a sender (its payload energy without a finite limit)."""
    if plan.power_limit is not None and np.all(np.isfinite(plan.power_limit)):
        return np.where(active, plan.power_limit, 0.0)
    return np.where(active, plan.transmit_energy(), 0.0)
