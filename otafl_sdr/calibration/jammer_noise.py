"""The jammer's delivered noise (issue 13): how much of the noise the jammer sends reaches the receiver.

One exchange over a calibration link: every client silent, the jammer silent for a first stretch of the
capture (the noise floor) and then sending a Gaussian test signal a n, n ~ CN(0, 2) per symbol (unit
variance per real coordinate, as its round bursts, eq. 15 of paper 000), RRC-shaped like them, drawn
from the operating system's entropy (:func:`otafl_sdr.noise_source.entropy_rng`). The receiver's matched
filter output at the symbol rate carries v = G a^2 + sigma_c2 per real coordinate, so

    G = (v - sigma_c2) / a^2

is the jammer path's power gain: the noise variance delivered per unit of jammer amplitude^2, in the
same units as the noise floor (what the ledger counts). v is taken at the worst of the ``sps`` sample
phases (a jammer that arrives between the clients' sampling instants delivers less, by up to a
rolloff / 2 share), so G holds at whatever phase the round's receiver samples. Standard error: each
mean of |y|^2 / 2 over n symbols of complex Gaussian noise has s.e. (its value) / sqrt(n).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.noise_source import entropy_rng
from otafl_sdr.phy.pulse_shaping import shape
from otafl_sdr.calibration.procedures import QUANTUM, LEAD

JAMMER_TEST_SNR_DB = 20.0        # loopback: the test signal's level above the configured noise floor
UHD_JAMMER_AMPLITUDE = 0.1       # uhd: digital amplitude per real coordinate (4.5 sigma peak ~ 0.64 FS)
JAMMER_SAMPLES = 1 << 15         # samples of the test signal (and of the silent stretch before it)
PAPR_SIGMA = 4.5                 # the test signal's peak is checked at this many sigma of its amplitude
Z_LOWER = 3.0                    # the ledger counts G - 3 standard errors


@dataclass
class JammerNoise:
    """gain: G (noise variance per real coordinate delivered per unit amplitude^2); gain_std: its s.e.;
    amplitude: the test signal's a; sigma_c2: the floor measured in the same capture; symbols: matched-
    filter outputs per estimate; phase_gains: G at each sample phase (the smallest is ``gain``)."""

    gain: float
    gain_std: float
    amplitude: float
    sigma_c2: float
    symbols: int
    phase_gains: list

    def lower(self, z: float = Z_LOWER) -> float:
        """G - z s.e., at least 0: the jammer noise a ledger may count on per unit amplitude^2."""
        return float(max(self.gain - z * self.gain_std, 0.0))

    def to_dict(self) -> dict:
        return {k: (list(map(float, v)) if isinstance(v, list) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "JammerNoise":
        out = cls(gain=float(d["gain"]), gain_std=float(d["gain_std"]), amplitude=float(d["amplitude"]),
                  sigma_c2=float(d["sigma_c2"]), symbols=int(d["symbols"]),
                  phase_gains=[float(v) for v in d.get("phase_gains", [])])
        for k in ("gain", "gain_std", "amplitude", "sigma_c2"):
            v = getattr(out, k)
            if not math.isfinite(v) or v < 0 or (k == "amplitude" and v == 0):
                raise ValueError(f"jammer_noise.{k} = {v!r} is not valid")
        return out


def default_amplitude(air: str, sigma_c2: float) -> float:
    """The default test amplitude: 20 dB above the noise floor (loopback), a fixed digital level (uhd)."""
    if air == "uhd":
        return UHD_JAMMER_AMPLITUDE
    return float(math.sqrt(sigma_c2 * 10 ** (JAMMER_TEST_SNR_DB / 10)))


def mean_power(x: np.ndarray, taps: np.ndarray, sps: int) -> tuple[np.ndarray, int]:
    """Per sample phase p: mean |y_k|^2 / 2 of the matched filter's outputs at that phase, and their count."""
    y = np.convolve(x, taps, mode="valid")
    n = len(y) // sps
    y = y[:n * sps].reshape(n, sps)
    return np.mean(np.abs(y) ** 2, axis=0) / 2, n


