"""What the single-carrier receiver makes of a multipath superposition, at the symbol level (the `sim` air's
model of the loopback air's modem under channel/multipath.py).

The modem (phy/modem.py) has no equaliser for the channel: it corrects only what is common to the sum.
Its preamble correlation locks the timing t0 to the peak of the composite reference r(t) =
sum_{i sending} sum_l g_il p(t - tau_l) (every sender's reference arrives as c g_i with perfect CSI; p is
the tx RRC convolved with the matched filter, p(0) = 1), the reference then gives one common phase
angle r(t0) (and, with ``Modem(correct_gain=True)`` only, a common gain), and the zero-forcing step
undoes the pulse's own ISI. So symbol m of the aggregate is

    y[m] = e^{-j angle r(t0)} sum_i h_i alpha_i sum_k c_i[k] s_i[m - k],
    c_i[k] = sum_l g_il p(k sps + t0 - tau_l)   (deconvolved by the pulse's symbol response),

with the links' channels from ``Multipath.link_channels`` (each link's main arrival aligned and scaled to
the h_i its CSI knows): the per-link CSI handles the main arrival only, every other tap is inter-symbol
interference (and, where the links' main arrivals differ from the sum's peak, a per-link gain error).
Differences from the loopback modem: timing on a 1/20-sample grid (the modem refines continuously), the
pilots' neighbours treated as payload (1 in ``pilot_spacing``), noise-free estimates of t0 and phase."""
from __future__ import annotations

import numpy as np
from scipy.fft import next_fast_len

from otafl_sdr.phy.modem import Modem
from otafl_sdr.phy.pulse_shaping import rrc_taps, symbol_response
from otafl_sdr.phy.reference import reference_budget, reference_gains
from otafl_sdr.phy.reference_design import allowance


FRACTIONS = np.linspace(-0.5, 0.5, 21)      # sub-sample timing grid (the modem refines continuously)


def composite_pulse(phy, frac: float = 0.0) -> tuple[np.ndarray, int]:
    """(p, centre): tx RRC * matched filter at sample spacing, sampled frac samples late (p[centre] =
    p(frac); p(0) = 1 for unit-energy taps)."""
    taps = rrc_taps(phy.sps, phy.rolloff, phy.rrc_span)
    tx = rrc_taps(phy.sps, phy.rolloff, phy.rrc_span, delay=-float(frac)) if frac else taps
    return np.convolve(tx, taps[::-1]), len(taps) - 1


