"""Tapped-delay-line multipath: one frequency-selective shape g_i per link, on top of the flat gain h_i.

Link i's channel is h_i f_i(t), f_i built (``link_channels``) from g_i = sum_l g_il delta(t - tau_l) at
sample-spaced delays tau_l:

- h_i is the gain the power policy knows (channel/fading.py; paper 000 sec. V): the link's main arrival,
  f_i is normalised to 1 there, so the energy a link delivers is sum_n |f_i[n]|^2 (>= about 1) times the
  planned one, more with more spread (a per-link sensitivity must use it: issue 26, item 3),
- g_il = sqrt(p_l) w_il with w_il ~ CN(0, 1) (Rayleigh taps) and, with Rician factor K on the first tap,
  w_i0 = sqrt(K/(K+1)) e^{j phi} + sqrt(1/(K+1)) CN(0, 1), phi uniform,
- block fading (``doppler = 0``, taps fixed within a burst and redrawn each round): ``round_taps`` are
  normalised per draw, sum_l |g_il|^2 = 1 (by Parseval an OFDM subcarrier gain G_i[k] =
  sum_l g_il e^{-j 2 pi k tau_l / N} then has mean power 1 over k); ``link_channels`` is what the airs
  apply: each link shifted and scaled so that its main arrival is the h_i that per-link CSI knows;
- with Doppler (``time_varying``; the airs apply it as one factor per link, channel/front_end.py
  ``doppler_paths``, with channel.doppler_hz) the taps vary within the burst (sum of sinusoids, Clarke's spectrum, max Doppler f_D in cycles/sample), sum_l p_l = 1 in
  expectation.

Profiles (power-delay profile p_l, sum 1): ``flat`` (one tap, today's channel), ``exponential``
(p_l ~ exp(-l / beta) at l = 0, 1, ... samples, beta solved so the discrete RMS delay spread is the
configured one), ``tdl-a`` / ``tdl-b`` / ``tdl-c`` (3GPP TR 38.901 Table 7.7.2-1/2/3, normalised
delays scaled so the table's RMS delay spread is the configured one, rounded to the sample grid and
taps on the same sample merged; the scale is then adjusted within +-20 % so that the sample-spaced PDP's
RMS delay spread is as close to the configured one as the grid allows).

The taps of round m come from ``seeding.rng(seed, "multipath", m)`` (``round_taps``), so the sim air,
the loopback air (a ``filter.fir_filter_ccc`` per link) and any later stage (OFDM channel estimation,
per-subcarrier privacy) see the same draw."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.channel.multipath_rx import composite_pulse, pulse_at

PROFILES = ("flat", "exponential", "tdl-a", "tdl-b", "tdl-c")

# 3GPP TR 38.901 v16 Table 7.7.2-1 (TDL-A), -2 (TDL-B), -3 (TDL-C): normalised delay, power (dB)
_TDL = {
    "tdl-a": ([0.0000, 0.3819, 0.4025, 0.5868, 0.4610, 0.5375, 0.6708, 0.5750, 0.7618, 1.5375, 1.8978,
               2.2242, 2.1718, 2.4942, 2.5119, 3.0582, 4.0810, 4.4579, 4.5695, 4.7966, 5.0066, 5.3043, 9.6586],
              [-13.4, 0, -2.2, -4, -6, -8.2, -9.9, -10.5, -7.5, -15.9, -6.6, -16.7, -12.4, -15.2, -10.8,
               -11.3, -12.7, -16.2, -18.3, -18.9, -16.6, -19.9, -29.7]),
    "tdl-b": ([0.0000, 0.1072, 0.2155, 0.2095, 0.2870, 0.2986, 0.3752, 0.5055, 0.3681, 0.3697, 0.5700,
               0.5283, 1.1021, 1.2756, 1.5474, 1.7842, 2.0169, 2.8294, 3.0219, 3.6187, 4.1067, 4.2790, 4.7834],
              [0, -2.2, -4, -3.2, -9.8, -1.2, -3.4, -5.2, -7.6, -3, -8.9, -9, -4.8, -5.7, -7.5, -1.9, -7.6,
               -12.2, -9.8, -11.4, -14.9, -9.2, -11.3]),
    "tdl-c": ([0, 0.2099, 0.2219, 0.2329, 0.2176, 0.6366, 0.6448, 0.6560, 0.6584, 0.7935, 0.8213, 0.9336,
               1.2285, 1.3083, 2.1704, 2.7105, 4.2589, 4.6003, 5.4902, 5.6077, 6.3065, 6.6374, 7.0427, 8.6523],
              [-4.4, -1.2, -3.5, -5.2, -2.5, 0, -2.2, -3.9, -7.4, -7.1, -10.7, -11.1, -5.1, -6.8, -8.7, -13.2,
               -13.9, -13.9, -15.8, -17.1, -16, -15.7, -21.6, -22.8]),
}
N_SINUSOIDS = 16          # per tap, Doppler model


def rms_delay_spread(delays, powers) -> float:
    """sqrt(E[tau^2] - E[tau]^2) of a power-delay profile (powers need not sum to 1)."""
    t, p = np.asarray(delays, float), np.asarray(powers, float)
    p = p / p.sum()
    mean = float(p @ t)
    return float(np.sqrt(max(p @ t ** 2 - mean ** 2, 0.0)))


def _exponential(spread: float) -> tuple[np.ndarray, np.ndarray]:
    """Sample-spaced exponential PDP, truncated at -40 dB, whose RMS delay spread is ``spread`` samples."""
    def profile(beta):
        n = np.arange(int(np.ceil(9.3 * beta)) + 2)
        return n, np.exp(-n / beta)
    lo, hi = 1e-3, 10.0 * spread + 10.0
    for _ in range(80):                                    # spread grows monotonically with beta
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rms_delay_spread(*profile(mid)) < spread else (lo, mid)
    n, p = profile(0.5 * (lo + hi))
    return n.astype(np.int64), p / p.sum()


def profile(name: str, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """(delays (L,) int samples, powers (L,) summing to 1) for a named profile at RMS delay spread
    ``spread`` (samples)."""
    d, p = _profile(str(name), float(spread))
    return np.array(d, np.int64), np.array(p)


@lru_cache(maxsize=64)
def _profile(name: str, spread: float) -> tuple[tuple, tuple]:
    d, p = _build(name, spread)
    return tuple(int(x) for x in d), tuple(float(x) for x in p)


def _build(name: str, spread: float) -> tuple[np.ndarray, np.ndarray]:
    if name not in PROFILES:
        raise ValueError(f"unknown multipath profile '{name}' (one of {', '.join(PROFILES)})")
    if not (np.isfinite(spread) and spread >= 0):
        raise ValueError(f"delay spread must be >= 0 samples, got {spread}")
    if name == "flat" or spread == 0:
        return np.zeros(1, np.int64), np.ones(1)
    if name == "exponential":
        return _exponential(spread)
    tn, pdb = (np.asarray(v, float) for v in _TDL[name])
    pw = 10 ** (pdb / 10)
    best = None
    for scale in spread / rms_delay_spread(tn, pw) * np.linspace(0.8, 1.2, 81):   # the grid's closest fit
        d = np.rint(tn * scale).astype(np.int64)
        delays = np.unique(d)
        powers = np.array([pw[d == k].sum() for k in delays])
        err = abs(rms_delay_spread(delays, powers) - spread)
        if best is None or err < best[0] - 1e-12:
            best = (err, delays, powers / powers.sum())
    return best[1], best[2]


@dataclass(frozen=True)
class Multipath:
    """A tapped delay line: profile name, RMS delay spread (samples), Rician K (linear, first tap; 0 =
    Rayleigh), max Doppler (cycles/sample; 0 = block fading within a burst)."""

    name: str = "flat"
    spread: float = 0.0
    k_factor: float = 0.0
    doppler: float = 0.0

    @classmethod
    def from_config(cls, cfg) -> "Multipath":
        """Block fading from channel.multipath / delay_spread_ns (x uhd.rate) / rician_k (Doppler within
        a burst, ``time_varying``, is modelled here but not applied by the airs yet)."""
        ch, rate = cfg.channel, float(cfg.uhd.rate)
        return cls(ch.multipath, ch.delay_spread_ns * 1e-9 * rate, ch.rician_k)

    @property
    def enabled(self) -> bool:
        """False for the flat channel (one unit tap, no Doppler): the airs then skip multipath entirely."""
        return len(self.delays) > 1 or self.k_factor > 0 or self.doppler > 0

    @property
    def delays(self) -> np.ndarray:
        return profile(self.name, self.spread)[0]

    @property
    def powers(self) -> np.ndarray:
        return profile(self.name, self.spread)[1]

    @property
    def length(self) -> int:
        """FIR length in samples (max delay + 1)."""
        return int(self.delays[-1]) + 1

    def _scatter(self, rng: np.random.Generator, n: int) -> np.ndarray:
        L = len(self.delays)
        w = (rng.standard_normal((n, L)) + 1j * rng.standard_normal((n, L))) / np.sqrt(2.0)
        if self.k_factor > 0:
            K = float(self.k_factor)
            los = np.exp(2j * np.pi * rng.uniform(0, 1, n))
            w[:, 0] = np.sqrt(K / (K + 1)) * los + np.sqrt(1 / (K + 1)) * w[:, 0]
        return w * np.sqrt(self.powers)

    def draw(self, rng: np.random.Generator, n: int, normalize: bool = True) -> np.ndarray:
        """(n, L) complex tap gains at ``self.delays``; each row scaled to unit energy if ``normalize``."""
        g = self._scatter(rng, n)
        if normalize:
            g = g / np.sqrt(np.sum(np.abs(g) ** 2, axis=1, keepdims=True))
        return g

    def fir(self, taps: np.ndarray) -> np.ndarray:
        """(..., L) tap gains -> (..., length) dense FIR at sample spacing (zeros between taps)."""
        taps = np.asarray(taps)
        out = np.zeros(taps.shape[:-1] + (self.length,), dtype=np.complex128)
        out[..., self.delays] = taps
        return out

    def round_taps(self, seed: int, round_index: int, links: int) -> np.ndarray:
        """(links, L) block-fading taps of one round, the same on every air (seeded, see module doc)."""
        return self.draw(seeding.rng(seed, "multipath", int(round_index)), links)

    def link_channels(self, seed: int, round_index: int, links: int, phy) -> np.ndarray:
        """(links, 2 length - 1) each link's channel as the airs apply it (dense FIR, sample spacing):
        round_taps, shifted by the link's own main arrival t_i and divided by its narrowband gain there,

            f_i[n] = g_i[n + t_i - (length - 1)] / r_i(t_i),  r_i(t) = sum_l g_il p(t - tau_l),
            t_i = argmax_t |r_i(t)| (integer samples, p the tx/rx pulse of phy/pulse_shaping.py),

        because that is what per-link CSI knows (a narrowband sounder, the calibration's per-link delay
        and phase, or perfect CSI): the gain and delay of the main arrival. So with a spread well inside
        the pulse the link is flat again (f_i ~ delta), and otherwise the main arrival lands as planned
        while every other tap is energy the policy did not plan: inter-symbol interference for the
        single-carrier modem (common delay length - 1 samples on every link)."""
        taps = self.round_taps(seed, round_index, links)
        p, c = composite_pulse(phy)
        L = self.length
        t = np.arange(L)
        r = taps @ pulse_at(p, c, t[:, None] - self.delays[None, :]).T         # (links, L)
        ti = np.argmax(np.abs(r), axis=1)
        out = np.zeros((links, 2 * L - 1), dtype=np.complex128)
        for i in range(links):
            out[i, self.delays - ti[i] + L - 1] = taps[i] / r[i, ti[i]]
        return out

    def time_varying(self, rng: np.random.Generator, links: int, n_samples: int, times=None) -> np.ndarray:
        """(links, L, n_samples) taps with Doppler: each diffuse tap a sum of N_SINUSOIDS sinusoids at
        f_D cos(theta_m) (Clarke/Jakes, unit power), the LOS part of a Rician first tap at f_D cos(theta_0).
        ``times`` (n_samples,): evaluate at these sample times instead of 0..n_samples-1 (same draws)."""
        L, M, fd = len(self.delays), N_SINUSOIDS, float(self.doppler)
        t = np.arange(n_samples, dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
        theta = rng.uniform(0, 2 * np.pi, (links, L, M))
        phi = rng.uniform(0, 2 * np.pi, (links, L, M))
        out = np.zeros((links, L, n_samples), dtype=np.complex128)
        for m in range(M):
            out += np.exp(1j * (2 * np.pi * fd * np.cos(theta[..., m])[..., None] * t + phi[..., m, None]))
        out /= np.sqrt(M)
        if self.k_factor > 0:
            K = float(self.k_factor)
            th0, ph0 = rng.uniform(0, 2 * np.pi, links), rng.uniform(0, 2 * np.pi, links)
            los = np.exp(1j * (2 * np.pi * fd * np.cos(th0)[:, None] * t + ph0[:, None]))
            out[:, 0] = np.sqrt(K / (K + 1)) * los + np.sqrt(1 / (K + 1)) * out[:, 0]
        return out * np.sqrt(self.powers)[None, :, None]
