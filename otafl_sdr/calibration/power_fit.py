"""Transmit power calibration: received power against digital amplitude and TX gain, fitted by a model
linear in dB:

    P_rx[dB] = c0 + k_amp 20 log10(a) + k_gain (G - G_ref)

(a linear radio has k_amp = k_gain = 1). P_rx is |g|^2 of the least-squares gain of the known pilot
(received power per unit-energy symbol, in the receiver's digital units), so it is unbiased by the
noise floor. Points more than ``compression_db`` below the line are taken as compression (DAC / PA
saturation) and dropped one at a time, worst first, before the final fit; they stay in the table,
marked unused. A sweep at a single TX gain fits k_gain = 0 (not measured; ``gain_swept`` False)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COMPRESSION_DB = 1.0


@dataclass
class PowerFit:
    c0_db: float
    k_amp: float
    k_gain: float
    gain_ref: float
    rms_db: float                                   # residual rms of the used points
    gain_swept: bool
    amplitude: np.ndarray = field(default_factory=lambda: np.zeros(0))     # (n,) the table
    gain_db: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rx_power_db: np.ndarray = field(default_factory=lambda: np.zeros(0))
    used: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def predict_db(self, amplitude, gain_db) -> np.ndarray:
        """Received power (dB) at this digital amplitude and TX gain."""
        return self.c0_db + self.k_amp * 20 * np.log10(amplitude) + self.k_gain * (np.asarray(gain_db) - self.gain_ref)

    def amplitude_for(self, rx_power_db, gain_db) -> np.ndarray:
        """Digital amplitude that gives ``rx_power_db`` at TX gain ``gain_db``."""
        return 10 ** ((np.asarray(rx_power_db) - self.c0_db - self.k_gain * (np.asarray(gain_db) - self.gain_ref))
                      / (20 * self.k_amp))

    def to_dict(self) -> dict:
        return {"model": "linear-dB", "c0_db": self.c0_db, "k_amp": self.k_amp, "k_gain": self.k_gain,
                "gain_ref": self.gain_ref, "rms_db": self.rms_db, "gain_swept": self.gain_swept,
                "table": [[float(a), float(g), float(p), bool(u)] for a, g, p, u in
                          zip(self.amplitude, self.gain_db, self.rx_power_db, self.used)]}

    @classmethod
    def from_dict(cls, d: dict) -> "PowerFit":
        t = np.asarray([row[:3] for row in d.get("table", [])], dtype=np.float64).reshape(-1, 3)
        used = np.asarray([bool(row[3]) for row in d.get("table", [])], dtype=bool)
        return cls(float(d["c0_db"]), float(d["k_amp"]), float(d["k_gain"]), float(d["gain_ref"]),
                   float(d["rms_db"]), bool(d["gain_swept"]), t[:, 0], t[:, 1], t[:, 2], used)


def fit_power(amplitude, gain_db, rx_power_db, gain_ref: float | None = None,
              compression_db: float = COMPRESSION_DB) -> PowerFit:
    """Least-squares fit of the linear-in-dB model to a sweep (arrays of equal length, amplitude > 0)."""
    a = np.asarray(amplitude, dtype=np.float64).ravel()
    g = np.asarray(gain_db, dtype=np.float64).ravel()
    p = np.asarray(rx_power_db, dtype=np.float64).ravel()
    if not (len(a) == len(g) == len(p)):
        raise ValueError("amplitude, gain_db and rx_power_db must have the same length")
    if np.any(a <= 0) or not np.all(np.isfinite(p)):
        raise ValueError("the sweep needs amplitudes > 0 and finite received powers")
    if len(np.unique(a)) < 2:
        raise ValueError("the sweep needs at least two digital amplitudes")
    gref = float(np.max(g)) if gain_ref is None else float(gain_ref)
    swept = len(np.unique(g)) > 1
    cols = [np.ones_like(a), 20 * np.log10(a)] + ([g - gref] if swept else [])
    X = np.stack(cols, axis=1)
    used = np.ones(len(a), dtype=bool)
    while True:
        coef, *_ = np.linalg.lstsq(X[used], p[used], rcond=None)
        resid = p - X @ coef
        worst = np.where(used, resid, np.inf)
        j = int(np.argmin(worst))
        if worst[j] < -compression_db and used.sum() > X.shape[1] + 1:
            used[j] = False
            continue
        break
    rms = float(np.sqrt(np.mean(resid[used] ** 2)))
    return PowerFit(float(coef[0]), float(coef[1]), float(coef[2]) if swept else 0.0, gref, rms, swept,
                    a, g, p, used)