def reference_senders(plan, active: np.ndarray, phy) -> np.ndarray:
    """(K,) bool: the clients that send the reference, chosen as the loopback air does
    (phy/reference.py: the strongest under each one's energy budget, perfect or calibrated CSI)."""
    n_ref = Modem(phy).layout((plan.dim + 1) // 2).reference_energy
    h_known = np.asarray(plan.extra.get("csi", plan.h), dtype=np.complex128)
    gains, _ = reference_gains(h_known, reference_budget(allowance(plan, active), n_ref, (plan.dim + 1) // 2), n_ref)
    return gains != 0


def pulse_at(p: np.ndarray, centre: int, lag: np.ndarray) -> np.ndarray:
    idx = np.asarray(lag) + centre
    ok = (idx >= 0) & (idx < len(p))
    return np.where(ok, p[np.clip(idx, 0, len(p) - 1)], 0.0)


def lock(delays: np.ndarray, taps: np.ndarray, senders: np.ndarray, phy) -> tuple[float, complex]:
    """(t0, r(t0)): the timing (samples, on the FRACTIONS grid) at the composite reference's peak and
    its value (the common gain/phase the receiver reads off the preamble); taps (K, L) at ``delays``."""
    best = (-1.0, 0.0, 0j)
    g = taps[senders].sum(axis=0) if senders.any() else np.zeros(taps.shape[1], complex)
    for frac in FRACTIONS:
        p, c = composite_pulse(phy, frac)
        t = np.arange(-c, int(delays[-1]) + c + 1)
        r = pulse_at(p, c, t[:, None] - delays[None, :]) @ g
        j = int(np.argmax(np.abs(r)))
        if abs(r[j]) > best[0] + 1e-12:
            best = (float(abs(r[j])), float(t[j] + frac), complex(r[j]))
    return best[1], best[2]


def symbol_channels(delays: np.ndarray, taps: np.ndarray, t0: float, phy) -> tuple[np.ndarray, int]:
    """(c (K, 2R+1), R): each link's symbol-spaced channel c_i[k], k = -R..R, at timing t0."""
    n0 = int(np.floor(t0 + 0.5))
    p, centre = composite_pulse(phy, t0 - n0)
    sps = int(phy.sps)
    R = (centre + int(delays[-1]) + abs(n0)) // sps + 1
    k = np.arange(-R, R + 1)
    resp = pulse_at(p, centre, k[:, None] * sps + n0 - delays[None, :])   # (2R+1, L)
    return taps @ resp.T, R


def receive(x: np.ndarray, delays: np.ndarray, taps: np.ndarray, senders: np.ndarray, phy) -> np.ndarray:
    """y (n,) as in the module doc: x (K, n) the symbols each link puts on the air (h_i alpha_i s_i)."""
    K, n = x.shape
    t0, r0 = lock(delays, taps, senders, phy)
    c, R = symbol_channels(delays, taps, t0, phy)
    prx = rrc_taps(phy.sps, phy.rolloff, phy.rrc_span)
    cp = symbol_response(prx, prx, phy.sps)
    Lp = (len(cp) - 1) // 2
    nfft = next_fast_len(n + 2 * max(R, Lp) + 1)
    C = np.fft.fft(np.roll(np.pad(c, ((0, 0), (0, nfft - c.shape[1]))), -R, axis=1), axis=1)   # lag k at k mod nfft
    Cp = np.fft.fft(np.roll(np.pad(cp, (0, nfft - len(cp))), -Lp))
    Y = np.einsum("kf,kf->f", np.fft.fft(x, nfft, axis=1), C) / Cp
    phase = np.exp(-1j * np.angle(r0)) if r0 != 0 else 1.0
    return np.fft.ifft(Y)[:n] * phase



GAIN_GRID = 8192            # frequency points on which sensitivity_gain takes max_f (short, smooth filters)


def sensitivity_gain(mp, seed: int, round_index: int, links: int, phy, senders=None) -> float:
    """The largest factor by which multipath can stretch one client's payload difference in the aggregate,
    for the ledger (workload/booking.ledger_mechanism). Link i reaches the aggregate through the
    symbol-level filter C_i(f) / Cp(f) of ``receive`` (the phase correction has unit modulus, the reals'
    packing is an isometry), whose operator norm is at most max_f |C_i(f) / Cp(f)| (Young / Parseval);
    the bound is the largest over the round's links and over every timing within half a sample of the
    model's lock (the loopback modem refines t0 continuously from a noisy preamble). ``senders``: the
    clients that send the reference (``reference_senders`` of the round's plan); None (planning before
    the round, workload/targeting.py): every link. 1.0 when flat."""
    if not mp.enabled:
        return 1.0
    fir = mp.link_channels(seed, round_index, links, phy)
    delays = np.arange(fir.shape[1])
    senders = np.ones(links, bool) if senders is None or not np.any(senders) else np.asarray(senders, bool)
    t_lock, _ = lock(delays, fir, senders, phy)
    prx = rrc_taps(phy.sps, phy.rolloff, phy.rrc_span)
    cp = symbol_response(prx, prx, phy.sps)
    Lp = (len(cp) - 1) // 2
    Cp = np.abs(np.fft.fft(np.roll(np.pad(cp, (0, GAIN_GRID - len(cp))), -Lp)))
    worst = 1.0
    for t in t_lock + FRACTIONS:
        c, R = symbol_channels(delays, fir, float(t), phy)
        C = np.fft.fft(np.roll(np.pad(c, ((0, 0), (0, GAIN_GRID - c.shape[1]))), -R, axis=1), axis=1)
        worst = max(worst, float(np.max(np.abs(C) / Cp)))
    return worst