def measure_jammer_noise(link, modem, amplitude: float, n_samples: int = JAMMER_SAMPLES,
                         rng: np.random.Generator | None = None) -> JammerNoise:
    """One exchange (module doc); ``link`` must have a jammer (the last transmitter)."""
    if not getattr(link, "has_jammer", False):
        raise UserError("calibration: the jammer step needs a jammer (power.jammer = true and its radio)")
    if not (amplitude > 0 and math.isfinite(amplitude)):
        raise UserError(f"calibration: the jammer test amplitude must be > 0, got {amplitude}")
    full_scale = getattr(link, "full_scale", None)
    if full_scale is not None and PAPR_SIGMA * amplitude * math.sqrt(2.0) > full_scale:
        raise UserError(f"calibration: jammer test amplitude {amplitude:g} would peak near "
                        f"{PAPR_SIGMA * amplitude * math.sqrt(2.0):.3g}, beyond the DAC full scale {full_scale:g}")
    rng = rng or entropy_rng()
    sps, taps = modem.sps, np.asarray(modem.taps, dtype=np.float64)
    lo, hi = link.delay_search
    margin = max(abs(int(lo)), abs(int(hi))) + 2 * len(taps)
    n_sym = int(n_samples) // sps
    z = rng.standard_normal(n_sym) + 1j * rng.standard_normal(n_sym)
    x = (amplitude * shape(z, taps, sps)).astype(np.complex64)
    start = LEAD + int(n_samples) + margin
    length = int(-(-(start + len(x) + margin) // QUANTUM) * QUANTUM)
    streams = np.zeros((link.transmitters, length), dtype=np.complex64)
    streams[-1, start:start + len(x)] = x
    y = np.asarray(link.exchange(streams)).astype(np.complex128)
    floor = y[LEAD:start - margin]
    jam = y[start + margin:start + len(x) - margin]
    v, se, sigma_c2, gains, n_j = delivered_in_slots(floor, jam, taps, sps)
    return JammerNoise(gain=float(v / amplitude ** 2), gain_std=float(se / amplitude ** 2), amplitude=float(amplitude),
                       sigma_c2=sigma_c2, symbols=int(n_j), phase_gains=[float(g) / amplitude ** 2 for g in gains])


def delivered_in_slots(quiet: np.ndarray, jam: np.ndarray, taps: np.ndarray, sps: int
                       ) -> tuple[float, float, float, np.ndarray, int]:
    """The noise a jammer delivered, from two stretches of one capture: ``quiet`` (nothing transmits: the
    receiver's floor) and ``jam`` (only the jammer transmits). Both go through the receiver's matched filter
    (``taps``) and are read at the symbol rate at each of the ``sps`` sample phases; per real coordinate

        v_p = mean |y_k|^2 / 2 over the jammer's stretch at phase p  -  the floor's (all phases' mean),

    the variance the jammer added at phase p. Returns (v at the worst phase, its standard error, the floor,
    v at every phase (sps,), symbols per phase in ``jam``). Standard error: each mean of |y|^2 / 2 over n
    symbols of complex Gaussian noise has s.e. (its value) / sqrt(n) (phases are correlated: n, not n sps);
    the floor's adds in quadrature. Used by the calibration's jammer step (measure_jammer_noise, v / a^2 =
    G) and by every uhd round's jammer-only slot (radio/jammer_slots.py)."""
    taps = np.asarray(taps, dtype=np.float64)
    quiet = np.asarray(quiet, dtype=np.complex128)
    jam = np.asarray(jam, dtype=np.complex128)
    dc = np.mean(quiet)
    f_pow, n_f = mean_power(quiet - dc, taps, sps)
    j_pow, n_j = mean_power(jam - dc, taps, sps)
    if n_f < 1 or n_j < 1:
        raise ValueError(f"the slots are too short for the matched filter ({len(quiet)} quiet, {len(jam)} jammer "
                         f"samples, {len(taps)} taps)")
    floor = float(np.mean(f_pow))
    se_floor = floor / math.sqrt(n_f)
    v = j_pow - floor
    p = int(np.argmin(v))
    se = math.sqrt((j_pow[p] / math.sqrt(n_j)) ** 2 + se_floor ** 2)
    return float(v[p]), float(se), floor, v, int(n_j)
