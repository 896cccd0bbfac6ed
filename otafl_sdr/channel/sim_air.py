"""The `sim` air: the numpy reference channel of paper 000, eq. (10)/(16), with no PHY.

y = sum_i h_i alpha_i s_i + h_cj alpha_cj n_cj + z, at the symbol level where s_i packs client i's d
reals into ceil(d/2) complex symbols (I and Q both carry values), n_cj ~ CN(0, 2) (unit variance per real
coordinate, eq. 15) and z ~ CN(0, 2 sigma_c2). The receiver returns unpack(y) / alpha_u. With
``channel.multipath`` on, each h_i becomes h_i g_i (channel/multipath.py, the loopback air's seeded taps)
seen through the single-carrier receiver's symbol-level model (channel/multipath_rx.py)."""
from __future__ import annotations

import time

import numpy as np

from ..airs import Air
from ..phy.packing import pack_reals, unpack_reals
from ..transmission import Reception, RoundPlan
from . import multipath_rx
from .multipath import Multipath


class SimAir(Air):
    """Reference channel, fast path (no framing, no pulse shaping; one channel use per symbol)."""

    name = "sim"

    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        t0 = time.perf_counter()
        d = plan.dim
        n_sym = (d + 1) // 2
        active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
        gains = plan.h[active] * plan.alpha[active]                 # h_i alpha_i
        mp = Multipath.from_config(self.cfg)
        if mp.enabled and active.any():                             # h_i g_i: channel/multipath_rx.py
            fir = mp.link_channels(self.cfg.run.seed, plan.round, plan.clients, self.cfg.phy)[active]
            x = gains[:, None] * pack_reals(plan.payload[active])
            senders = multipath_rx.reference_senders(plan, active, self.cfg.phy)[active]
            y = multipath_rx.receive(x, np.arange(fir.shape[1]), fir, senders, self.cfg.phy)
        else:
            y = gains @ pack_reals(plan.payload[active]) if active.any() else np.zeros(n_sym, complex)
        sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)   # the emulated channel's true noise
        noise_var = sigma_c2 + (abs(plan.h_cj) * plan.alpha_cj) ** 2  # per real coordinate
        y = y + np.sqrt(noise_var) * (rng.standard_normal(n_sym) + 1j * rng.standard_normal(n_sym))
        agg = unpack_reals(y, d) / plan.alpha_u
        return Reception(aggregate=agg, ok=True, channel_uses=n_sym, wall_s=time.perf_counter() - t0)
