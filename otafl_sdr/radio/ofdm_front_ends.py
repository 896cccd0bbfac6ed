"""The radios' front ends (channel.* impairments, radio/loopback_impairments.FrontEnds) for the loopback
air's OFDM round (radio/loopback_ofdm.py): configured from the round's plan as the sim air's time-domain
model configures its numpy chain (channel/ofdm_impairments.py: the same per-run draws, phase-noise seeds,
planned RMS amplitudes per sample for Rapp's A_sat and the DC, the jammer's DC at its RMS)."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.channel.front_end import FrontEnd
from otafl_sdr.channel.ofdm_impairments import jammer_rms, planned_rms, sro_pad, stream_window
from otafl_sdr.channel.ofdm_sim import round_firs
from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.phy.packing import symbols_for

MMSE_ADVANCE = 3        # filter.mmse_resampler_cc's output leads its input by 3 samples (its 8-tap history)


def ofdm_front_ends(cfg, plan):
    """(FrontEnds or None, pad, advance): this round's front ends for K clients, the jammer and the
    receiver; the samples of tail the stream needs beyond the channel for the SRO resamplers' shortfall
    (a ratio 1 + delta gives delta fewer samples per sample); the samples by which the resamplers move the
    burst earlier (the timing search must stop L - 1 samples past the true start, phy/ofdm.demodulate).
    None, 0, 0 when every impairment is off."""
    fe = FrontEnd.from_config(cfg)
    if not fe.enabled:
        return None, 0, 0
    from otafl_sdr.radio.loopback_impairments import FrontEnds
    od, lay = plan.extra["ofdm"], OfdmLayout.from_phy(cfg.phy)
    K = plan.clients
    active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    rms = np.where(active, planned_rms(od, symbols_for(plan.dim), lay.fft), 0.0)
    fes = FrontEnds(fe, cfg.run.seed, K, cfg)
    # FrontEnds.round's per-sample amplitude is |alpha| / sqrt(n_sym sps): with n_sym = sps = 1 it is rms,
    # and the jammer's DC is dc alpha_cj sqrt(2 / sps): alpha_cj sqrt(n_d / N) gives dc x its RMS
    n_d = len(np.asarray(od["carriers"]))
    n_ofdm = int(od["n_ofdm"])
    window = stream_window(cfg, n_ofdm, round_firs(cfg, plan.round, K).shape[1])   # Doppler: >= the stream
    fes.round(plan.round, rms, jammer_rms(plan.alpha_cj, n_d, lay.fft) / math.sqrt(2.0), 1, 1, n_samples=window)
    pad = sro_pad(fe, lay, n_ofdm)
    return fes, pad, MMSE_ADVANCE if fe.sro else 0


def residual_offsets(cfg, K: int, rng: np.random.Generator) -> dict:
    """The loopback's per-client offsets on an OFDM round: loopback.client_cfo_max / client_delay_max are
    pre-compensated by each client (they cancel), what reaches the receiver are the residuals, drawn as
    radio/loopback_air.LoopbackAir._offsets draws them (seeding.rng(seed, "loopback-offsets"): cfo, delay,
    phase, res_cfo, res_delay) and the round's residual phase N(0, residual_phase) from ``rng`` (drawn only
    when on). Returns cfo (K,) cycles/sample, delay (K,) samples >= 0 (res_delay + residual_delay: every
    burst waits residual_delay, so the earliest arrives on time), phase (K,) unit factors on h, span (the
    extra tail: 2 residual_delay) and first (the earliest arrival past the nominal start)."""
    from otafl_sdr import seeding
    lb = cfg.loopback
    r = seeding.rng(cfg.run.seed, "loopback-offsets")
    r.uniform(-1, 1, K), r.integers(0, lb.client_delay_max + 1, K)           # cfo, delay: pre-compensated
    r.uniform(0, 2 * np.pi, K) if lb.client_phase else None                  # phase: part of h
    res_cfo = r.uniform(-1, 1, K) * lb.residual_cfo
    R = int(lb.residual_delay)
    delay = r.integers(-R, R + 1, K) + R
    phase = np.exp(1j * rng.normal(0.0, lb.residual_phase, K)) if lb.residual_phase else np.ones(K, complex)
    return dict(cfo=res_cfo, delay=delay.astype(int), phase=phase, span=2 * R, first=int(delay.min()) if K else 0)
