"""Shared helpers of the OFDM front-end impairment tests (tests/channel/test_ofdm_impairments.py on sim,
tests/radio/test_loopback_ofdm_impairments.py on loopback): the config, a cj_adaptive plan carried onto
the subcarriers, NMSE / theory, and one payload sample changed against the booked sensitivity."""
from __future__ import annotations

import numpy as np

from otafl_sdr.channel.front_end import FrontEnd
from otafl_sdr.channel.ofdm_impairments import booking_stretch, transmit
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ofdm_plan import plan_ofdm, planned_aggregate
from otafl_sdr.transmission import aggregate_nmse

from loopback_helpers import make_cfg, make_plan

K, D = 8, 20_000
EACH = {"dc": dict(dc_offset=0.1), "iq": dict(iq_mag_db=0.5, iq_phase_deg=2.0), "phase_noise": dict(phase_noise=1e-3),
        "cfo": dict(residual_cfo_hz=1.0), "pa": dict(pa_a_sat=3.0), "sro": dict(sro_ppm=5.0),
        "doppler": dict(doppler_hz=5.0)}


def ofdm_cfg(**channel):
    cfg = make_cfg()
    cfg.phy.waveform, cfg.phy.ofdm_fft, cfg.phy.ofdm_cp, cfg.phy.ofdm_used = "ofdm", 128, 32, 104
    cfg.channel.multipath, cfg.channel.delay_spread_ns = "tdl-c", 3000.0
    for k, v in channel.items():
        setattr(cfg.channel, k, v)
    return cfg


def ofdm_plan(cfg, rnd=0, snr_db=20.0, jammer=False):
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * D),
                      dim=D, sigma_c2=1.0, rounds=20, eps=1.0, delta=1e-5)
    plan = make_plan(cfg, K, D, np.random.default_rng(rnd), rnd=rnd, snr_db=snr_db, jammer=jammer)
    plan.extra["air_sigma_c2"] = plan.sigma_c2
    plan_ofdm(plan, cfg, info)
    return plan


def nmse_ratio(rec, plan) -> float:
    e = planned_aggregate(plan)
    return aggregate_nmse(rec.aggregate, e) / (plan.sigma_eff() ** 2 * D / np.sum(e ** 2))


def spike_change(cfg, plan, run, at_capture: bool):
    """(largest ||change|| / alpha_u over spikes, booked sensitivity): client i's payload sample changed by
    1 (||Delta|| = 1, b = 1) on the subcarrier its booking stretches most and on a few others; the change
    of the capture (same noise, same seeds: the data's part only) or of the released aggregate."""
    stretch, capture = booking_stretch(cfg, plan, 1.0, cfg.air.name)
    assert capture == at_capture
    booked = plan.mechanism.sensitivity * stretch
    od = plan.extra["ofdm"]
    carriers = np.asarray(od["carriers"])
    a = np.abs(np.asarray(od["alpha"])[:, carriers])
    i = int(np.argmax(a.max(axis=1) * np.abs(plan.h)))
    base = run(plan)
    worst = 0.0
    for m in {int(np.argmax(a[i])), int(np.argmin(np.where(a[i] > 0, a[i], np.inf))), 0, len(carriers) // 2}:
        for part in (0, 1):                                   # the I and the Q real of payload symbol m
            changed = plan.payload.copy()
            changed[i, 2 * m + part] += 1.0
            plan2 = type(plan)(**{**plan.__dict__, "payload": changed})
            diff = run(plan2) - base
            worst = max(worst, float(np.linalg.norm(diff)) / (plan.alpha_u if at_capture else 1.0))
    return worst, booked


def sim_run(cfg, at_capture):
    fe = FrontEnd.from_config(cfg)

    def run(plan):
        rec = transmit(cfg, fe, plan, np.random.default_rng(9), keep_capture=True)
        assert rec.ok, rec.reason
        return rec.extra["capture"] if at_capture else rec.aggregate
    return run
