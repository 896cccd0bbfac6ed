"""The radios' front-end impairments as the run configures them (``channel.*``), their seeded per-radio
draws, the Doppler variation within a burst, and how far they can stretch one client's payload difference
in the aggregate (``sensitivity_gain``, booked by workload/booking.ledger_mechanism).

Applied by both emulated airs, with the definitions of channel/impairments.py: the `sim` air at the
symbol level (channel/sim_impairments.py), the `loopback` air as GNU Radio blocks per radio
(radio/loopback_impairments.py). Per transmitting client i, in this order:

    x_i -> IQ imbalance (tx, mu_t x + nu_t x*) -> Rapp PA (A_sat = pa_a_sat x the planned RMS amplitude)
        -> + DC c_i (LO leakage) -> e^{j theta_i[n]} (Wiener phase noise) -> e^{j 2 pi f_i n} (residual CFO)
        -> resampling by 1 + delta_i (sample-clock offset) -> rho_i[n] (Doppler) -> the link (h_i, multipath)

The jammer gets DC, phase noise and residual CFO only: each is an additive constant or a unit-modulus
factor independent of its circular Gaussian noise, so the noise it delivers is the booked one; an IQ
imbalance, a compressing PA or a resampler would deliver less noise than booked in some direction, and
are not applied to it. The receiver, after the thermal noise (its LNA comes first), gets phase noise
and IQ imbalance (rx): post-processing of the released sum, no privacy effect. Its DC is out of band
(uhd.lo_offset). The planned RMS amplitude of a client is |alpha_i| / sqrt(n_sym) per symbol (a payload
at its clip norm 1 spread over n_sym complex symbols; / sqrt(sps) per sample on loopback): data-independent.

Per-radio draws (``draws``) come from ``seeding.rng(seed, "front-end")`` once per run (CFO f_i uniform
in +-residual_cfo_hz / rate, delta_i uniform in +-sro_ppm 1e-6, DC phases uniform); per round the
phase-noise seeds from ``seeding.int_seed(seed, "front-end", round, radio)`` and the Doppler sinusoids
from ``seeding.rng(seed, "doppler", round)``, so both airs draw the same offsets and Doppler paths. The
Doppler factor starts at 1 (the channel the policy inverted) and decorrelates as J0 (channel/doppler.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.channel.doppler import DopplerRound, planned_peak

SRO_SCHUR_LOOPBACK = 1.61     # GNU Radio's 8-tap MMSE interpolator: max row / column sum of |taps| (tests/radio)


def iq_mu_nu(mag_db: float, phase_deg: float) -> tuple[complex, complex]:
    """(mu, nu) of y = mu x + nu x*, gr-channels ``iqbal_gen`` (channel/impairments.py), z = g e^{j phi}:
    transmitter mu = (1 + z) / 2, nu = (z - 1) / 2; receiver mu = (1 + z*) / 2, nu = (z - 1) / 2 (the
    same |mu| and |nu|, all that the bound needs). Returns the transmitter's."""
    z = 10 ** (mag_db / 20) * np.exp(1j * np.deg2rad(phase_deg))
    return complex((1 + z) / 2), complex((z - 1) / 2)


