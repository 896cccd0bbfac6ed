"""Least-squares estimation of one transmitter's link from its pilot burst in its own time slot.

Model (one transmitter alone on the air, digital amplitude a, unit shaped frame s, frame start m_f):

    y[n] = a h exp(j 2 pi F (n - m_f)) s(n - m_f) + z[n],   z ~ CN(0, 2 sigma^2) per sample

with h the complex gain (its phase referred to the frame's centre symbol, where the fit's phase
variance is least: referring it to the frame's first sample would double the phase error), F the total carrier offset (the
transmitter's plus the receiver's, cycles/sample) and m_f = nominal + delay. Steps: preamble correlation
gives the integer timing (:func:`otafl_sdr.phy.sync.detect`), the two ZC copies a coarse F
(Schmidl-Cox, :func:`~otafl_sdr.phy.sync.repeat_cfo`), the preamble interior the fractional timing; the
matched filter and the ZF inverse of the RRC pair's ISI give symbol-spaced values z_k; the phases of
block sums of z_k conj(x_k) give the residual frequency by a straight-line fit; then

    g = sum_k z_k conj(x_k) e^{-j w (k - k_c)} / sum_k |x_k|^2     (least squares, known pilots x_k)

and the residual r_k = z_k - g e^{j w (k - k_c)} x_k estimates the noise: sigma^2 = sum |r_k|^2 / (2 (N - 3)),
std error of h: sqrt(2 sigma^2 / sum |x_k|^2) / a (= sqrt(E|h_hat - h|^2)), i.e. a relative error of
1 / sqrt(SNR N) (SNR = |g|^2 / (2 sigma^2) per symbol)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from otafl_sdr.phy.modem import FRAC_PAD
from otafl_sdr.phy.fractional_timing import TimingScore
from otafl_sdr.phy.pulse_shaping import delayed_taps, matched_filter, symbol_response, zf_equalise
from otafl_sdr.phy.sync import detect, refine_fraction, repeat_cfo
from otafl_sdr.calibration.phase_wander import slope_variance_per_wander, wander_variance
from otafl_sdr.calibration.pilots import PilotBurst

PHASE_BLOCK = 64          # symbols per block of the residual-frequency fit
CFO_SEARCH = 0.005        # cycles/sample searched each side when the preamble is not found unrotated (+-5 kHz
                          # at 1 MS/s: two independent +-2 ppm TCXOs at 915 MHz are up to 3.7 kHz apart)
SEARCH_RHO = 0.5          # below this preamble correlation unrotated, offset hypotheses are searched too
NOT_FOUND = "no pilot burst detected"


@dataclass
class LinkEstimate:
    """One transmitter's link as measured from one pilot burst.

    h: complex gain per unit digital amplitude, phase referred to ``ref_sample`` (the capture sample of
    the frame's centre symbol: the least-variance point of the fit); h_std: sqrt(E|h_hat - h|^2)
    from the residual noise; cfo / cfo_std: total carrier offset (cycles/sample); delay: received frame
    start minus its nominal start (samples, fractional); snr_db: per-symbol pilot SNR; noise_var: the
    residual noise per real coordinate (symbol level); rho: normalised preamble correlation; points:
    (N,) received pilot values z_k conj(x_k) / (|x_k|^2 a), frequency-corrected and referred like h
    (a cloud around h: the received pilot constellation). A gain referred to another sample n is
    h exp(j 2 pi cfo (n - ref_sample)). cfo_std^2 = cfo_thermal_std^2 + wander_q wander_scale: the thermal
    error and the synthesizers' phase noise (wander_q: this burst's estimate of its Wiener phase's variance
    per block, rad^2, or a calibration's pooled one; wander_scale: the offset's variance per unit of it;
    block_resid (nb,), block_var: the pilot's residual block phases and their white variance, from which
    calibration/phase_wander.py estimates it; block_samples: samples per block, so wander_q / block_samples is
    the phase noise's variance per sample)."""

    found: bool
    reason: str = ""
    h: complex = 0j
    h_std: float = float("nan")
    cfo: float = 0.0
    cfo_std: float = float("nan")
    delay: float = 0.0
    ref_sample: float = 0.0
    snr_db: float = float("nan")
    noise_var: float = float("nan")
    rho: float = 0.0
    points: np.ndarray | None = None
    cfo_thermal_std: float = float("nan")
    wander_q: float = 0.0
    wander_scale: float = 0.0
    block_resid: np.ndarray | None = None
    block_var: float = float("nan")
    block_samples: int = 0

    @property
    def rel_std(self) -> float:
        return self.h_std / abs(self.h) if self.h else float("inf")


def _fit_line(k: np.ndarray, phi: np.ndarray) -> tuple[float, float, float]:
    """phi ~ th + w k by least squares; returns (th, w, sum (k - mean k)^2)."""
    km = float(np.mean(k))
    skk = float(np.sum((k - km) ** 2))
    w = float(np.sum((k - km) * (phi - np.mean(phi))) / skk) if skk > 0 else 0.0
    th = float(np.mean(phi) - w * km)
    return th, w, skk


def estimate_link(samples: np.ndarray, burst: PilotBurst, nominal: int, amplitude: float = 1.0,
                  search: tuple[int, int] = (-16, 64)) -> LinkEstimate:
    """Estimate the link of the transmitter whose pilot frame should start at sample ``nominal``.

    samples: the capture; burst: the PilotBurst it sent with digital amplitude ``amplitude``;
    search: (lo, hi) delays in samples searched for the frame start (nominal + lo .. nominal + hi)."""
    y = np.asarray(samples).astype(np.complex128, copy=False)
    ntaps, Lt = burst.modem.ntaps, len(burst.modem.preamble_template())
    lo, hi = int(search[0]), int(search[1])
    start = max(int(nominal) + lo, 0)
    n_lags = min(int(nominal) + hi - start + 1, len(y) - Lt + 1 - start)
    if n_lags < 1 or start + burst.shaped_len > len(y):
        return LinkEstimate(False, f"{NOT_FOUND}: the capture ({len(y)} samples) does not hold the slot")
    # only the samples this slot's estimate reads (the search, the frame, the margin _estimate derotates) are
    # taken, in the window's own indices: derotating the whole capture for each offset hypothesis cost a
    # capture's length per hypothesis per slot (a power sweep's capture holds every slot). The same sums:
    # a hypothesis' derotation then differs by a constant phase, which its phase reference (to_ref) undoes.
    w0 = max(start - _margin(ntaps), 0)
    w1 = min(len(y), start + n_lags + Lt + burst.shaped_len + _margin(ntaps))
    best = _search(y[w0:w1], burst, int(nominal) - w0, amplitude, start - w0, n_lags)
    return replace(best, ref_sample=best.ref_sample + w0) if best.found else best


def _margin(ntaps: int) -> int:
    """Samples _estimate takes around the frame (ISI reach, the fractional template's padding, slack)."""
    return 2 * ntaps + 2 * FRAC_PAD + 2


def _search(y: np.ndarray, burst: PilotBurst, nominal: int, amplitude: float, start: int,
            n_lags: int) -> LinkEstimate:
    """estimate_link over the samples ``y`` (indices of ``y``): the preamble searched from ``start`` over
    ``n_lags`` lags, every carrier-offset candidate estimated, the one whose pilots add up best taken."""
    m = burst.modem
    Np, Nzc, sps = burst.preamble_len, burst.zc_len, m.sps
    template = m.preamble_template()
    det = detect(y[start:], template, n_lags, Np)
    # a carrier offset beyond ~0.5 / len(template) turns the preamble's correlation away, and one of a whole
    # Zadoff-Chu bin (1 / (N_zc sps) cycles/sample: 3.6 kHz at 1 MS/s, within two TCXOs' +-3.7 kHz) moves its
    # peak along the ridge to a wrong timing that correlates fully (rho 0.98) while the copies' phase advance
    # aliases to 0. The candidate offsets (_offset_candidates) are each estimated in full and the one whose
    # pilots add up best is taken.
    best = None
    for f in _offset_candidates(y, start, template, n_lags, Np, det, m.preamble_template(copies=1), Nzc * sps):
        yf = y * np.exp(-2j * np.pi * f * np.arange(len(y))) if f else y
        d = detect(yf[start:], template, n_lags, Np)
        if not d.found:
            continue
        e = _estimate(yf, burst, nominal, amplitude, start, d, f)
        if best is None or abs(e.h) > abs(best.h):
            best = e
    return best if best is not None else LinkEstimate(False, NOT_FOUND, rho=det.rho)


def _estimate(y: np.ndarray, burst: PilotBurst, nominal: int, amplitude: float, start: int, det,
              hyp: float) -> LinkEstimate:
    """estimate_link once the preamble is detected (``det``) in ``y``, derotated by ``hyp`` cycles/sample."""
    m = burst.modem
    sps, ntaps, taps = m.sps, m.ntaps, m.taps
    Np, Nzc, N = burst.preamble_len, burst.zc_len, burst.n_frame
    template = m.preamble_template()
    Lt = len(template)
    lag = start + det.lag
    f0 = repeat_cfo(y, lag, m.preamble_template(copies=1), Nzc * sps)

    margin = _margin(ntaps)
    lo_r, hi_r = max(lag - margin, 0), min(lag + burst.shaped_len + margin, len(y))
    n = np.arange(lo_r - lag, hi_r - lag, dtype=np.float64)
    region = y[lo_r:hi_r] * np.exp(-2j * np.pi * f0 * n)
    cands = [l for l in (lag - 1, lag, lag + 1) if l >= lo_r and l - lo_r + Lt <= len(region)]
    n0 = max(cands, key=lambda l: abs(np.vdot(template, region[l - lo_r:l - lo_r + Lt])))

    # fractional timing on the preamble's interior (as the modem does), then MF + ZF
    pre = burst.preamble
    a_, b_ = FRAC_PAD + ntaps - 1, FRAC_PAD + (Np * sps - (ntaps - 1))
    seg = region[n0 - lo_r - FRAC_PAD + a_:n0 - lo_r - FRAC_PAD + b_]

    frac = refine_fraction(TimingScore(pre, taps, sps, FRAC_PAD, a_, b_, seg), -0.6, 0.6, iters=40)
    taps_rx = delayed_taps(taps, frac, FRAC_PAD)
    c = symbol_response(taps_rx, taps_rx, sps)
    Lc = (len(c) - 1) // 2
    z = zf_equalise(matched_filter(region, taps_rx, sps, n0 - lo_r - FRAC_PAD - Lc * sps, N + 2 * Lc), c)

    # residual frequency: straight line through the phases of block sums of z conj(x)
    x = burst.symbols
    v = z * np.conj(x)
    k = np.arange(N, dtype=np.float64)
    B = PHASE_BLOCK
    nb = N // B
    blocks = v[:nb * B].reshape(nb, B).sum(axis=1)
    kb = np.arange(nb) * B + (B - 1) / 2
    phi = np.unwrap(np.angle(blocks))
    th, w, skk = _fit_line(kb, phi)
    ex = float(np.sum(np.abs(x) ** 2))
    kc = (N - 1) / 2                                  # reference: the frame's centre symbol (least variance)
    rot = np.exp(-1j * w * (k - kc))
    gc = complex(np.sum(v * rot) / ex)
    r = z - gc * np.conj(rot) * x
    noise_var = max(float(np.sum(np.abs(r) ** 2)) / (2 * max(N - 3, 1)), 1e-300)
    var_phase_block = noise_var / (B * max(abs(gc) ** 2, 1e-300))
    w_std = math.sqrt(var_phase_block / skk) if skk > 0 else float("inf")
    block_resid = phi - (th + w * kb)
    wander_q = wander_variance([block_resid], [var_phase_block])
    wander_scale = slope_variance_per_wander(nb) / (2 * np.pi * sps * B) ** 2
    cfo_thermal_std = w_std / (2 * np.pi * sps)

    F = f0 + w / (2 * np.pi * sps)
    m_f = n0 + frac                                   # received frame start (absolute, fractional)
    ref = m_f + (ntaps - 1) / 2 + kc * sps            # centre symbol's pulse peak (absolute sample)
    F += hyp                                          # the searched offset the capture was derotated by
    to_ref = np.exp(2j * np.pi * (f0 * (ref - lag) + hyp * ref))    # gc: f0-derotated, phase reference at lag
    g = gc * to_ref
    a = float(amplitude)
    points = v * rot / (np.abs(x) ** 2) * to_ref / a
    return LinkEstimate(found=True, h=complex(g / a), h_std=math.sqrt(2 * noise_var / ex) / abs(a), cfo=float(F),
                        cfo_std=math.sqrt(cfo_thermal_std ** 2 + wander_q * wander_scale), delay=float(m_f - nominal), ref_sample=float(ref),
                        snr_db=float(10 * np.log10(abs(gc) ** 2 / (2 * noise_var))), noise_var=noise_var,
                        rho=det.rho, points=points, cfo_thermal_std=cfo_thermal_std, wander_q=wander_q,
                        wander_scale=wander_scale, block_resid=block_resid, block_var=var_phase_block,
                        block_samples=B * sps)


def _offset_candidates(y: np.ndarray, start: int, template: np.ndarray, n_lags: int, Np: int, det,
                       copy: np.ndarray, period: int) -> list[float]:
    """Carrier offsets (cycles/sample) worth a full estimate: for hypotheses 0.5 / len(template) apart within
    +-CFO_SEARCH whose derotated capture shows the preamble, the hypothesis plus the offset its two copies
    give (Schmidl-Cox: unambiguous within +-0.5 / period), and that +- one Zadoff-Chu bin (1 / period)."""
    step = 0.5 / len(template)
    n = np.arange(len(y), dtype=np.float64)
    out: list[float] = []
    for k in sorted(range(-int(CFO_SEARCH / step), int(CFO_SEARCH / step) + 1), key=abs):
        if k and det.found and det.rho >= SEARCH_RHO:
            break                       # a whole peak unrotated: only its bin's neighbours are candidates
        yk = y * np.exp(-2j * np.pi * k * step * n) if k else y
        d = det if k == 0 else detect(yk[start:], template, n_lags, Np)
        if not d.found:
            continue
        f = k * step + repeat_cfo(yk, start + d.lag, copy, period)
        for g in (f, f - 1.0 / period, f + 1.0 / period):
            if abs(g) <= CFO_SEARCH + step and all(abs(g - o) > 0.25 / period for o in out):
                out.append(g)
    return out
