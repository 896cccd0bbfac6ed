"""The `sim` air with the radios' front-end impairments (channel/front_end.py), at the symbol level.

Used by channel/sim_air.py only when an impairment is configured (the default sim stays the fast path).
Symbol k of client i is sample n = k sps of the loopback stream; the sample-level models of
channel/impairments.py become, after the matched filter (unit-energy RRC, DC gain sqrt(sps)):

- IQ imbalance: the same real-linear map (it commutes with the real RRC filters),
- Rapp: on the symbols, A_sat = pa_a_sat |alpha_i| / sqrt(n_sym) (the loopback compresses the pulse-shaped
  samples at A_sat / sqrt(sps): the same curve, a different input distribution),
- DC c_i per sample -> c_i sqrt(sps) per symbol, |c_i| = dc |alpha_i| / sqrt(n_sym sps) (the jammer's
  planned RMS is alpha_cj sqrt(2)),
- Wiener phase noise: increments N(0, sps s^2) per symbol; residual CFO: 2 pi f_i sps k,
- SRO: client i's burst sampled delta_i k symbols late, y_k = sum_j g(j + delta_i k) x_{k-j} with g the
  composite raised-cosine pulse (front_end.rc_pulse): the timing drift and its ISI,
- Doppler: rho_i(t_k) (front_end.doppler_paths, the loopback's seeded paths, rho_i(0) = 1), t_k the sample
  where payload symbol k sits in the loopback's stream (lead guard, preamble and pilots before it).

The receiver (after the thermal noise): phase noise, IQ imbalance (rx), then what the loopback modem does
with the reference (phy/modem.py, gain not corrected): the common phase at the preamble and each pilot
(every phy.pilot_spacing symbols), interpolated linearly; est(k) = mu_t mu_r e^{j theta_r(k)}
mean over the reference senders of (h_i / h_known_i) rho_i e^{j(theta_i(k) + 2 pi f_i sps k)}. What one
client's own rotation does beyond that common part is error in the aggregate, as on the loopback air."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.phy.framing import FrameLayout
from otafl_sdr.phy.packing import pack_reals, unpack_reals
from otafl_sdr.phy.pulse_shaping import rrc_taps
from otafl_sdr.transmission import Reception
from otafl_sdr.channel import impairments, multipath_rx
from otafl_sdr.channel.front_end import iq_mu_nu, rc_pulse
from otafl_sdr.channel.multipath import Multipath


def wiener(seed: int, n: int, std: float) -> np.ndarray:
    """(n,) a Wiener phase walk with per-step std, from numpy's generator seeded with ``seed``."""
    return impairments.wiener_phase(np.random.default_rng(int(seed)), n, std) if std else np.zeros(n)


def resample(x: np.ndarray, delta: np.ndarray, phy) -> np.ndarray:
    """(A, n) symbols through each client's sample-clock offset delta_i (module doc): in chunks over which
    eps = delta_i k moves by at most 0.01 symbol, g(j + eps) to first order about the chunk's centre
    (error <= max|g''| 1.25e-5)."""
    if not np.any(delta):
        return x
    g, span = rc_pulse(phy)
    n = x.shape[1]
    delta = np.asarray(delta, dtype=np.float64)
    B = int(min(n, max(1, 0.01 / max(float(np.abs(delta).max()), 1e-300))))
    pad = span + 2
    xp = np.zeros((x.shape[0], n + 2 * pad), dtype=complex)
    xp[:, pad:pad + n] = x
    y = np.zeros_like(x)
    if n > 256 * B:                                                     # large offsets: g(j + eps) directly
        eps = delta[:, None] * np.arange(n)[None, :]
        for j in range(-pad, pad + 1):
            y += g(j + eps) * xp[:, pad - j:pad + n - j]
        return y
    h = 1e-4
    for lo in range(0, n, B):
        hi = min(n, lo + B)
        ec = delta * (lo + hi - 1) / 2                                  # (A,) the chunk's centre
        de = delta[:, None] * (np.arange(lo, hi)[None, :] - (lo + hi - 1) / 2)
        for j in range(-pad, pad + 1):
            seg = xp[:, pad + lo - j:pad + hi - j]                      # x_{k-j}
            g0 = g(j + ec)
            g1 = (g(j + ec + h) - g(j + ec - h)) / (2 * h)
            y[:, lo:hi] += (g0[:, None] + g1[:, None] * de) * seg
    return y


def tracked_phase(est: np.ndarray, spacing: int, preamble: int) -> np.ndarray:
    """(n,) the receiver's common phase (the modem's tracker, phy/modem.py, at high SNR): arg est at the
    preamble (k = 0) and every pilot, linear between and beyond. A payload of one partial block (n <=
    spacing) still has its closing pilot (phy/framing.py: ceil(n / spacing) pilots), so the phase is
    interpolated from the preamble to it, as the modem does; only without pilots (spacing = 0) the
    preamble's phase and its slope over the preamble's ``preamble`` symbols (the modem's carrier-offset
    estimate) are extrapolated over the burst."""
    n = len(est)
    k = np.arange(n)
    if spacing <= 0 or n < 2:
        m = max(min(int(preamble), n), 2)
        ph = np.unwrap(np.angle(est[:m]))
        slope = np.polyfit(np.arange(m), ph, 1)[0]
        return ph[0] + slope * k
    pts = np.append(np.arange(0, n, spacing), n - 1) if (n - 1) % spacing else np.arange(0, n, spacing)
    return np.interp(k, pts, np.unwrap(np.angle(est[pts])))