@dataclass(frozen=True)
class FrontEnd:
    """Every radio's impairments in per-sample units: phase noise std (rad / sqrt(sample)), IQ (dB, deg),
    DC (x planned RMS), Rapp (A_sat x planned RMS, 0 = off; p), SRO max (fraction), residual CFO max and
    Doppler (cycles/sample)."""

    phase_noise: float = 0.0
    iq_mag_db: float = 0.0
    iq_phase_deg: float = 0.0
    dc: float = 0.0
    a_sat: float = 0.0
    p: float = 2.0
    sro: float = 0.0
    cfo: float = 0.0
    doppler: float = 0.0

    @classmethod
    def from_config(cls, cfg) -> "FrontEnd":
        ch, rate = cfg.channel, float(cfg.uhd.rate)
        return cls(float(ch.phase_noise), float(ch.iq_mag_db), float(ch.iq_phase_deg), float(ch.dc_offset),
                   float(ch.pa_a_sat), float(ch.pa_p), float(ch.sro_ppm) * 1e-6, float(ch.residual_cfo_hz) / rate,
                   float(ch.doppler_hz) / rate)

    @property
    def iq(self) -> bool:
        return self.iq_mag_db != 0 or self.iq_phase_deg != 0

    @property
    def enabled(self) -> bool:
        """False at the defaults: the airs then skip this stage entirely (today's channel, bit for bit)."""
        return bool(self.phase_noise or self.iq or self.dc or self.a_sat or self.sro or self.cfo or self.doppler)

    def draws(self, seed: int, clients: int) -> dict:
        """Per run: cfo (K,) and sro (K,) per client, jammer_cfo, dc_phase (K+1,) (jammer last)."""
        r = seeding.rng(seed, "front-end")
        return dict(cfo=r.uniform(-1, 1, clients) * self.cfo, sro=r.uniform(-1, 1, clients) * self.sro,
                    jammer_cfo=float(r.uniform(-1, 1) * self.cfo), dc_phase=r.uniform(0, 2 * np.pi, clients + 1))

    def phase_seed(self, seed: int, round_index: int, radio) -> int:
        """GNU Radio / numpy seed of a radio's phase-noise walk this round (radio: client index, 'jammer', 'rx')."""
        return seeding.int_seed(seed, "front-end", int(round_index), str(radio))

    def doppler_paths(self, seed: int, round_index: int, links: int, times: np.ndarray) -> np.ndarray:
        """(links, len(times)) rho_i(t) at ``times`` (samples from the burst's start): the seeded Clarke
        factor conditioned on rho_i(0) = 1, the channel the policy inverted, decorrelating as
        J0(2 pi f_D t) (channel/doppler.py); all ones without Doppler. One factor per link (every
        multipath tap shares it)."""
        if not self.doppler:
            return np.ones((links, len(times)), complex)
        return DopplerRound(self.doppler, seed, round_index, links).paths(times)

    def doppler_peak(self, seed: int, round_index: int, links: int, n_samples: int) -> float:
        """An upper bound on max_i max_{0 <= t <= n_samples} |rho_i(t)| for this round's seeded paths
        (channel/doppler.py ``DopplerRound.peak``: band-limited to f_D, Bernstein). 1.0 without Doppler."""
        if not self.doppler:
            return 1.0
        return DopplerRound(self.doppler, seed, round_index, links).peak(n_samples)


def doppler_window(cfg, n_sym: int) -> int:
    """Samples over which both airs apply rho and the booking bounds it (the loopback air refuses a longer
    stream): every burst sample (frame, pilots, guard, filter tails, delays, multipath) fits."""
    phy, lb = cfg.phy, cfg.loopback
    sym = n_sym + n_sym // max(phy.pilot_spacing, 1) + phy.preamble_len + 2 * phy.rrc_span + 1024
    return int(sym * phy.sps + 4 * phy.guard + 2 * (lb.client_delay_max + lb.residual_delay + lb.rx_delay) + 8192)


def sro_gain(sro: float, phy, air: str) -> float:
    """Operator-norm bound of a client's resampler (the payload difference through it), Schur's test
    ||A||_2 <= sqrt(max row sum |A| x max column sum |A|): on `sim` the symbol-level raised-cosine
    interpolation y_k = sum_m x_m g(k - m + delta k) (channel/sim_impairments.py), rows and columns both
    sums of |g| on a grid of spacing 1 or 1 + |delta|, maximised over the grid's offset; on `loopback`
    GNU Radio's 8-tap MMSE interpolator (``filter.mmse_resampler_cc``), its constant SRO_SCHUR_LOOPBACK
    measured from the block (tests/radio/test_front_end_loopback.py). Conservative (the in-band gain is
    about 1.004): this is the price of an SRO until a tighter bound is derived. 1.0 without SRO."""
    if not sro:
        return 1.0
    if air != "sim":
        return SRO_SCHUR_LOOPBACK
    g, span = rc_pulse(phy)
    worst = 0.0
    for spacing in (1.0, 1.0 + abs(sro), 1.0 - abs(sro)):
        for eps in np.linspace(0, 1, 65):
            j = np.arange(-span - 2, span + 3)
            worst = max(worst, float(np.abs(g(j * spacing + eps)).sum()))
    return worst


