"""What every node of a round derives by itself, without sending it: the channels (seeded), the burst
length, and the shared pre-equalised reference design (who sends the preamble/pilots, at what gain).

Channels come from ``seeding.rng(seed, "channel", it)`` through the orchestrator's own
``Experiment._draw_channels``, so the server, each client and the channel emulator hold the same h
without it crossing the network. Pure numpy (phy), no GNU Radio, no zmq."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..channel.fading import BlockFading
from ..phy import Modem
from ..phy.packing import symbols_for
from ..phy.reference import reference_budget, reference_gains


def draw_channels(cfg, clients: int, it: int) -> tuple[np.ndarray, complex]:
    """(h (K,), h_cj) of iteration ``it``: exactly the orchestrator's draw."""
    from ..orchestrator import Experiment
    ns = SimpleNamespace(cfg=cfg, K=clients, fading=BlockFading(cfg.channel.fading),
                         jammer_fading=BlockFading(cfg.channel.jammer_fading))
    return Experiment._draw_channels(ns, it)


def make_modem(cfg) -> Modem:
    return Modem(cfg.phy)


def reference_design(modem: Modem, h_known: np.ndarray, allowance: np.ndarray, dim: int) -> tuple[np.ndarray, complex]:
    """(ref_gain (K,), ref_amplitude): the shared pre-equalised reference (phy.reference) for the clients
    whose ``allowance`` (P_i for a sender, 0 otherwise) is positive, as the loopback air designs it."""
    n_sym = symbols_for(dim)
    e_ref = modem.layout(n_sym).reference_energy
    return reference_gains(h_known, reference_budget(allowance, e_ref, n_sym), e_ref)


def allowance(plan, active: np.ndarray) -> np.ndarray:
    """Reference allowance per client: P_i for a sender (its payload energy without a finite limit)."""
    if plan.power_limit is not None and np.all(np.isfinite(plan.power_limit)):
        return np.where(active, plan.power_limit, 0.0)
    return np.where(active, plan.transmit_energy(), 0.0)
