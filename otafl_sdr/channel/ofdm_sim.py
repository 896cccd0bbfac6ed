"""The OFDM round on the `sim` air: a numpy model of what radio/loopback_ofdm.py carries through GNU Radio
(``phy.waveform = "ofdm"``, issue 26 item 2), and the per-round multipath shapes both airs and the planning
use.

Link i's channel is h_i g_i(t): h_i the flat gain the policy knows (channel/fading.py), g_i the round's
seeded tapped delay line (``Multipath.round_taps``, unit energy, first tap at delay 0: ``round_firs``).
With a cyclic prefix at least the delay extent (``delay_extent``; config_validation refuses less), the
channel on occupied subcarrier k is H_ik = h_i G_ik, G_ik = sum_n g_i[n] e^{-j 2 pi bin_k n / N}
(``subcarrier_shapes``; mean power 1 over k by Parseval), with no inter-symbol or inter-carrier
interference. Per payload symbol m on subcarrier k(m) (phy/ofdm.py's map) the receiver then sees

    y_m = sum_i H_ik alpha_ik s_i[m] + h_cj alpha_cj n_m + z_m,   n_m ~ CN(0, 2), z_m ~ CN(0, 2 sigma_c2),

alpha_ik the clients' per-subcarrier factors (power/ofdm_plan.py; 0 where truncated), and returns
unpack(y) / alpha_u: the loopback receiver's output with perfect timing and channel estimates (its
phase-only equalisation has unit modulus, so the noise is the same)."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.phy.ofdm import OfdmLayout, subcarrier_response
from otafl_sdr.phy.packing import pack_reals, unpack_reals
from otafl_sdr.transmission import Reception
from otafl_sdr.channel.multipath import Multipath


def delay_extent(cfg) -> int:
    """Samples between the first and last tap of the configured channel (0 when flat)."""
    mp = Multipath.from_config(cfg)
    return mp.length - 1 if mp.enabled else 0


def round_firs(cfg, round_index: int, links: int) -> np.ndarray:
    """(links, length) the round's causal multipath FIR per link (unit energy; (links, 1) ones when flat)."""
    mp = Multipath.from_config(cfg)
    if not mp.enabled:
        return np.ones((links, 1), dtype=np.complex128)
    return mp.fir(mp.round_taps(cfg.run.seed, round_index, links))


def subcarrier_shapes(cfg, round_index: int, links: int) -> np.ndarray:
    """(links, U) G_ik: the round's multipath on each occupied subcarrier (1 when flat)."""
    return subcarrier_response(round_firs(cfg, round_index, links), OfdmLayout.from_phy(cfg.phy))


def ofdm_transmit(cfg, plan, rng: np.random.Generator) -> Reception:
    """The sim air's OFDM round (module doc); ``plan.extra["ofdm"]`` from power/ofdm_plan.plan_ofdm."""
    t0 = time.perf_counter()
    od = plan.extra["ofdm"]
    lay = OfdmLayout.from_phy(cfg.phy)
    d, K = plan.dim, plan.clients
    n = (d + 1) // 2
    carriers = np.asarray(od["carriers"], np.int64)
    k_of = carriers[np.arange(n) % len(carriers)]                       # subcarrier of each payload symbol
    H = np.asarray(plan.h, complex)[:, None] * subcarrier_shapes(cfg, plan.round, K)
    gain = H * np.asarray(od["alpha"], complex)                          # (K, U) h_ik alpha_ik
    active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    y = np.zeros(n, dtype=np.complex128)
    finite = np.all(np.isfinite(plan.payload), axis=1)
    for i in np.flatnonzero(active):
        row = plan.payload[i] if finite[i] else np.zeros(d)
        y += gain[i, k_of] * pack_reals(row)
    sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)
    noise_var = sigma_c2 + (abs(plan.h_cj) * plan.alpha_cj) ** 2
    y += np.sqrt(noise_var) * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
    n_ofdm = lay.payload_symbols(n, len(carriers))
    return Reception(aggregate=unpack_reals(y, d) / plan.alpha_u, ok=True,
                     channel_uses=lay.burst_samples(n_ofdm), wall_s=time.perf_counter() - t0,
                     extra={"waveform": "ofdm", "ofdm_symbols": int(n_ofdm), "data_carriers": int(len(carriers))})
