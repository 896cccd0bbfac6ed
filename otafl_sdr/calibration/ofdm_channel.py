"""Per-subcarrier channel calibration for OFDM (``phy.waveform = "ofdm"``, issue 26): the session step that
measures every client's H_ik on each occupied subcarrier k of the layout (phy/ofdm.py), its standard error,
and the section of the calibration file (``ofdm``) a run with ``air.csi = "calibrated"`` plans on
(power/ofdm_plan.py; the uhd air's OFDM round, radio/uhd_ofdm.py).

Sounding (over any calibration link, calibration/procedures.py): client t sends alone in slot t, as the
single-carrier channel step does, a periodic burst of ``CAL_SYMBOLS`` copies of the layout's training symbol
(every occupied subcarrier its unit-modulus Zadoff-Chu value, no DC) with a cyclic lead of ``pre`` and a
cyclic tail of ``post`` samples (the link's delay search window plus the prefix). Inside the burst the
signal is N-periodic, so any N-sample window past the channel's transient is a circular convolution: its
unitary FFT is Y_mk = a t_k H_k e^{j 2 pi f_k w / N} + Z_mk, w the window's offset, whatever the (integer or
fractional) delays, Z_mk ~ CN(0, 2 sigma^2) (sigma^2 per real coordinate).

Timing: the strongest path's integer delay d_t (correlation with the whole, non-periodic burst over the
link's delay window; a lag one period off loses a whole symbol of overlap). The file refers every H_ik to
one common instant, the earliest client's strongest path D = min_t d_t, so the clients' relative delays
stay in the phases (pre-equalising c / H_ik makes the superposed reference arrive as one clean delay D:
the round's receiver times on it). Windows at w = D + m N, m = 0..M-1, repeats r = 1..R:

    LS:       H^_k = mean_{m,r} Y_mk / (a t_k),   Var(H^_k) = s^2 = v / (M R),
              v = sum |Y_mk / (a t_k) - H^_k|^2 / (U (M R - 1))   (pooled over k: white noise);
    smoothed (``phy.ofdm_smoothing = "delay"``): H~ = P H^, P the projection onto the responses of delays
              n = -b .. cp - b (b = the receiver's backoff: exactly the taps the round's FFT window takes
              without inter-symbol interference), Cov(H~) = s^2 P, so std_k = s sqrt(P_kk) (~ s sqrt((cp + 1) / U));
              kept only when the LS residual ||(I - P) H^||^2 / s^2 (mean U - cp - 1, std sqrt(U - cp - 1))
              is within 5 of its standard deviations (else the LS is kept). A link with more than 5 % of its
              energy beyond those delays (less the noise's share) is refused in one line: its cyclic prefix
              is shorter than the channel.

The ledger uses ``gain_margin``: 1 / (1 - z std_k / |H~_k|) (z = 3), the factor by which a client that
pre-inverts with H~_ik can reach the receiver above its plan on subcarrier k (calibration/csi.py's flat
margin, per subcarrier). The loopback link knows its channel: the file keeps the truth next to each estimate.

The jammer (a link with one, ``link.has_jammer``: transmitter K) sounds in its own slot after the clients',
the same burst; its H_cj,k is read at its own strongest delay (only |H_cj,k| matters: its noise is not
pre-equalised) and kept as the section's ``jammer``. Its noise, white over the payload subcarriers as sent
(alpha_cj CN(0, 2) per slot, phy/ofdm_burst.py), arrives coloured by the link: alpha_cj^2 |H_cj,k|^2 per
real coordinate on subcarrier k, so a multipath jammer link puts less noise on some subcarriers than its
flat gain says. ``SubcarrierCsi.jammer_lower`` is the per-subcarrier lower bound |H~_cj,k| - z std_k the
booking counts (power/ofdm_plan.py). After its sounding the jammer sends ``NOISE_SYMBOLS`` OFDM symbols of
noise as its round does (a CN(0, 2) on every data carrier, nothing on the pilots, the sounding's amplitude),
read on its own symbol grid, each window's floor f_w from its pilot positions,
and its noise efficiency (``_noise_efficiency``: the draws sent are known, so each window's prediction uses
them; its standard error is the ratio's over the M R windows)

    r = sum_{w,k} (|Y_wk|^2 / 2 - f_w) / sum_{w,k} |H~_cj,k|^2 |X_wk|^2 / 2,

the noise it delivers over what its estimated coherent gain predicts (1 on a linear chain; below 1 where a
PA compresses noise peaks the sounding's constant-envelope training never reaches). It is relative to the
estimates H~_cj,k the booking multiplies it with, so it absorbs their common error (their pooled power is
within the sounding's noise of the truth: 1.4 % high at 0.057 relative error per subcarrier, r 1.7 % low);
each subcarrier's own error is in its lower bound. The booking counts
min(1, r - z s.e.(r)) of the per-subcarrier lower bounds (power/ofdm_plan.jammer_noise_var)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.calibration.procedures import QUANTUM, SLOT_GAP, Slots

CAL_SYMBOLS = 16            # periods of the training symbol per slot
NOISE_SYMBOLS = 400         # OFDM symbols of the jammer's noise test (its delivered noise over its coherent gain)
MIN_RHO = 0.5               # normalised correlation below which no sounding burst was found
FIT_SIGMAS = 5.0            # delay-domain fit kept while its residual is within this many standard deviations
MARGIN_Z = 3.0
MAX_OUTSIDE = 0.05          # share of a link's energy beyond the prefix's delays that refuses the calibration
                            # (inter-symbol interference at -13 dB; a fractional delay's band-limited tail is ~2 %)


def backoff(lay: OfdmLayout, extent: int) -> int:
    """Samples the receiver's FFT window starts before a prefix ends (radio/loopback_ofdm.py's choice)."""
    return max(0, (lay.cp - int(extent)) // 2)


def training_symbol(lay: OfdmLayout) -> np.ndarray:
    """(N,) one training symbol without prefix (unitary IFFT of the Zadoff-Chu values on the used bins)."""
    full = np.zeros(lay.fft, dtype=np.complex128)
    full[lay.bins] = lay.train_seq
    return np.fft.ifft(full) * math.sqrt(lay.fft)


@dataclass(frozen=True)
class Sounding:
    """The slot burst: ``pre`` cyclic lead, ``symbols`` periods of N, ``post`` cyclic tail (module doc)."""

    lay: OfdmLayout
    pre: int
    post: int
    symbols: int = CAL_SYMBOLS

    @property
    def n_samples(self) -> int:
        return self.pre + self.symbols * self.lay.fft + self.post

    @property
    def samples(self) -> np.ndarray:
        x = training_symbol(self.lay)
        return x[(np.arange(self.n_samples) - self.pre) % self.lay.fft]


@dataclass
class OfdmLinkEstimate:
    """One client's per-subcarrier estimate: H (U,) referred to the common delay, H_std (U,), delay d_t (the
    strongest path's integer delay, samples), snr_db per subcarrier sample, fit ('delay' or 'none')."""

    name: str
    H: np.ndarray
    H_std: np.ndarray
    delay: int
    snr_db: float
    fit: str
    rho: float
    truth: np.ndarray | None = None
    efficiency: float | None = None          # the jammer: its noise delivered over its coherent gain
    efficiency_std: float | None = None


