"""Doppler within a burst that starts from the channel the power policy inverted (issue 26 item 1).

Link i's channel over a burst is h_i rho_i(t) (t in samples from the burst's start, f_D in cycles/sample):

    rho_i(t) = r_i(t) + (1 - r_i(0)) J(t),        J(t) = J0(2 pi f_D t),

r_i a unit-power Clarke process: N_SINUSOIDS sinusoids at f_D cos(theta_m) with phases phi_m, / sqrt(M)
(channel/multipath.py ``time_varying``'s flat Rayleigh draw, the same generator and order), so
E[r(t) r*(s)] = J0(2 pi f_D (t - s)) over the draws. This is r conditioned on r(0) = 1 by Matheron's update
r + (1 - r(0)) Cov(r(t), r(0)) (for a Gaussian process exactly its conditional law; for the finite sum of
sinusoids its first two moments):

- rho_i(0) = 1 exactly: the link at the burst's start is the h_i the policy inverted (no stale CSI),
- E[rho(t)] = J(t) and E[(rho(t) - J(t))(rho(s) - J(s))*] = J0(2 pi f_D (t - s)) - J(t) J(s); in
  particular E|rho(t) - J(t)|^2 = 1 - J(t)^2 (Clarke/Jakes decorrelation from the known channel).

J is evaluated exactly (scipy's j0): J0(2 pi f_D t) is the Fourier transform of Jakes' spectrum, supported
on [-f_D, f_D]. So rho_i is band-limited to f_D with sup over the real line S_i <= sqrt(M) + |1 - r_i(0)|
(M unit phasors / sqrt(M); |J0| <= 1), which is what ``DopplerRound.peak`` needs: Bernstein's inequality
twice gives |rho''| <= (2 pi f_D)^2 S_i, and between two points of a grid of spacing D the distance from
the chord is at most D^2 / 8 |rho''|_max (Peano kernel, complex values too), so
max_{window} |rho_i| <= max_grid |rho_i| + (pi f_D D)^2 / 2 S_i.

Long paths are evaluated on a grid of spacing STEP / (2 pi f_D) samples (the grid holds the path's first
time, 0 on a burst) and interpolated linearly: every value applied is a convex combination of two exact
values, so |applied| <= the exact path's maximum, the booked peak covers it, and rho(0) = 1 stays exact."""
from __future__ import annotations

import numpy as np
from scipy.special import j0

from otafl_sdr import seeding
from otafl_sdr.channel.multipath import N_SINUSOIDS

GRID = 0.02          # peak bound: grid spacing GRID / (pi f_D), margin GRID^2 / 2 S_i (<= 1.8e-3 at M = 16)
STEP = 2e-3          # long paths: exact every STEP / (2 pi f_D) samples, linear between (error <= 5e-7 S_i)
ROUNDING = 1e-6      # relative margin for the loopback's complex64 copy of the path


def jakes(fd: float, times) -> np.ndarray:
    """J(t) = J0(2 pi f_D t) at ``times`` (samples): E[rho(t)], the burst-start correlation."""
    return j0(2 * np.pi * float(fd) * np.asarray(times, dtype=np.float64))


def planned_peak(fd: float, n_samples: int) -> float:
    """A bound on |rho_i(t)| for every draw, 0 <= t <= n_samples (privacy targeting before round 1):
    |rho(t)| <= |J(t)| + |r(t) - r(0)| + |r(0)| |1 - J(t)| <= 1 + sqrt(M) (x + x^2 / 4), x = 2 pi f_D
    n_samples (Bernstein on r, whose sup is sqrt(M); 1 - J0(x) <= x^2 / 4), and always <= 2 sqrt(M) + 1
    (the sup over the real line). n_samples <= 0 (window unknown): 2 sqrt(M) + 1."""
    ceiling = 2 * np.sqrt(N_SINUSOIDS) + 1
    if not fd:
        return 1.0
    if n_samples <= 0:
        return float(ceiling)
    x = 2 * np.pi * float(fd) * float(n_samples)
    return float(min(ceiling, 1 + np.sqrt(N_SINUSOIDS) * (x + x * x / 4)))


