"""The `sim` air: the numpy reference channel of paper 000, eq. (10)/(16), with no PHY.

y = sum_i h_i alpha_i s_i + h_cj alpha_cj n_cj + z, at the symbol level where s_i packs client i's d
reals into ceil(d/2) complex symbols (I and Q both carry values), n_cj ~ CN(0, 2) (unit variance per real
coordinate, eq. 15) and z ~ CN(0, 2 sigma_c2). The receiver returns unpack(y) / alpha_u. With
``channel.multipath`` on, each h_i becomes h_i g_i (channel/multipath.py, the loopback air's seeded taps)
seen through the single-carrier receiver's symbol-level model (channel/multipath_rx.py).

Cost (issue 26: at most 5 % of a paper-000 round): the flat sum is one complex gemv over the payload
itself, viewed as complex (an even d's pairs (x[2k], x[2k+1]) are pack_reals' I + jQ in memory), so no
(K, d) temporary is made; the noise is one standard_normal(2 n) whose halves are the I and Q draws of
``standard_normal(n) + 1j standard_normal(n)`` (the same stream), added in place; the aggregate is y's
float64 view (unpack_reals' interleaving). Every value is bit for bit that of the plain formula
(tests/channel/test_sim_air_fast.py)."""
from __future__ import annotations

import time

import numpy as np

from ..airs import Air
from ..phy.packing import pack_reals
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
            x = gains[:, None] * self._symbols(plan.payload, active)
            senders = multipath_rx.reference_senders(plan, active, self.cfg.phy)[active]
            y = multipath_rx.receive(x, np.arange(fir.shape[1]), fir, senders, self.cfg.phy)
        else:
            y = gains @ self._symbols(plan.payload, active) if active.any() else np.zeros(n_sym, complex)
        sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)   # the emulated channel's true noise
        noise_var = sigma_c2 + (abs(plan.h_cj) * plan.alpha_cj) ** 2  # per real coordinate
        y = add_noise(y, np.sqrt(noise_var), rng)
        agg = y.view(np.float64)[:d]                                # unpack_reals(y, d), no copy
        agg /= plan.alpha_u
        return Reception(aggregate=agg, ok=True, channel_uses=n_sym, wall_s=time.perf_counter() - t0)

    def _symbols(self, payload: np.ndarray, active: np.ndarray) -> np.ndarray:
        """pack_reals(payload[active]) (K', ceil(d/2)) complex: a view of the payload's own memory when d is
        even and the rows float64 and C-contiguous; with silent clients, of the active rows copied into a
        buffer kept between rounds (a fresh (K', d) array costs more in page faults than the copy itself)."""
        p = np.asarray(payload)
        if not (p.dtype == np.float64 and p.ndim == 2 and p.shape[1] % 2 == 0 and p.flags.c_contiguous):
            return pack_reals(p[active])
        if not active.all():
            rows = np.flatnonzero(active)
            size = len(rows) * p.shape[1]
            buf = getattr(self, "_rows", None)
            if buf is None or buf.size < size:
                buf = self._rows = np.empty(size, np.float64)
            p = np.take(p, rows, axis=0, out=buf[:size].reshape(len(rows), p.shape[1]), mode="clip")
        return p.view(np.complex128)


def add_noise(y: np.ndarray, std: float, rng: np.random.Generator) -> np.ndarray:
    """y + std (a + j b), a and b the first and second half of one standard_normal(2 n) (the draws of
    ``standard_normal(n) + 1j * standard_normal(n)``); in place on a fresh complex128 y."""
    n = y.shape[-1]
    z = rng.standard_normal(2 * n)
    z *= std
    if y.dtype != np.complex128 or not y.flags.writeable or not y.flags.owndata:
        y = np.array(y, dtype=np.complex128)
    y.real += z[:n]
    y.imag += z[n:]
    return y