def rc_pulse(phy):
    """(g, span): the symbol-level pulse of the single-carrier link, the raised cosine of phy.rolloff
    g(t) = sinc(t) cos(pi beta t) / (1 - (2 beta t)^2), truncated at +-span symbols (g(j) = delta_j: the
    loopback modem's zero-forcing step removes the truncated RRC pair's own ISI, phy/modem.py)."""
    beta, span = float(phy.rolloff), int(phy.rrc_span) + 2

    def g(t):
        t = np.asarray(t, dtype=np.float64)
        den = 1 - (2 * beta * t) ** 2
        near = np.abs(den) < 1e-8
        val = np.sinc(t) * np.cos(np.pi * beta * t) / np.where(near, 1.0, den)
        val = np.where(near, np.pi / 4 * np.sinc(1 / (2 * beta)), val)
        return np.where(np.abs(t) <= span, val, 0.0)
    return g, span


def sensitivity_gain(cfg, round_index: int | None, links: int, n_sym: int) -> float:
    """How far the configured impairments can stretch one client's payload difference in the released
    aggregate (the Mechanism's sensitivity is multiplied by it; 1.0 at the defaults). Stages in series,
    the bound is the product of each stage's Lipschitz constant (module doc's chain):

    - tx IQ: y = mu x + nu x* is real-linear on R^2 with operator norm |mu| + |nu| (> 1 unless balanced),
    - Rapp: x -> x (1 + (|x|/A)^{2p})^{-1/(2p)} is radial with radial slope (1 + (r/A)^{2p})^{-1-1/(2p)}
      <= 1 and tangential gain (1 + (r/A)^{2p})^{-1/(2p)} <= 1: a contraction (tests check numerically),
    - DC: an additive constant (no stretch); phase noise, residual CFO: unit-modulus factors (isometries),
    - SRO: ``sro_gain``; Doppler: |rho_i(t)| <= ``doppler_peak`` over the burst window (this round's
      seeded paths, channel/doppler.py; rho_i(0) = 1); round_index None, planning before round 1: the
      draw-free bound doppler.planned_peak over doppler_window(n_sym), or 2 sqrt(N_SINUSOIDS) + 1 = 9
      when n_sym is 0 (window unknown),
    - rx IQ (after the noise: post-processing) is counted too, so that the released aggregate itself moves
      by at most (|mu_t| + |nu_t|)(|mu_r| + |nu_r|) times the planned difference (the receiver corrects
      only the common phase, a unit-modulus factor; phy/modem.py leaves the gain); counting
      post-processing only makes the booking conservative."""
    fe = FrontEnd.from_config(cfg)
    if not fe.enabled:
        return 1.0
    gain = 1.0
    if fe.iq:
        mu, nu = iq_mu_nu(fe.iq_mag_db, fe.iq_phase_deg)
        gain *= (abs(mu) + abs(nu)) ** 2                 # tx and rx: the same |mu|, |nu|
    gain *= sro_gain(fe.sro, cfg.phy, cfg.air.name)
    if fe.doppler:
        if round_index is None:
            gain *= planned_peak(fe.doppler, doppler_window(cfg, n_sym) if n_sym > 0 else 0)
        else:
            gain *= fe.doppler_peak(cfg.run.seed, round_index, links, doppler_window(cfg, n_sym))
    return float(gain)