def _delay_basis(lay: OfdmLayout, b: int) -> np.ndarray:
    n = np.arange(-int(b), lay.cp - int(b) + 1)
    return np.exp(-2j * np.pi * np.outer(lay.freqs, n) / lay.fft)


def smooth(lay: OfdmLayout, H_ls: np.ndarray, s2: float, b: int) -> tuple[np.ndarray, np.ndarray, bool, float]:
    """(H~, std (U,), kept, outside) the delay-domain projection of the LS estimate (module doc); ``outside``
    the share of the estimate's energy beyond the prefix's span, less what the noise puts there."""
    F = _delay_basis(lay, b)
    P = F @ np.linalg.pinv(F)
    Hs = P @ H_ls
    dof = lay.used - np.linalg.matrix_rank(F)
    r2 = float(np.sum(np.abs(H_ls - Hs) ** 2))
    outside = max(r2 - dof * s2, 0.0) / max(float(np.sum(np.abs(H_ls) ** 2)), 1e-300)
    if dof <= 0 or r2 / max(s2, 1e-300) > dof + FIT_SIGMAS * math.sqrt(dof):
        return H_ls, np.full(lay.used, math.sqrt(s2)), False, outside
    return Hs, np.sqrt(s2 * np.clip(np.real(np.diag(P)), 0.0, 1.0)), True, outside


