"""Shared helpers for the loopback tests: realistic RoundPlans from the paper-000 policy."""
import numpy as np

from otafl_sdr.config.schema import Config
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy


def make_cfg(**loopback) -> Config:
    cfg = Config()
    for k, v in loopback.items():
        setattr(cfg.loopback, k, v)
    return cfg


def make_plan(cfg, K, d, rng, *, rnd=0, snr_db=1.0, jammer=False, size=10**6, corr=0.9, sigma_c2=1.0):
    """A CJAdaptivePolicy plan (perfect CSI) for K unit-norm, partly aligned updates."""
    cfg.power.jammer = jammer
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, size), power=np.full(K, 10 ** (snr_db / 10) * d * sigma_c2),
                      dim=d, sigma_c2=sigma_c2, rounds=20, eps=1.0, delta=1e-5)
    pol = CJAdaptivePolicy(cfg, info)
    u = (1 - corr) * rng.standard_normal((K, d)) + corr * rng.standard_normal(d)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    h_cj = complex(rng.standard_normal() + 1j * rng.standard_normal()) / np.sqrt(2)
    return pol.plan(rnd, u, h, h_cj, rng)
