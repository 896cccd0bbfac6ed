"""Per-client coherence from per-client reference symbols (issue 34, item 2): each client's residual gain,
phase and carrier offset, with their standard errors, from reference slots that are orthogonal in time (one
client sends in its slot, the others are silent), as over-the-air computation testbeds with per-round channel
estimation do. Pure numpy: the maths a coherent uhd round's sounding feeds (phy/client_sounding.py,
calibration/coherence_loop.py, ``air.coherence``); no client data is involved (reference symbols only).

Model (symbol level, after the receiver's matched filter and its correction of what is common to the sum):
in client i's slot z_k = c g_i exp(j 2 pi nu_i k) r_k + n_k, k = 0 .. L-1, with r_k the slot's known unit
reference (as sent, pre-equalised so that it arrives at amplitude c on a link that holds its calibration),
g_i the residual complex gain (1 when calibrated), nu_i the residual offset (cycles/symbol) and n_k complex
white noise of ``noise_var`` per real coordinate. Estimates:

- g_i: least squares at the slot's centre, sum_k conj(r_k) z_k exp(-j 2 pi nu k') / (c sum |r_k|^2) (k' = k -
  centre), var = 2 noise_var / (c^2 sum |r_k|^2); its phase's standard error sigma_phi = sqrt(var / 2) / |g|,
  and the gain's in dB 20 / ln 10 sigma_phi (the same relative error);
- nu_i: the weighted least-squares slope of the per-symbol phases arg(z_k conj(r_k)) (Kay's estimator at high
  SNR), var = 1 / sum_k w_k (k - k_w)^2, w_k = c^2 |g|^2 |r_k|^2 / noise_var, in Hz times the symbol rate.

Shapes: ``z`` (n_frame,) complex; ``slots`` {client: (start, L)}; ``references`` {client: (L,) complex}."""
from __future__ import annotations

import math

import numpy as np

DB_PER_NEPER = 20.0 / math.log(10.0)


def client_estimates(z: np.ndarray, slots: dict, references: dict, amplitude: complex, noise_var: float,
                     symbol_rate: float) -> list[dict]:
    """One dict per client (sorted by client): client, phase_rad, phase_std, cfo_hz, cfo_std_hz, gain_db,
    gain_db_std (module doc; the phase at the slot's centre)."""
    z = np.asarray(z, dtype=np.complex128)
    c = complex(amplitude)
    out = []
    for client in sorted(slots):
        start, L = (int(v) for v in slots[client])
        r = np.asarray(references[client], dtype=np.complex128)
        if r.shape != (L,) or start < 0 or start + L > z.size or L < 2:
            raise ValueError(f"client {client}: slot ({start}, {L}) does not fit a frame of {z.size} symbols "
                             f"with a reference of shape {r.shape}")
        y = z[start:start + L] * np.conj(r)                       # c g exp(j 2 pi nu k) |r_k|^2 + noise
        e = np.abs(r) ** 2
        k = np.arange(L, dtype=np.float64)
        # the offset: a coarse lag-1 estimate, then the weighted slope of the unwrapped residual phase
        nu0 = float(np.angle(np.sum(y[1:] * np.conj(y[:-1])))) / (2 * np.pi)
        ph = np.unwrap(np.angle(y * np.exp(-2j * np.pi * nu0 * k)))
        w = e / max(float(np.sum(e)), 1e-300)
        kw = float(np.sum(w * k))
        slope = float(np.sum(w * (k - kw) * (ph - np.sum(w * ph))) / np.sum(w * (k - kw) ** 2))
        nu = nu0 + slope / (2 * np.pi)
        centre = (L - 1) / 2.0
        g = complex(np.sum(y * np.exp(-2j * np.pi * nu * (k - centre))) / (c * np.sum(e)))
        mag = max(abs(g), 1e-300)
        sigma_phi = math.sqrt(float(noise_var) / (abs(c) ** 2 * float(np.sum(e)))) / mag
        wk = abs(c) ** 2 * mag ** 2 * e / max(float(noise_var), 1e-300)
        kw2 = float(np.sum(wk * k) / np.sum(wk))
        nu_std = 1.0 / math.sqrt(float(np.sum(wk * (k - kw2) ** 2))) / (2 * np.pi)
        out.append({"client": client, "phase_rad": math.atan2(g.imag, g.real), "phase_std": sigma_phi,
                    "cfo_hz": nu * float(symbol_rate), "cfo_std_hz": nu_std * float(symbol_rate),
                    "gain_db": DB_PER_NEPER * math.log(mag), "gain_db_std": DB_PER_NEPER * sigma_phi})
    return out


__all__ = ["client_estimates"]