def _strongest_lag(y: np.ndarray, x: np.ndarray, start: int, lo: int, hi: int) -> tuple[int, float]:
    seg = y[start + lo:start + hi + len(x)]
    corr = np.abs(np.correlate(seg, x, mode="valid"))
    energy = np.convolve(np.abs(seg) ** 2, np.ones(len(x)), mode="valid")
    rho = corr / np.sqrt(np.maximum(energy, 1e-300) * float(np.sum(np.abs(x) ** 2)))
    j = int(np.argmax(rho))
    return lo + j, float(rho[j])


def measure_ofdm_channels(link, lay: OfdmLayout, amplitude: float, repeats: int = 1, extent: int = 0,
                          smoothing: str = "delay") -> list[OfdmLinkEstimate]:
    """Every client's per-subcarrier channel, then the jammer's where the link has one (the last estimate,
    named "jammer"; module doc), ``repeats`` exchanges of one sounding burst per transmitter slot."""
    if repeats < 1:
        raise UserError(f"calibration: repeats must be >= 1, got {repeats}")
    lo, hi = (int(v) for v in link.delay_search)
    b = backoff(lay, extent)
    snd = Sounding(lay, pre=max(hi, 0) + lay.cp + 8, post=max(-lo, 0) + lay.cp + 8)
    K, T = int(link.clients), int(link.transmitters)
    J = K + 1 if getattr(link, "has_jammer", False) and T > K else K      # the sounding transmitters
    slots = Slots.make(J, snd.n_samples, gap=max(SLOT_GAP, hi + 64), tail=hi + 64)
    x = amplitude * snd.samples
    streams = np.zeros((T, slots.length), dtype=np.complex64)
    for t in range(J):
        streams[t, slots.starts[t]:slots.starts[t] + snd.n_samples] = x
    noise = None
    if J > K:                      # the jammer's noise test after every slot (module doc), on its own grid
        noise = _noise_test(lay, amplitude, slots.length + SLOT_GAP)
        grown = np.zeros((T, -(-(noise[0] + len(noise[1]) + hi + 64) // QUANTUM) * QUANTUM), np.complex64)
        grown[:, :streams.shape[1]] = streams
        grown[K, noise[0]:noise[0] + len(noise[1])] = noise[1]
        streams = grown
    caps = [link.exchange(streams) for _ in range(int(repeats))]
    found = []
    for t in range(J):
        lags = [_strongest_lag(np.asarray(y, np.complex128), x, int(slots.starts[t]), lo, hi) for y in caps]
        d, rho = lags[0][0], min(r for _, r in lags)
        if rho < MIN_RHO:
            who = "the jammer" if t == K else f"client {t}"
            raise UserError(f"calibration: {who}: no OFDM sounding burst in its slot (correlation {rho:.3f}); "
                            f"check that radio's cabling, gain and pilot amplitude")
        found.append((d, rho))
    D = min(d for d, _ in found[:K])
    tk = amplitude * lay.train_seq
    out = []
    for t in range(J):
        s0 = int(slots.starts[t]) + snd.pre + (D if t < K else found[t][0])      # the jammer: its own delay
        idx = s0 + np.arange(snd.symbols)[:, None] * lay.fft + np.arange(lay.fft)[None, :]
        Y = np.concatenate([np.fft.fft(np.asarray(y, np.complex128)[idx], axis=1)[:, lay.bins] / math.sqrt(lay.fft)
                            for y in caps])                                  # (M R, U)
        Hm = Y / tk
        H_ls = Hm.mean(axis=0)
        n = Hm.shape[0]
        v = float(np.sum(np.abs(Hm - H_ls) ** 2)) / (lay.used * max(n - 1, 1))
        s2 = v / n
        H, std, kept, outside = smooth(lay, H_ls, s2, b)
        if outside > MAX_OUTSIDE:
            raise UserError(f"calibration: {'the jammer' if t == K else f'client {t}'}'s channel reaches beyond the cyclic prefix ({100 * outside:.0f} % "
                            f"of its energy outside the {lay.cp + 1} delays the FFT window takes without interference); "
                            f"raise phy.ofdm_cp (now {lay.cp} samples)")
        if smoothing != "delay":
            H, std, kept = H_ls, np.full(lay.used, math.sqrt(s2)), False
        snr = 10 * math.log10(max(float(np.mean(np.abs(H_ls) ** 2)) / max(v, 1e-300), 1e-30))   # per sample
        out.append(OfdmLinkEstimate("jammer" if t == K else f"client {t}", H, std, int(found[t][0]), snr,
                                    "delay" if kept else "none", found[t][1],
                                    _truth(link, t, lay, D if t < K else found[t][0], s0)))
        if t == K and noise is not None:
            out[-1].efficiency, out[-1].efficiency_std = _noise_efficiency(lay, caps, noise[0] + found[t][0], H,
                                                                           noise[2], b)
    spread = max(d for d, _ in found[:K]) - D
    if spread + int(extent) > lay.cp - b:
        late = max(range(K), key=lambda t: found[t][0])
        raise UserError(f"calibration: client {late} arrives {spread} samples after the earliest client, more than "
                        f"the cyclic prefix leaves ({lay.cp} - backoff {b} - delay extent {extent}); align the "
                        f"radios' timing or raise phy.ofdm_cp")
    return out


def _noise_test(lay: OfdmLayout, amplitude: float, start: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(where it starts, the samples, the (M, U) grid sent) of the jammer's noise test: ``NOISE_SYMBOLS`` OFDM
    symbols, amplitude x CN(0, 2) on every data carrier (fixed draws: calibration noise need not be secret),
    nothing on the pilots."""
    rng = np.random.default_rng(0x0FD1)
    grid = np.zeros((NOISE_SYMBOLS, lay.used), np.complex128)
    nd = len(lay.data_pos)
    grid[:, lay.data_pos] = amplitude * (rng.standard_normal((NOISE_SYMBOLS, nd))
                                         + 1j * rng.standard_normal((NOISE_SYMBOLS, nd)))
    return int(start), lay.to_time(grid), grid


def _noise_efficiency(lay: OfdmLayout, caps, start: int, H: np.ndarray, grid: np.ndarray,
                      b: int) -> tuple[float, float]:
    """(r, s.e.(r)) the jammer's delivered noise over its coherent gain (module doc), from the noise test
    ``grid`` (M, U) whose first prefix arrives at ``start`` in every capture: per window w (M per repeat)
    e_w = sum_k (|Y_wk|^2 / 2 - f) received and c_w = sum_k |H~_k|^2 |X_wk|^2 / 2 predicted over the data
    carriers (the draws sent are known: their own scatter is no error), r = sum e_w / sum c_w, its standard
    error the ratio's over the windows, sqrt(sum (e_w - r c_w)^2) / sum c_w."""
    data, pilots = lay.data_pos, lay.pilot_pos
    sent = np.abs(grid[:, data]) ** 2 / 2.0 * np.abs(H[data])[None, :] ** 2            # (M, n_data)
    e, c = [], []
    for y in caps:
        power = np.abs(lay.read(np.asarray(y, np.complex128), start, NOISE_SYMBOLS, b)) ** 2 / 2.0   # (M, U)
        f = power[:, pilots].mean(axis=1, keepdims=True) if len(pilots) else 0.0       # each window's floor
        e.append(np.sum(power[:, data] - f, axis=1))
        c.append(np.sum(sent, axis=1))
    e, c = np.concatenate(e), np.concatenate(c)
    if float(np.sum(c)) <= 0:
        return 0.0, math.inf
    r = float(np.sum(e) / np.sum(c))
    return r, float(math.sqrt(float(np.sum((e - r * c) ** 2))) / np.sum(c))


def _truth(link, t: int, lay: OfdmLayout, D: int, ref_sample: int) -> np.ndarray | None:
    """The loopback channel block's H_tk referred to delay D (its flat gain, delay and multipath FIR)."""
    tr = link.truth(t, float(ref_sample)) if hasattr(link, "truth") else None
    if tr is None:
        return None
    fir = getattr(link, "fir", None)
    firs = None if fir is None else np.asarray(fir, complex)
    taps = np.ones(1, complex) if firs is None or t >= len(firs) else firs[t]      # the jammer's link is flat
    n = np.arange(len(taps)) + float(tr["delay"]) - D
    return complex(tr["h"]) * (taps @ np.exp(-2j * np.pi * np.outer(n, lay.freqs) / lay.fft))


# ------------------------------------------------------------------ the calibration file's ``ofdm`` section
def to_section(lay: OfdmLayout, ests: list[OfdmLinkEstimate], amplitude: float, repeats: int, extent: int) -> dict:
    """The file's ``ofdm`` section (complex values as [re, im] pairs, as calibration/data.py writes them)."""
    def entry(e: OfdmLinkEstimate) -> dict:
        return {"id": e.name, "H": _pairs(e.H), "H_std": [float(s) for s in e.H_std], "delay": e.delay,
                "snr_db": e.snr_db, "fit": e.fit, "rho": e.rho,
                **({"truth": _pairs(e.truth)} if e.truth is not None else {}),
                **({"noise_efficiency": float(e.efficiency), "noise_efficiency_std": float(e.efficiency_std)}
                   if e.efficiency is not None else {})}
    clients = [e for e in ests if e.name != "jammer"]
    jammer = [e for e in ests if e.name == "jammer"]
    return {"fft": lay.fft, "cp": lay.cp, "used": lay.used, "symbols": CAL_SYMBOLS, "amplitude": float(amplitude),
            "repeats": int(repeats), "extent": int(extent), "backoff": backoff(lay, extent),
            "ref_delay": int(min(e.delay for e in clients)),
            "clients": [entry(e) for e in clients], **({"jammer": entry(jammer[0])} if jammer else {})}


def _pairs(z) -> list:
    return [[float(v.real), float(v.imag)] for v in np.asarray(z, np.complex128)]


def _cvec(v, what: str, n: int) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.shape != (n, 2) or not np.all(np.isfinite(a)):
        raise ValueError(f"{what} must be {n} finite [re, im] pairs")
    return a[:, 0] + 1j * a[:, 1]


def check_section(d: dict) -> dict:
    """The ``ofdm`` section as read from a file, validated (ValueError on a malformed one)."""
    d = dict(d)
    U = int(d["used"])
    for k in ("fft", "cp", "used", "ref_delay"):
        int(d[k])
    if not d.get("clients"):
        raise ValueError("ofdm.clients is empty")
    entries = [(f"ofdm.clients[{i}]", c) for i, c in enumerate(d["clients"])]
    if d.get("jammer") is not None:
        entries.append(("ofdm.jammer", d["jammer"]))
    for what, c in entries:
        H = _cvec(c["H"], f"{what}.H", U)
        std = np.asarray(c["H_std"], dtype=np.float64)
        if std.shape != (U,) or not np.all(np.isfinite(std)) or np.any(std < 0):
            raise ValueError(f"{what}.H_std must be {U} finite values >= 0")
        if np.any(H == 0):
            raise ValueError(f"{what}.H has a zero subcarrier")
    jam = d.get("jammer")
    if jam is not None and "noise_efficiency" in jam:
        r, se = float(jam["noise_efficiency"]), float(jam["noise_efficiency_std"])
        if not (math.isfinite(r) and math.isfinite(se) and se >= 0):
            raise ValueError("ofdm.jammer.noise_efficiency and its std must be finite (std >= 0)")
    return d


@dataclass
class SubcarrierCsi:
    """The run's per-subcarrier CSI from a calibration's ``ofdm`` section: H (K, U), H_std (K, U), ref_delay;
    ``jammer_H`` / ``jammer_std`` (U,) the jammer's sounding (None when the file has none)."""

    H: np.ndarray
    H_std: np.ndarray
    ref_delay: int
    truth: np.ndarray | None = None
    jammer_H: np.ndarray | None = None
    jammer_std: np.ndarray | None = None
    jammer_efficiency: tuple[float, float] | None = None    # (r, s.e.(r)) of the jammer's noise test

    @classmethod
    def from_section(cls, sec: dict, lay: OfdmLayout, K: int, path="") -> "SubcarrierCsi":
        """UserError (one line) when the section was measured for another layout or client count."""
        got = (int(sec["fft"]), int(sec["cp"]), int(sec["used"]))
        if got != (lay.fft, lay.cp, lay.used):
            raise UserError(f"calibration file '{path}': its OFDM section was measured with (fft, cp, used) = {got}, "
                            f"the run has {(lay.fft, lay.cp, lay.used)} (phy.ofdm_*); recalibrate")
        cl = sec["clients"]
        if len(cl) != K:
            raise UserError(f"calibration file '{path}': its OFDM section holds {len(cl)} clients, the run has {K}")
        H = np.array([_cvec(c["H"], "H", lay.used) for c in cl])
        std = np.array([np.asarray(c["H_std"], float) for c in cl])
        truth = np.array([_cvec(c["truth"], "truth", lay.used) for c in cl]) if all("truth" in c for c in cl) else None
        jam = sec.get("jammer")
        jH = None if jam is None else _cvec(jam["H"], "jammer H", lay.used)
        jstd = None if jam is None else np.asarray(jam["H_std"], float)
        eff = None if jam is None or "noise_efficiency" not in jam else \
            (float(jam["noise_efficiency"]), float(jam["noise_efficiency_std"]))
        return cls(H, std, int(sec["ref_delay"]), truth, jH, jstd, eff)

    def jammer_lower(self, z: float = MARGIN_Z) -> np.ndarray | None:
        """(U,) the lower confidence bound max(|H~_cj,k| - z std_k, 0) on the jammer's amplitude gain per
        subcarrier (module doc), None without a jammer sounding."""
        if self.jammer_H is None:
            return None
        return np.maximum(np.abs(self.jammer_H) - float(z) * self.jammer_std, 0.0)

    def gain_margin(self, z: float = MARGIN_Z) -> np.ndarray:
        """(K, U) upper confidence bound on |H_ik / H~_ik| (inf where the estimate cannot bound it)."""
        rel = self.H_std / np.maximum(np.abs(self.H), 1e-300)
        with np.errstate(divide="ignore"):
            return np.where(z * rel < 1, 1.0 / (1.0 - z * rel), np.inf)

    def shapes(self, h_flat: np.ndarray) -> np.ndarray:
        """(K, U) G_ik = H_ik / h_i relative to the flat gain h_i the policy plans with (so that h_i G_ik is the
        calibrated H_ik; 0 where the estimate cannot bound its own gain: that subcarrier is truncated)."""
        h = np.asarray(h_flat, np.complex128)[:, None]
        return np.where(np.isfinite(self.gain_margin()), self.H / np.where(h != 0, h, 1.0), 0.0)


def subcarrier_csi(csi, cfg, K: int) -> SubcarrierCsi | None:
    """The run's per-subcarrier CSI: None with perfect CSI (the seeded shapes, channel/ofdm_sim.py); an OFDM
    run on calibrated CSI without the file's ``ofdm`` section is refused in one line (never the seeded
    shapes in place of a lab's channel)."""
    if csi is None or cfg.phy.waveform != "ofdm":
        return None
    sec = getattr(getattr(csi, "file", None), "ofdm", None)
    if not sec:
        raise UserError(f"calibration file '{getattr(csi, 'path', '')}' holds no per-subcarrier channel estimates "
                        f"(its ofdm section); calibrate the channel with phy.waveform = 'ofdm'")
    return SubcarrierCsi.from_section(sec, OfdmLayout.from_phy(cfg.phy), K, getattr(csi, "path", ""))


def planned_margin(csi, cfg, K: int) -> float:
    """The largest finite per-subcarrier gain margin (1.0 with perfect CSI): the stretch privacy targeting
    plans with before round 1 (workload/parts.planned_multipath_gain)."""
    sub = subcarrier_csi(csi, cfg, K)
    if sub is None:
        return 1.0
    m = sub.gain_margin()
    return float(np.max(m[np.isfinite(m)], initial=1.0))


def run_ofdm_step(cfg, link, amplitude: float, repeats: int, echo=print) -> dict:
    """The session's ``ofdm`` step: measure, print one line per client, return the file's section."""
    from otafl_sdr.channel.ofdm_sim import delay_extent
    lay = OfdmLayout.from_phy(cfg.phy)
    ext = delay_extent(cfg)
    fs, peak = getattr(link, "full_scale", None), float(np.max(np.abs(training_symbol(lay))))
    if fs is not None and amplitude * peak > fs:           # the sounding's peak under the DAC's full scale
        amplitude = 0.9 * float(fs) / peak
    ests = measure_ofdm_channels(link, lay, amplitude, repeats, ext, cfg.phy.ofdm_smoothing)
    D = min(e.delay for e in ests if e.name != "jammer")
    for e in ests:
        g = 20 * np.log10(np.abs(e.H))
        line = (f"ofdm {e.name}: |H| {g.min():+.2f} .. {g.max():+.2f} dB over {lay.used} subcarriers, rel s.e. "
                f"{float(np.max(e.H_std / np.abs(e.H))):.2e} (fit {e.fit}), SNR {e.snr_db:.1f} dB, "
                f"delay {e.delay - D:+d} vs earliest")
        if e.truth is not None:
            err = np.abs(e.H - e.truth) / np.maximum(e.H_std, 1e-300)
            line += f"; truth: max |err| / s.e. {float(np.max(err)):.2f}"
        echo(line)
    return to_section(lay, ests, amplitude, repeats, ext)


__all__ = ["CAL_SYMBOLS", "OfdmLinkEstimate", "Sounding", "SubcarrierCsi", "check_section", "measure_ofdm_channels",
           "planned_margin", "run_ofdm_step", "smooth", "subcarrier_csi", "to_section"]