class DopplerRound:
    """One round's seeded Doppler factors of ``links`` links (module doc): draws from
    ``seeding.rng(seed, "doppler", round_index)`` in multipath.time_varying's order (theta, then phi)."""

    def __init__(self, fd: float, seed: int, round_index: int, links: int):
        self.fd, self.links = float(fd), int(links)
        r = seeding.rng(int(seed), "doppler", int(round_index))
        self.theta = r.uniform(0, 2 * np.pi, (self.links, 1, N_SINUSOIDS))[:, 0]
        self.phi = r.uniform(0, 2 * np.pi, (self.links, 1, N_SINUSOIDS))[:, 0]
        self.r0 = np.exp(1j * self.phi).sum(axis=1) / np.sqrt(N_SINUSOIDS)          # r_i(0)

    def _exact(self, times: np.ndarray, sel) -> np.ndarray:
        """(n, len(times)) rho at ``times`` from the sinusoids themselves, for the links ``sel``."""
        th, ph = self.theta[sel], self.phi[sel]
        r = np.zeros((th.shape[0], len(times)), dtype=np.complex128)
        w = 2 * np.pi * self.fd * np.cos(th)
        for m in range(N_SINUSOIDS):
            r += np.exp(1j * (w[:, m, None] * times[None, :] + ph[:, m, None]))
        r /= np.sqrt(N_SINUSOIDS)
        return r + (1 - self.r0[sel])[:, None] * jakes(self.fd, times)[None, :]

    def paths(self, times, links=None) -> np.ndarray:
        """(n, len(times)) rho_i at ``times`` (samples) for ``links`` (indices; all by default); all ones
        without Doppler. Long paths: exact on a grid from times.min(), linear between (module doc)."""
        sel = np.arange(self.links) if links is None else np.atleast_1d(np.asarray(links, dtype=np.int64))
        times = np.asarray(times, dtype=np.float64)
        if not self.fd or times.size == 0:
            return np.ones((sel.size, times.size), complex)
        step = STEP / (2 * np.pi * self.fd)
        lo, hi = float(times.min()), float(times.max())
        if times.size <= 64 or (hi - lo) / step >= times.size / 8:
            return self._exact(times, sel)
        grid = lo + step * np.arange(int(np.ceil((hi - lo) / step)) + 1)
        coarse = self._exact(grid, sel)
        return np.array([np.interp(times, grid, c.real) + 1j * np.interp(times, grid, c.imag) for c in coarse])

    def sup_line(self) -> np.ndarray:
        """(links,) S_i = sqrt(M) + |1 - r_i(0)| >= sup over the real line of |rho_i| (module doc)."""
        return np.sqrt(N_SINUSOIDS) + np.abs(1 - self.r0)

    def peak(self, n_samples: int) -> float:
        """max_i max_{0 <= t <= n_samples} |rho_i(t)| bounded from above (module doc: the grid's maximum
        plus the chord margin, times 1 + ROUNDING for the loopback's complex64 copy). 1.0 without Doppler."""
        if not self.fd or not self.links:
            return 1.0
        D = GRID / (np.pi * self.fd)
        grid = np.append(np.arange(0.0, float(n_samples), D), float(n_samples))
        worst = 0.0
        for lo in range(0, self.links, 16):                  # bounded memory for long windows
            sel = np.arange(lo, min(lo + 16, self.links))
            peak = np.abs(self._exact(grid, sel)).max(axis=1) + GRID ** 2 / 2 * self.sup_line()[sel]
            worst = max(worst, float(peak.max()))
        return float(min(worst, planned_peak(self.fd, n_samples)) * (1 + ROUNDING))
