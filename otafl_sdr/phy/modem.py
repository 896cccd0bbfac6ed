"""The burst modem: analog symbols <-> one shaped burst with a pre-equalised reference.

Transmit (one client): frame = [ZC preamble, sent twice | payload with a (boosted) pilot every
``phy.pilot_spacing`` symbols | closing pilot] (:mod:`otafl_sdr.phy.framing`), the preamble and pilots multiplied by ``ref_gain`` (c / h_i, see
:mod:`otafl_sdr.phy.reference`), RRC-shaped at ``phy.sps`` samples per symbol, with ``phy.guard``
silent samples on each side. Receive (the superposition): find the preamble by correlation (a missed
preamble is reported, never a silent zero), remove the receiver's timing and CFO, matched-filter,
remove the known ISI of the truncated RRC pair, and take out the receiver's phase (incl. phase noise)
tracked over the preamble and pilots. The payload symbols come back as sent, summed over clients:
sum_i h_i alpha_i s(u_i) + noise (eq. 10/16 of paper 000); the air divides by alpha_u.

Channel uses are counted in symbol periods on the air (``ceil(burst_samples / sps)``, guards and
filter tails included): 2 reals per use for the payload, overhead <= 2% for d >= 100,000."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.fft import next_fast_len

from otafl_sdr.phy.framing import FrameLayout
from otafl_sdr.phy.pulse_shaping import delayed_taps, matched_filter, rrc_taps, shape, symbol_response, zf_equalise
from otafl_sdr.phy.sync import detect, refine_fraction, repeat_cfo, track_phase

DEFAULT_PHASE_NOISE = 1e-5     # rad per sqrt(sample): the receiver oscillator's random-walk phase noise
                               # the pilot tracker assumes unless told (Modem(..., phase_noise=...))
NO_PREAMBLE = "no preamble detected"
FRAC_PAD = 64                  # samples of padding around the taps for a fractionally delayed template


@dataclass
class DemodResult:
    """What the receiver made of one capture.

    symbols: (n,) complex payload symbols (phase-corrected; None when not ok); ok / reason; timing:
    detected frame start minus ``phy.guard`` (samples: the capture's delay against a burst as
    ``modulate`` returns it; + timing_frac for the fractional part); cfo: receiver CFO
    estimate (cycles/sample); phase: common phase at the preamble (rad); gain: complex gain of the
    received reference relative to ``ref_amplitude`` (1 for a perfectly calibrated link); nmse_pilots:
    ||pilots after correction - pilots||^2 / ||pilots||^2 (a measured SNR of the reference); reference:
    (m,) complex, the received preamble symbols over the ones sent (z_k / (A p_k), before the receiver's phase
    tracking; m = preamble_len less the ISI reach next to the payload, so no payload symbol reaches them): a
    cluster at ``gain`` (its constellation: results/constellation.py)."""

    symbols: np.ndarray | None
    ok: bool
    reason: str = ""
    timing: int = 0
    cfo: float = 0.0
    phase: float = 0.0
    gain: complex = 0j
    nmse_pilots: float = float("nan")
    timing_frac: float = 0.0       # fractional timing (samples), when Modem(fractional_timing=True)
    rho: float = 0.0               # normalised preamble correlation at the peak
    cfo_std: float = float("nan")  # the standard error of ``cfo`` (cycles/sample; cfo_precision)
    noise_var: float = float("nan")  # per-real-coordinate noise estimate at the symbol level
    reference: np.ndarray | None = None   # (m,) complex received / sent preamble symbols (class doc)
    extra: dict = field(default_factory=dict)


def cfo_precision(t: np.ndarray, r_var: np.ndarray, repeat_var: float, sps: int) -> float:
    """The standard error (cycles/sample) of a frame's carrier-offset estimate from its reference: the
    weighted least-squares slope of the reference's phase measurements (times ``t`` in symbols, phase
    variances ``r_var`` rad^2: var = 1 / sum_k w_k (t_k - t_w)^2, w = 1 / r_var) combined with the preamble's
    repeat estimate (``repeat_var`` (rad/symbol)^2, Schmidl-Cox: 2 r / N_zc^3) as independent estimates,
    (1 / var_wls + 1 / repeat_var)^(-1/2) / (2 pi sps). What a calm link's offset reading scatters by."""
    w = 1.0 / np.maximum(np.asarray(r_var, dtype=np.float64), 1e-300)
    tw = float(np.sum(w * t) / np.sum(w))
    info = float(np.sum(w * (np.asarray(t, dtype=np.float64) - tw) ** 2)) + 1.0 / max(float(repeat_var), 1e-300)
    return float(1.0 / np.sqrt(info) / (2 * np.pi * sps))