def transmitted(cfg, fe, plan, idx: np.ndarray, dr: dict) -> tuple[np.ndarray, np.ndarray]:
    """(x, rot): the clients ``idx``'s symbols as their front ends send them (IQ, Rapp, DC, oscillator,
    SRO, Doppler; module doc) and rot (A, n_sym), each one's oscillator and Doppler factor c_i(k)."""
    phy, sps, seed = cfg.phy, int(cfg.phy.sps), int(cfg.run.seed)
    n_sym = (plan.dim + 1) // 2
    k = np.arange(n_sym)
    dc_gain = float(np.sum(rrc_taps(sps, phy.rolloff, phy.rrc_span)))          # the matched filter at DC
    amp = np.abs(plan.alpha[idx]) / np.sqrt(n_sym)                              # planned RMS per symbol
    x = plan.alpha[idx, None] * pack_reals(plan.payload[idx]) if idx.size else np.zeros((0, n_sym), complex)
    if fe.iq:
        x = impairments.iq_imbalance(x, fe.iq_mag_db, fe.iq_phase_deg)
    if fe.a_sat and idx.size:
        x = impairments.rapp(x, fe.a_sat * amp[:, None], fe.p)
    if fe.dc:
        x = x + (fe.dc * amp * dc_gain / np.sqrt(sps) * np.exp(1j * dr["dc_phase"][idx]))[:, None]
    rot = np.ones((idx.size, n_sym), complex)
    for a, i in enumerate(idx if fe.phase_noise or fe.cfo else ()):
        theta = wiener(fe.phase_seed(seed, plan.round, int(i)), n_sym, fe.phase_noise * np.sqrt(sps))
        rot[a] = np.exp(1j * (theta + 2 * np.pi * dr["cfo"][i] * sps * k))
    if fe.doppler:                  # rho at each payload symbol's place in the loopback's stream (t = 0: its start)
        lay = FrameLayout(n_sym, int(phy.preamble_len), int(phy.pilot_spacing))
        t = (-(-int(phy.guard) // sps) + lay.payload_idx) * sps
        rot = rot * fe.doppler_paths(seed, plan.round, plan.clients, t.astype(np.float64))[idx]
    return resample(x * rot, dr["sro"][idx], phy), rot


def transmit(cfg, fe, plan, rng: np.random.Generator) -> Reception:
    """The sim air's round with ``fe`` (a FrontEnd with something on); same noise draws as sim_air."""
    t0 = time.perf_counter()
    phy, sps, seed = cfg.phy, int(cfg.phy.sps), int(cfg.run.seed)
    d, K = plan.dim, plan.clients
    n_sym = (d + 1) // 2
    active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    idx = np.flatnonzero(active)
    dr = fe.draws(seed, K)
    mu = iq_mu_nu(fe.iq_mag_db, fe.iq_phase_deg)[0]
    dc_gain = float(np.sum(rrc_taps(sps, phy.rolloff, phy.rrc_span)))
    x, rot = transmitted(cfg, fe, plan, idx, dr)

    h = plan.h[idx]
    mp = Multipath.from_config(cfg)
    if mp.enabled and idx.size:
        fir = mp.link_channels(seed, plan.round, K, phy)[active]
        senders_mp = multipath_rx.reference_senders(plan, active, phy)[active]
        y = multipath_rx.receive(h[:, None] * x, np.arange(fir.shape[1]), fir, senders_mp, phy)
    else:
        y = (h[:, None] * x).sum(axis=0) if idx.size else np.zeros(n_sym, complex)
    sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)
    noise_var = sigma_c2 + (abs(plan.h_cj) * plan.alpha_cj) ** 2
    y = y + np.sqrt(noise_var) * (rng.standard_normal(n_sym) + 1j * rng.standard_normal(n_sym))
    if fe.dc and plan.alpha_cj > 0:                      # the jammer's LO leakage (its PN / CFO keep its noise CN)
        y = y + plan.h_cj * fe.dc * plan.alpha_cj * np.sqrt(2.0) * dc_gain / np.sqrt(sps) * np.exp(1j * dr["dc_phase"][K])

    theta_r = wiener(fe.phase_seed(seed, plan.round, "rx"), n_sym, fe.phase_noise * np.sqrt(sps))
    y = y * np.exp(1j * theta_r)
    if fe.iq:
        y = impairments.iq_imbalance(y, fe.iq_mag_db, fe.iq_phase_deg, receiver=True)
    # the receiver's common phase from the reference (module doc)
    if idx.size:
        senders = multipath_rx.reference_senders(plan, active, phy)[idx]
        senders = senders if senders.any() else np.ones(idx.size, bool)
        h_known = np.asarray(plan.extra.get("csi", plan.h), dtype=np.complex128)[idx]
        w = np.where(senders, h / np.where(h_known != 0, h_known, 1.0), 0.0)
        mu_r = iq_mu_nu(fe.iq_mag_db, -fe.iq_phase_deg)[0]                     # (1 + z*) / 2
        est = mu * mu_r * np.exp(1j * theta_r) * (w @ rot) / senders.sum()
    else:
        est = np.ones(n_sym, complex)
    y = y * np.exp(-1j * tracked_phase(est, int(phy.pilot_spacing), int(phy.preamble_len)))
    agg = unpack_reals(y, d) / plan.alpha_u
    return Reception(aggregate=agg, ok=True, channel_uses=n_sym, wall_s=time.perf_counter() - t0)
