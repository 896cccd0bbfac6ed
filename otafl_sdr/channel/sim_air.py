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
float64 view (unpack_reals' interleaving): the flat aggregate is bit for bit the plain formula's. With
multipath the links are summed in the time domain (``receive``): multipath_rx.receive's linear map in
another summation order, equal to 1e-12 (tests/channel/test_sim_air_fast.py)."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.airs import Air
from otafl_sdr.phy.packing import pack_reals
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.channel import multipath_rx
from otafl_sdr.channel.multipath import Multipath


class SimAir(Air):
    """Reference channel, fast path (no framing, no pulse shaping; one channel use per symbol)."""

    name = "sim"

    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        from otafl_sdr.channel.front_end import FrontEnd                             # channel.* front-end impairments (off by
        fe = FrontEnd.from_config(self.cfg)                         # default): channel/sim_impairments.py
        if "ofdm" in plan.extra:                                    # phy.waveform = "ofdm": channel/ofdm_sim.py
            if fe.enabled:                                          # with impairments: channel/ofdm_impairments.py
                from otafl_sdr.channel.ofdm_impairments import transmit as ofdm_impaired
                return ofdm_impaired(self.cfg, fe, plan, rng)
            from otafl_sdr.channel.ofdm_sim import ofdm_transmit
            return ofdm_transmit(self.cfg, plan, rng)
        if fe.enabled:
            from otafl_sdr.channel import sim_impairments
            return sim_impairments.transmit(self.cfg, fe, plan, rng)
        t0 = time.perf_counter()
        d = plan.dim
        n_sym = (d + 1) // 2
        active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
        gains = plan.h[active] * plan.alpha[active]                 # h_i alpha_i
        mp = Multipath.from_config(self.cfg)
        if mp.enabled and active.any():                             # h_i g_i: channel/multipath_rx.py
            fir = mp.link_channels(self.cfg.run.seed, plan.round, plan.clients, self.cfg.phy)[active]
            senders = multipath_rx.reference_senders(plan, active, self.cfg.phy)[active]
            y = receive(self._symbols(plan.payload, active), gains, fir, senders, self.cfg.phy)
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


def receive(s: np.ndarray, gains: np.ndarray, fir: np.ndarray, senders: np.ndarray, phy) -> np.ndarray:
    """multipath_rx.receive(gains[:, None] * s, arange(L), fir, senders, phy), summed in the time domain:
    the links' symbol-spaced channels c_i[k] (k = -R..R) scaled by h_i alpha_i are one (2R+1, K) x (K, n)
    complex matmul over the packed payload, Z[k] = sum_i gains_i c_i[k] s_i, shifted by k and added into
    one length-nfft buffer (nfft >= n + 2R + 1, so this linear convolution is the circular one of the
    FFT form), then one FFT, the pulse's deconvolution / Cp and one inverse FFT. The same y as the
    per-link FFT form up to rounding (another summation order: equal to 1e-12, not bit for bit), without
    its (K, nfft) spectra."""
    from scipy.fft import next_fast_len
    from otafl_sdr.phy.pulse_shaping import rrc_taps, symbol_response
    n = s.shape[1]
    delays = np.arange(fir.shape[1])
    t0, r0 = multipath_rx.lock(delays, fir, senders, phy)
    c, R = multipath_rx.symbol_channels(delays, fir, t0, phy)
    prx = rrc_taps(phy.sps, phy.rolloff, phy.rrc_span)
    cp = symbol_response(prx, prx, phy.sps)
    Lp = (len(cp) - 1) // 2
    nfft = next_fast_len(n + 2 * max(R, Lp) + 1)
    used = np.flatnonzero(np.any(c != 0, axis=0))                           # lags outside the pulse are exact 0s
    lo, hi = (int(used[0]), int(used[-1]) + 1) if len(used) else (R, R + 1)
    z = np.ascontiguousarray((c[:, lo:hi] * gains[:, None]).T) @ s          # (hi - lo, n)
    v = np.zeros(nfft, dtype=np.complex128)
    for j, lag in enumerate(range(lo - R, hi - R)):                          # v[(m + lag) mod nfft] += z[j, m]
        if lag >= 0:
            v[lag:lag + n] += z[j]
        else:
            v[:n + lag] += z[j, -lag:]
            v[nfft + lag:] += z[j, :-lag]
    Cp = np.fft.fft(np.roll(np.pad(cp, (0, nfft - len(cp))), -Lp))
    y = np.fft.ifft(np.fft.fft(v) / Cp)[:n]
    return y * np.exp(-1j * np.angle(r0)) if r0 != 0 else y


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