class Modem:
    """Burst modem for analog over-the-air aggregation.

    Parameters: ``phy`` (PhyConfig: sps, rolloff, rrc_span, preamble_len, pilot_spacing, guard);
    keyword-only ``phase_noise`` (rad/sqrt(sample), the receiver's oscillator random walk the tracker
    assumes), ``fractional_timing`` (refine the timing below one sample by maximising the preamble
    correlation over band-limited delays of the pulse; on by default: a 0.3-sample offset at sps 2
    costs ~250x the noise of a DP aggregate otherwise, and on whole-sample offsets it costs < 0.05%),
    ``correct_gain`` (divide the payload by the measured |gain|; off by default: the reference is
    pre-equalised with the clients' CSI, so its magnitude is already that of the calibrated link)."""

    def __init__(self, phy, *, phase_noise: float = DEFAULT_PHASE_NOISE, fractional_timing: bool = True,
                 correct_gain: bool = False):
        self.phy = phy
        self.sps = int(phy.sps)
        self.guard = int(phy.guard)
        self.taps = rrc_taps(self.sps, phy.rolloff, phy.rrc_span)
        self.ntaps = len(self.taps)
        self.phase_noise = float(phase_noise)
        self.fractional_timing = bool(fractional_timing)
        self.correct_gain = bool(correct_gain)
        self._c = symbol_response(self.taps, self.taps, self.sps)
        self._L = (len(self._c) - 1) // 2                      # ISI reach in symbols each side
        self._layout = lru_cache(maxsize=8)(self._make_layout)

    # ---------------------------------------------------------------- layout and sizes
    def _make_layout(self, n_symbols: int) -> FrameLayout:
        return FrameLayout(int(n_symbols), int(self.phy.preamble_len), int(self.phy.pilot_spacing))

    def layout(self, n_symbols: int) -> FrameLayout:
        return self._layout(int(n_symbols))

    def shaped_len(self, n_symbols: int) -> int:
        """Samples of the shaped frame (full convolution, no guards)."""
        return (self.layout(n_symbols).n_frame - 1) * self.sps + self.ntaps

    def burst_samples(self, n_symbols: int) -> int:
        """Samples of one burst as :meth:`modulate` returns it (guards included)."""
        return self.shaped_len(n_symbols) + 2 * self.guard

    def channel_uses(self, n_symbols: int) -> int:
        """Symbol periods the burst occupies on the air (guards, preamble, pilots, filter tails)."""
        return -(-self.burst_samples(n_symbols) // self.sps)

    def overhead(self, n_symbols: int) -> float:
        """Share of the channel uses not carrying payload symbols."""
        return 1.0 - n_symbols / self.channel_uses(n_symbols)

    # ---------------------------------------------------------------- transmit
    def frame(self, symbols: np.ndarray, ref_gain=1.0) -> np.ndarray:
        """(..., n) payload symbols -> (..., n_frame) frame symbols, reference x ref_gain (batch-able)."""
        symbols = np.asarray(symbols)
        return self.layout(symbols.shape[-1]).build(symbols, ref_gain)

    def modulate(self, symbols: np.ndarray, ref_gain: complex = 1) -> np.ndarray:
        """(n,) complex payload symbols -> (burst_samples(n),) complex128 samples of one burst: guard,
        RRC-shaped frame, guard. The preamble/pilots are multiplied by ``ref_gain``."""
        symbols = np.asarray(symbols, dtype=np.complex128)
        if symbols.ndim != 1:
            raise ValueError(f"modulate takes one client's (n,) symbols, got shape {symbols.shape}")
        shaped = shape(self.frame(symbols, ref_gain), self.taps, self.sps)
        out = np.zeros(len(shaped) + 2 * self.guard, dtype=np.complex128)
        out[self.guard:self.guard + len(shaped)] = shaped
        return out

    def jammer_mask(self, n_symbols: int) -> np.ndarray:
        """(n_frame,) 1 in payload slots, 0 in reference slots: the jammer's gate (aligned with frame())."""
        return self.layout(n_symbols).payload_mask()

    def preamble_template(self, copies: int | None = None, taps: np.ndarray | None = None) -> np.ndarray:
        """The shaped unit preamble the correlator looks for (or its first ``copies`` ZC copies), cut to
        the samples before the first payload pulse starts (``copies * Nzc * sps``): what follows the
        preamble may be a strong (jammed) payload that must not enter the timing or CFO estimates."""
        lay = self.layout(0)
        copies = lay.preamble_len // lay.zc_len if copies is None else copies
        full = shape(np.tile(lay.zc, copies), self.taps if taps is None else taps, self.sps)
        return full[:copies * lay.zc_len * self.sps]

    # ---------------------------------------------------------------- receive
    def demodulate(self, samples: np.ndarray, n_symbols: int, ref_amplitude: complex) -> DemodResult:
        """One capture holding one burst (anywhere, with slack) -> the n_symbols payload symbols.

        ``ref_amplitude``: the reference amplitude the receiver expects, sum over senders of
        h_i ref_gain_i (= number of senders x c with perfect CSI)."""
        samples = np.asarray(samples).astype(np.complex128, copy=False)
        lay = self.layout(n_symbols)
        flen = self.shaped_len(n_symbols)
        if len(samples) < flen:
            return DemodResult(None, False, f"capture of {len(samples)} samples is shorter than one burst ({flen})")
        A = complex(ref_amplitude)
        if A == 0:
            return DemodResult(None, False, f"{NO_PREAMBLE} (no client sent the reference)")
        Np, Nzc, sps, L = lay.preamble_len, lay.zc_len, self.sps, self._L
        template = self.preamble_template()
        n_lags = len(samples) - flen + 1
        det = detect(samples, template, n_lags, Np)
        if not det.found:
            return DemodResult(None, False, NO_PREAMBLE, rho=det.rho)
        Lt = len(template)
        f0 = repeat_cfo(samples, det.lag, self.preamble_template(copies=1), Nzc * sps)

        # derotate the frame region (+- ISI reach, padding and timing slack), phase reference at lag
        margin = 2 * self.ntaps + 2 * FRAC_PAD + 2
        lo = max(det.lag - margin, 0)
        hi = min(det.lag + flen + margin, len(samples))
        n = np.arange(lo - det.lag, hi - det.lag, dtype=np.float64)
        region = samples[lo:hi] * np.exp(-2j * np.pi * f0 * n)
        # with the CFO gone the correlation peak is unbiased (no ZC timing/frequency ridge): re-pick it
        cands = [l for l in (det.lag - 1, det.lag, det.lag + 1) if 0 <= l < n_lags and l - lo + Lt <= len(region)]
        n0 = max(cands, key=lambda l: abs(np.vdot(template, region[l - lo:l - lo + Lt])))

        frac = 0.0
        if self.fractional_timing:
            # score on the preamble's interior (both edges cut mid-signal: an unbiased peak; no
            # payload pulse reaches it): template index j is sample n0 - FRAC_PAD + j
            a, b = FRAC_PAD + self.ntaps - 1, FRAC_PAD + (Np * sps - (self.ntaps - 1))
            seg = region[n0 - lo - FRAC_PAD + a:n0 - lo - FRAC_PAD + b]

            def score(tau: float) -> float:   # Cauchy-Schwarz: normalised, so the peak is at the delay
                tmpl = shape(lay.preamble, delayed_taps(self.taps, tau, FRAC_PAD), sps)[a:b]
                return abs(np.vdot(tmpl, seg)) / np.linalg.norm(tmpl)
            frac = refine_fraction(score, -0.6, 0.6, iters=40)
            # undo the delay on the region (band-limited: exact for a delayed DAC output)
            nfft = next_fast_len(len(region))
            f = np.fft.fftfreq(nfft)
            region = np.fft.ifft(np.fft.fft(region, nfft) * np.exp(2j * np.pi * f * frac))[:len(region)]
        L = self._L
        y_full = matched_filter(region, self.taps, sps, n0 - lo - L * sps, lay.n_frame + 2 * L)
        z = zf_equalise(y_full, self._c)                                 # (n_frame,)

        # reference measurements: preamble as one (gain, phase) measurement, pilots one each
        pre = lay.preamble
        G = complex(np.vdot(pre, z[:Np]) / (A * Np))
        resid = z[:Np] - A * G * pre
        noise_var = max(float(np.sum(np.abs(resid) ** 2)) / (2 * max(Np - 1, 1)), 1e-30)
        amp2 = max(abs(A * G) ** 2, 1e-300)
        r_sym = max(noise_var / amp2, 1e-14)                             # phase variance of one symbol
        t = np.concatenate([[(Np - 1) / 2], lay.pilot_idx.astype(np.float64)])
        beta2 = lay.pilot_amplitude ** 2
        meas = np.concatenate([[G], z[lay.pilot_idx] * np.conj(lay.pilots) / (A * beta2 if beta2 else A)])
        r_var = np.concatenate([[r_sym / Np], np.full(lay.n_pilots, r_sym / beta2 if beta2 else r_sym)])
        # prior on the CFO left after the repeat estimate (4x its variance 2 r_sym / Nzc^3), rad/symbol
        om_var0 = 4 * 2 * r_sym / Nzc ** 3 + 1e-18
        q_theta = max(self.phase_noise ** 2 * sps, 1e-16)
        theta_s, omega_s = track_phase(t, meas, r_var, q_theta, 1e-18, om_var0)

        k = np.arange(lay.n_frame, dtype=np.float64)
        theta = np.interp(k, t, theta_s)
        after = k > t[-1]
        theta[after] = theta_s[-1] + omega_s[-1] * (k[after] - t[-1])
        before = k < t[0]
        theta[before] = theta_s[0] + omega_s[0] * (k[before] - t[0])
        zc = z * np.exp(-1j * theta)

        noise_var = float(np.sum(np.abs(zc[:Np] - A * abs(G) * pre) ** 2)) / (2 * max(Np - 1, 1))
        sym = zc[lay.payload_idx]
        if self.correct_gain and abs(G) > 0:
            sym = sym / abs(G)
        ref_idx = lay.pilot_idx if lay.n_pilots else np.arange(Np)
        ref_val = lay.pilots if lay.n_pilots else pre
        nmse_p = float(np.sum(np.abs(zc[ref_idx] / (A * abs(G)) - ref_val) ** 2) / np.sum(np.abs(ref_val) ** 2))
        cfo = f0 + float(np.mean(omega_s)) / (2 * np.pi * sps)
        return DemodResult(symbols=sym, ok=True, timing=n0 - self.guard, cfo=cfo, cfo_std=cfo_precision(
                               t, r_var, 2 * r_sym / Nzc ** 3, sps), phase=float(theta_s[0]),
                           gain=abs(G) * complex(np.exp(1j * theta_s[0])), nmse_pilots=nmse_p,
                           timing_frac=float(frac), rho=det.rho, noise_var=noise_var,
                           reference=z[:max(Np - L, 1)] / (A * pre[:max(Np - L, 1)]))
