"""OFDM for analog over-the-air aggregation (``phy.waveform = "ofdm"``, issue 26 item 2): the layout, the
map of payload reals onto subcarriers, the time-domain burst and the receiver (pure numpy: the loopback's
GNU Radio transmitter, radio/loopback_ofdm.py, builds the same samples; the sim air uses the layout).

Layout (``OfdmLayout``): FFT size N = ``phy.ofdm_fft``, cyclic prefix ``phy.ofdm_cp`` samples, ``phy.ofdm_used``
occupied subcarriers centred on DC (DC itself unused: k = -U/2..-1, 1..U - U/2), a comb pilot on every
``phy.ofdm_pilot_spacing``-th occupied subcarrier of every payload symbol, ``phy.ofdm_train`` training
symbols (every occupied subcarrier a known unit-modulus Zadoff-Chu value) before the payload, ``phy.guard``
silent samples each side. The FFT is unitary (energy per sample = energy per subcarrier symbol), so with
sigma_c2 per real coordinate in the time domain the noise on each subcarrier is CN(0, 2 sigma_c2) too.

Payload (paper 000 eq. 10, per subcarrier): the d reals are packed two per complex symbol (I and Q both carry
values, phy/packing.py), and complex symbol m goes to payload OFDM symbol m // n_d on data carrier
``carriers[m % n_d]``: ``carriers`` is the round's plan-time list of data subcarriers (comb pilots excluded,
and a subcarrier that every client's truncated channel inversion silences skipped: power/ofdm_plan.py),
the same for every client, so the superposition adds the same coordinate of every payload. Client i
multiplies subcarrier k by its factor alpha_ik; the reference (training and pilots) is pre-equalised, c /
H_ik, as in phy/reference.py, so the receiver sees the sum A_k = c x (senders on k) on every subcarrier.

Receiver (``demodulate``): timing by correlation with the known training burst (the superposed reference
A_k), the receiver's CFO from the phase advance between the identical training symbols (Schmidl-Cox; taken
out in the time domain, so it leaves no inter-carrier interference), FFT windows ``backoff`` samples inside the cyclic prefix (a timing error within the prefix is a
linear phase, inter-symbol-interference free while CP >= delay extent + backoff); per-subcarrier channel
by least squares on the training symbols, G_k = mean_t Y_tk / (A_k t_k), optionally smoothed
(``smoothing = "delay"``: the common response of pre-equalised links is one delay and one phase, fitted
to the LS estimates); the common phase of each payload symbol tracked on the comb pilots (Kalman smoother
of phy/sync.py: receiver CFO and phase noise). Equalisation takes out the phase only (the magnitude is the
clients' pre-equalisation, as in the single-carrier modem): y_k e^{-j angle G_k - j theta_s}, unit
modulus, so the noise per real coordinate stays sigma^2 and the receiver's scaling is alpha_u alone.

Airtime: ``ofdm_airtime(d, rate, phy)`` seconds per round (and ``OfdmLayout.burst_samples``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.phy.sync import track_phase
from otafl_sdr.phy.zadoff_chu import zadoff_chu

SMOOTHING = ("none", "delay")
TRAIN_ROOT = 1
OMEGA_PRIOR = 0.01               # (rad / OFDM symbol)^2: prior variance of the receiver CFO the tracker learns
MIN_RHO = 0.5                  # normalised correlation below which no training burst was found
NO_TRAINING = "no OFDM training symbols detected"


@dataclass(frozen=True)
class OfdmLayout:
    """Index map of the OFDM waveform (module doc). ``bins`` (U,) FFT bin of each occupied subcarrier in
    frequency order; ``pilot_pos`` / ``data_pos``: positions (0..U-1) of the comb pilots / data carriers."""

    fft: int = 64
    cp: int = 16
    used: int = 52
    pilot_spacing: int = 13
    train: int = 4
    guard: int = 64

    @classmethod
    def from_phy(cls, phy) -> "OfdmLayout":
        return cls(int(phy.ofdm_fft), int(phy.ofdm_cp), int(phy.ofdm_used), int(phy.ofdm_pilot_spacing),
                   int(phy.ofdm_train), int(phy.guard))

    @property
    def symbol_len(self) -> int:
        return self.fft + self.cp

    @cached_property
    def freqs(self) -> np.ndarray:
        """(U,) signed subcarrier indices, DC skipped."""
        lo = self.used // 2
        return np.concatenate([np.arange(-lo, 0), np.arange(1, self.used - lo + 1)]).astype(np.int64)

    @cached_property
    def bins(self) -> np.ndarray:
        return self.freqs % self.fft

    @cached_property
    def pilot_pos(self) -> np.ndarray:
        if self.pilot_spacing <= 0:
            return np.zeros(0, np.int64)
        return np.arange(self.pilot_spacing // 2, self.used, self.pilot_spacing, dtype=np.int64)

    @cached_property
    def data_pos(self) -> np.ndarray:
        return np.setdiff1d(np.arange(self.used, dtype=np.int64), self.pilot_pos)

    @cached_property
    def train_seq(self) -> np.ndarray:
        """(U,) unit-modulus training values (Zadoff-Chu: flat spectrum, low PAPR)."""
        return zadoff_chu(self.used, TRAIN_ROOT)

    @property
    def pilot_seq(self) -> np.ndarray:
        return self.train_seq[self.pilot_pos]

    def payload_symbols(self, n_complex: int, n_data: int | None = None) -> int:
        """OFDM symbols that carry ``n_complex`` payload symbols on ``n_data`` data carriers (all by default)."""
        nd = len(self.data_pos) if n_data is None else int(n_data)
        return -(-int(n_complex) // max(nd, 1))

    def frame_symbols(self, n_ofdm: int) -> int:
        return self.train + int(n_ofdm)

    def burst_samples(self, n_ofdm: int) -> int:
        """Samples of one burst (guards, training, payload symbols, each with its prefix)."""
        return 2 * self.guard + self.frame_symbols(n_ofdm) * self.symbol_len

    def reference_energy(self, n_ofdm: int) -> float:
        """Unit-reference energy in subcarrier-symbol units: training symbols x U + comb pilots."""
        return float(self.train * self.used + int(n_ofdm) * len(self.pilot_pos))

    # ------------------------------------------------------------------ grids
    def grid(self, symbols: np.ndarray, carriers: np.ndarray, n_ofdm: int, ref=None) -> np.ndarray:
        """(..., n) payload symbols -> (..., train + n_ofdm, U) frequency grid: payload symbol m on payload
        OFDM symbol m // n_d, carrier ``carriers[m % n_d]``; training rows and comb pilots carry ``ref``
        ((..., U) per-carrier reference factor, e.g. c / H_ik) times the known values; zeros elsewhere."""
        symbols = np.asarray(symbols, dtype=np.complex128)
        carriers = np.asarray(carriers, dtype=np.int64)
        n, nd = symbols.shape[-1], len(carriers)
        if n > nd * int(n_ofdm):
            raise ValueError(f"{n} symbols do not fit {n_ofdm} OFDM symbols of {nd} data carriers")
        lead = symbols.shape[:-1]
        out = np.zeros(lead + (self.train + int(n_ofdm), self.used), dtype=np.complex128)
        pay = np.zeros(lead + (int(n_ofdm) * nd,), dtype=np.complex128)
        pay[..., :n] = symbols
        out[..., self.train:, carriers] = pay.reshape(lead + (int(n_ofdm), nd))
        if ref is not None:
            r = np.broadcast_to(np.asarray(ref, dtype=np.complex128), lead + (self.used,))
            out[..., :self.train, :] = (r * self.train_seq)[..., None, :]
            if len(self.pilot_pos):
                out[..., self.train:, self.pilot_pos] = (r[..., self.pilot_pos] * self.pilot_seq)[..., None, :]
        return out

    def payload(self, grid: np.ndarray, carriers: np.ndarray, n_complex: int) -> np.ndarray:
        """Inverse of :meth:`grid` for the payload: (..., S, U) -> (..., n_complex)."""
        g = np.asarray(grid)[..., self.train:, :][..., np.asarray(carriers, np.int64)]
        return g.reshape(g.shape[:-2] + (-1,))[..., :int(n_complex)]

    def to_time(self, grid: np.ndarray) -> np.ndarray:
        """(..., S, U) grid -> (..., S (N + cp)) samples: unitary IFFT, cyclic prefix."""
        grid = np.asarray(grid, dtype=np.complex128)
        full = np.zeros(grid.shape[:-1] + (self.fft,), dtype=np.complex128)
        full[..., self.bins] = grid
        x = np.fft.ifft(full, axis=-1) * np.sqrt(self.fft)
        x = np.concatenate([x[..., self.fft - self.cp:], x], axis=-1)
        return x.reshape(x.shape[:-2] + (-1,))

    def modulate(self, grid: np.ndarray) -> np.ndarray:
        """(S, U) grid -> (burst_samples,) guard, symbols, guard."""
        x = self.to_time(grid)
        return np.concatenate([np.zeros(self.guard, complex), x, np.zeros(self.guard, complex)])

    def read(self, samples: np.ndarray, start: int, n_symbols: int, backoff: int = 0) -> np.ndarray:
        """(n_symbols, U) unitary FFT of the windows of the symbols whose prefix starts at ``start``, each
        taken ``backoff`` samples before the prefix ends (the linear phase that gives is the receiver's)."""
        L, N = self.symbol_len, self.fft
        idx = start + self.cp - int(backoff) + np.arange(n_symbols)[:, None] * L + np.arange(N)[None, :]
        win = np.asarray(samples, dtype=np.complex128)[idx]
        return (np.fft.fft(win, axis=-1) / np.sqrt(N))[:, self.bins]


def subcarrier_response(fir: np.ndarray, lay: OfdmLayout) -> np.ndarray:
    """(..., L) causal FIR at sample spacing -> (..., U) its gain on each occupied subcarrier,
    H[k] = sum_n fir[n] e^{-j 2 pi bin_k n / N} (L - 1 <= cp: the prefix makes the convolution circular)."""
    fir = np.asarray(fir, dtype=np.complex128)
    n = np.arange(fir.shape[-1])
    return fir @ np.exp(-2j * np.pi * np.outer(n, lay.bins) / lay.fft)


def ofdm_airtime(d: int, rate: float, phy, n_data: int | None = None) -> float:
    """Seconds on the air of one OFDM round carrying d reals at ``rate`` samples/s: guards, training and
    ceil(ceil(d/2) / n_d) payload symbols with their prefixes (n_d: data carriers, all by default; a round
    whose truncation skips carriers needs that many more symbols)."""
    lay = OfdmLayout.from_phy(phy)
    return lay.burst_samples(lay.payload_symbols(symbols_for(d), n_data)) / float(rate)


def ofdm_overhead(d: int, phy) -> float:
    """Share of the round's samples not carrying payload symbols (guards, prefixes, training, pilots)."""
    lay = OfdmLayout.from_phy(phy)
    n = symbols_for(d)
    return 1.0 - n / lay.burst_samples(lay.payload_symbols(n))


@dataclass
class OfdmResult:
    """What the OFDM receiver made of one capture: symbols (n,) equalised payload (None when not ok),
    timing (sample of the first training prefix), gain (U,) the per-subcarrier LS estimate (smoothed when
    asked), phase (S_payload,) the common phase tracked per payload symbol, rho the normalised correlation
    peak, noise_var the per-real-coordinate noise measured on the training symbols."""

    symbols: np.ndarray | None
    ok: bool
    reason: str = ""
    timing: int = 0
    gain: np.ndarray | None = None
    phase: np.ndarray | None = None
    rho: float = 0.0
    noise_var: float = float("nan")
    extra: dict = field(default_factory=dict)


def fit_delay(G: np.ndarray, lay: OfdmLayout, w: np.ndarray) -> np.ndarray:
    """Smooth per-subcarrier estimates G (U,) to a g e^{-j 2 pi f tau / N} (one delay, one complex gain),
    weights w (U,) >= 0 (0: no estimate); tau by a fine search of the weighted correlation."""
    g, ramp = delay_and_gain(G, lay, w)
    return g * ramp


def delay_and_gain(G: np.ndarray, lay: OfdmLayout, w: np.ndarray) -> tuple[complex, np.ndarray]:
    """fit_delay's g (the common complex gain, at DC) and ramp e^{-j 2 pi f tau / N} (U,)."""
    f = lay.freqs.astype(np.float64)
    taus = np.linspace(-lay.cp, lay.cp, 64 * lay.cp + 1)
    score = np.abs((w * G) @ np.exp(2j * np.pi * np.outer(f, taus) / lay.fft))
    tau = taus[int(np.argmax(score))]
    for step in (1 / 64, 1 / 512):
        cand = tau + step * np.arange(-8, 9)
        s = np.abs((w * G) @ np.exp(2j * np.pi * np.outer(f, cand) / lay.fft))
        tau = cand[int(np.argmax(s))]
    ramp = np.exp(-2j * np.pi * f * tau / lay.fft)
    g = np.sum(w * G * np.conj(ramp)) / max(np.sum(w), 1e-300)
    return complex(g), ramp


def demodulate(samples: np.ndarray, lay: OfdmLayout, n_complex: int, carriers: np.ndarray, n_ofdm: int,
               ref_amp: np.ndarray, *, search: int, backoff: int = 0, smoothing: str = "delay",
               phase_noise: float = 1e-6) -> OfdmResult:
    """One capture -> the n_complex payload symbols of the superposition (module doc).

    ``ref_amp`` (U,): the superposed reference the receiver expects on each subcarrier (c x senders on k,
    from the plan); ``search``: first-prefix positions 0..search-1 tried; they may run at most L - 1 samples past
    the true start (L = fft + cp; then, with ``lay.train`` >= 2 identical training symbols, no window the
    timing search correlates reaches the payload, and none is the training shifted by a whole symbol); ``backoff``: samples the FFT
    window starts before the prefix ends; ``phase_noise``: rad/sqrt(sample) the phase tracker assumes."""
    y = np.asarray(samples).astype(np.complex128, copy=False)
    A = np.asarray(ref_amp, dtype=np.complex128)
    S = lay.frame_symbols(n_ofdm)
    need = S * lay.symbol_len
    if not np.any(A != 0):
        return OfdmResult(None, False, f"{NO_TRAINING} (no client sent the reference)")
    if len(y) < need + search:
        return OfdmResult(None, False, f"capture of {len(y)} samples is shorter than one burst window ({need + search})")
    # timing template: the training but its last symbol less one sample, so that a window starting up to
    # L - 1 samples after the true start (the search's slack) still ends inside the training: the payload
    # (causal channel) never enters the correlation and the timing cannot depend on the data (issue 26 item 3)
    tmpl = lay.to_time(lay.grid(np.zeros(0), lay.data_pos, 0, A)[:lay.train])[:(lay.train - 1) * lay.symbol_len + 1]
    seg = y[:search + len(tmpl) - 1]
    corr = np.abs(np.correlate(seg, tmpl, mode="valid"))                               # conj(tmpl) inside
    energy = np.convolve(np.abs(seg) ** 2, np.ones(len(tmpl)), mode="valid")
    rho_all = corr / np.sqrt(np.maximum(energy, 1e-300) * np.sum(np.abs(tmpl) ** 2))
    n0 = int(np.argmax(rho_all))
    rho = float(rho_all[n0])
    if rho < MIN_RHO:
        return OfdmResult(None, False, NO_TRAINING, rho=rho)
    cfo = 0.0
    cfo_var = float("nan")
    if lay.train > 1:             # identical training symbols: the phase advance over one symbol is the CFO
        L = lay.symbol_len
        a = y[n0 + lay.cp:n0 + (lay.train - 1) * L]                   # past the prefix's multipath transient
        b = y[n0 + lay.cp + L:n0 + lay.train * L]
        ab = np.vdot(a, b)
        cfo = float(np.angle(ab)) / (2 * np.pi * L)
        # its variance: the windows overlap but for L samples at each end, and noise on the shared samples
        # enters sum a* b as a real multiple of its phasor, so only the ends move the phase:
        # var(angle) = sigma_c^2 (|a_first L|^2 + |b_last L|^2) / (2 |sum a* b|^2), sigma_c^2 per complex sample
        edges = float(np.vdot(a[:L], a[:L]).real + np.vdot(b[-L:], b[-L:]).real)
        cfo_var = edges / (2 * abs(ab) ** 2 * (2 * np.pi * L) ** 2) if abs(ab) > 0 else float("nan")
        y = y * np.exp(-2j * np.pi * cfo * (np.arange(len(y)) - n0))  # |cfo| < 1 / (2 L) cycles/sample
    Y = lay.read(y, n0, S, backoff)                                                     # (S, U)
    tx = A != 0
    T = Y[:lay.train]
    ls = np.where(tx, np.mean(T, axis=0) / np.where(tx, A * lay.train_seq, 1.0), 0.0)   # G_k (LS)
    resid = T - ls * A * lay.train_seq
    noise_var = float(np.sum(np.abs(resid[:, tx]) ** 2) / max(2 * (lay.train - 1) * np.count_nonzero(tx), 1)) \
        if lay.train > 1 else float("nan")
    w = np.abs(A) ** 2
    G = fit_delay(ls, lay, w) if smoothing == "delay" else ls
    G = np.where(tx, G, fit_delay(ls, lay, w) if np.any(~tx) else G)                    # no reference: the fit
    rot = np.exp(-1j * np.angle(G))
    P = Y[lay.train:]
    theta = np.zeros(int(n_ofdm))
    pp = lay.pilot_pos[tx[lay.pilot_pos]] if len(lay.pilot_pos) else lay.pilot_pos
    if len(pp) and n_ofdm > 0:
        ref = G[pp] * A[pp] * lay.train_seq[pp]
        e = float(np.sum(np.abs(ref) ** 2))
        meas = (P[:, pp] @ np.conj(ref)) / e                                           # ~ e^{j theta_s}
        nv = noise_var if np.isfinite(noise_var) and noise_var > 0 else 1e-12
        r_var = np.full(int(n_ofdm), max(nv / e, 1e-14))
        t = np.arange(int(n_ofdm), dtype=np.float64)
        # training at t = -(train + 1)/2 (phase 0 by construction of G) anchors the track
        t_all = np.concatenate([[-(lay.train + 1) / 2.0], t])
        m_all = np.concatenate([[1.0 + 0j], meas])
        v_all = np.concatenate([[max(nv / (lay.train * float(np.sum(w))), 1e-14)], r_var])
        q = max(float(phase_noise) ** 2 * lay.symbol_len, 1e-16)
        th, _ = track_phase(t_all, m_all, v_all, q, 1e-18, OMEGA_PRIOR)
        theta = th[1:]
    Z = P * rot[None, :] * np.exp(-1j * theta)[:, None]
    grid = np.concatenate([T, Z], axis=0)
    sym = lay.payload(grid, carriers, n_complex)
    return OfdmResult(symbols=sym, ok=True, timing=n0, gain=G, phase=theta, rho=rho, noise_var=noise_var,
                      extra={"cfo": cfo, **reference_statistics(lay, ls, G, A, Z, pp, tx, noise_var, cfo_var)})


def reference_statistics(lay: OfdmLayout, ls: np.ndarray, G: np.ndarray, A: np.ndarray, Z: np.ndarray,
                         pilots: np.ndarray, tx: np.ndarray, noise_var: float, cfo_var: float) -> dict:
    """The frame's reference, as the single-carrier modem reports it (calibration/link_health.py's figures;
    training and pilots only, no payload): ``gain`` the common complex gain of the received reference relative
    to the expected A_k at DC, g of the one-delay fit g e^{-j 2 pi f tau / N} to the LS estimates ls_k
    (delay_and_gain, weights |A_k|^2 on the subcarriers with a reference; the delay is the FFT window's backoff
    into the prefix plus any residual timing, which ``timing`` reports; 1 on a link that matches its calibration); ``cfo_std`` the Schmidl-Cox estimate's standard error in cycles/sample,
    sqrt(2 sigma^2 cfo_var) (``cfo_var`` from demodulate, per unit complex noise: the windows' ends only,
    as its comment derives; 2 sigma^2 the complex noise per sample); ``nmse_pilots`` the comb pilots' error after
    the phase tracking, sum |Z_sp - |G_p| A_p t_p|^2 / sum |G_p A_p t_p|^2; ``reference`` the per-subcarrier
    LS estimates with the fitted delay taken out, ls_k e^{+j 2 pi f tau / N} (U_tx,) complex: the constellation
    of the reference received over sent (a cluster at g; 1 when calm);
    ``subcarrier_gain_db`` [lowest, highest] 20 log10 |ls_k| (a subcarrier the calibration no longer fits);
    ``subcarrier_std`` the standard error of one subcarrier's |ls_k| / |g| (the largest over k): ls_k averages
    ``train`` symbols of noise sigma^2 per real coordinate through A_k, so sqrt(sigma^2 / (train |A_k|^2)) / |g|;
    a calm link's weakest of U subcarriers sits about 2.5 of these below 1, never a fixed fraction of a dB."""
    w = np.where(tx, np.abs(A) ** 2, 0.0)
    g, ramp = delay_and_gain(ls, lay, w)           # the FFT window's backoff and any delay inside the prefix: a ramp
    out: dict = {"gain": g, "reference": (ls * np.conj(ramp))[tx]}
    nv = noise_var if np.isfinite(noise_var) and noise_var > 0 else float("nan")
    out["cfo_std"] = float(np.sqrt(2 * nv * cfo_var))         # NaN without a noise estimate
    if len(pilots) and Z.shape[0] > 0:
        want = np.abs(G[pilots]) * A[pilots] * lay.train_seq[pilots]
        out["nmse_pilots"] = float(np.sum(np.abs(Z[:, pilots] - want[None, :]) ** 2)
                                   / (Z.shape[0] * np.sum(np.abs(want) ** 2)))
    else:
        out["nmse_pilots"] = float("nan")
    mag = np.abs(ls[tx])
    out["subcarrier_gain_db"] = [float(20 * np.log10(max(mag.min(), 1e-15))), float(20 * np.log10(max(mag.max(), 1e-15)))]
    a_min = float(np.min(np.abs(A[tx]))) if np.any(tx) else 0.0
    out["subcarrier_std"] = float(np.sqrt(nv / (lay.train * a_min ** 2)) / abs(g)) if a_min > 0 and abs(g) > 0 \
        else float("nan")
    return out
