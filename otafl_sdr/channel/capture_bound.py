"""A sensitivity for single-carrier multipath that holds for ANY receiver: bound the capture, not the aggregate.

Why (issue 26 item 3, measured on the loopback air, TDL-C, K = 8, d = 2048): channel/multipath_rx's
``sensitivity_gain`` bounds the linear receiver model the sim air uses (timing and phase taken from the
reference alone). The loopback modem (phy/modem.py) estimates timing, carrier offset and phase from the
preamble and the pilots, and under multipath the payload's ISI reaches them: the estimates, hence the
rotation of every client's contribution, depend on one client's data. A unit spike on the payload symbol
next to the closing pilot moved the aggregate by 1.50x / 1.17x / 2.26x the booked (stretched) sensitivity
at 1 / 4 / 8 samples RMS delay spread (1.000x on the flat channel, where the pulse's ZF step leaves the
pilots ISI-free); even a unit tone reached 1.006x. No factor on the aggregate's shift can be derived for
such a receiver, since its output is not linear in the data.

The bound. Everything the receiver computes is post-processing of the capture y (samples), and

    y = sum_i h_i alpha_i (f_i * S s_i) + (reference, data-independent) + jammer + z,   z ~ CN(0, 2 sigma_c2)

per sample, S the tx shaping (upsampling by sps and the unit-energy RRC p), f_i the link's FIR as the airs
apply it (``Multipath.link_channels``: main arrival = h_i). The jammer's noise is independent of the data
and of z, so y is post-processing of y_c = y - jammer (adding independent noise): the jammer is not
counted (it is also gated off on the reference slots the ISI reaches). y_c is a Gaussian mechanism with
white noise sigma_c2 per real sample, and client i's payload difference Delta (||Delta|| <= b_i, the
relation's bound of privacy/sensitivity.py) moves its mean by h_i alpha_i (f_i * S Delta), of norm at most
|h_i alpha_i| op_i b_i with

    op_i^2 = || (f_i * p) S-operator ||^2 = max_nu A_i(nu),   A_i(nu) = sum_m a_i[m] e^{-j 2 pi nu m},
    a_i[m] = sum_n q_i[n] conj(q_i[n + m sps]),   q_i = f_i * p

(the symbol-rate autocorrelation of the composite pulse q_i: ||f_i * S Delta||^2 = Delta^H Toep(a_i) Delta,
whose largest value over ||Delta|| = 1 is the Toeplitz symbol's maximum). In the normalised aggregate's
units (divide by alpha_u; g_i = |h_i alpha_i| / alpha_u, paper 000 eq. 16) the round is booked as

    sensitivity = max_i g_i b_i op_i  (<= plan sensitivity x max_i op_i),   sigma_eff = sqrt(sigma_c2) / alpha_u.

With f_i = delta (flat), op_i^2 = max of the truncated RRC's symbol response, 1 + O(1e-3): the flat
channel keeps its own (symbol-domain) booking, so this is used only where multipath is on. Assumptions:
the air's other channel effects are unitary per sample (carrier offset, delay, phase noise); an
IQ-imbalanced or compressing front end is not covered."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy.pulse_shaping import rrc_taps

GRID = 8192       # frequency points for max_nu A_i(nu) (a_i is short: tens of symbol lags)


def capture_gains(fir: np.ndarray, phy) -> np.ndarray:
    """(K,) op_i of the module docstring for link FIRs ``fir`` (K, n) at sample spacing."""
    p = rrc_taps(phy.sps, phy.rolloff, phy.rrc_span)
    sps = int(phy.sps)
    out = np.empty(fir.shape[0])
    for i, f in enumerate(np.atleast_2d(fir)):
        q = np.convolve(f, p)
        n = len(q)
        M = (n - 1) // sps
        lags = np.arange(-M, M + 1)
        a = np.array([np.vdot(q[max(0, -m * sps):n - max(0, m * sps)], q[max(0, m * sps):n - max(0, -m * sps)])
                      for m in lags])                                  # a[m] = sum_n conj(q[n]) q[n + m sps]
        A = np.fft.fft(np.roll(np.pad(a, (0, GRID - len(a))), -M))
        out[i] = float(np.sqrt(max(float(np.max(A.real)), 0.0)))
    return out


def capture_gain(mp, seed: int, round_index: int, links: int, phy) -> float:
    """max_i op_i over the round's links as the airs apply them (1.0 when multipath is off: the flat
    channel keeps the symbol-domain booking)."""
    if not mp.enabled:
        return 1.0
    return float(np.max(capture_gains(mp.link_channels(seed, round_index, links, phy), phy)))


def capture_mechanism(plan, op: np.ndarray | float, bounds: np.ndarray | float):
    """(sensitivity, sigma_eff) of the capture bound for ``plan`` (transmission.RoundPlan): g_i =
    |h_i alpha_i| / alpha_u of the clients that send, b_i ``bounds``, op_i ``op``; the jammer not counted."""
    g = np.abs(plan.h * plan.alpha) / plan.alpha_u
    sending = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    b = np.broadcast_to(np.asarray(bounds, float), g.shape)
    o = np.broadcast_to(np.asarray(op, float), g.shape)
    sens = float(np.max(np.where(sending, g * b * o, 0.0))) if sending.any() else 0.0
    sigma_c2 = min(float(plan.sigma_c2), float(plan.extra.get("air_sigma_c2", plan.sigma_c2)))
    return sens, float(np.sqrt(sigma_c2) / plan.alpha_u)
