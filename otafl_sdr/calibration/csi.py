"""The CSI a run takes from a calibration file (calibration/data.py): ``CalibratedCsi.for_run`` loads and
checks the file, refuses one that does not match the run, warns when it is old.

How the estimates reach a round (``CalibratedCsi.estimates(round, h)``):

* ``uhd``: the lab's channel is static between calibration and run, so every round uses the calibrated
  h_hat_i (the ``h`` the orchestrator draws is a simulation artefact the uhd air never applies).
* ``loopback`` (and ``sim``/``zmq``, which have no radios to calibrate): the orchestrator draws h fresh
  every round (block fading), so a static estimate would be meaningless. The calibration's measured
  relative error e_i = h_hat_i / h_i - 1 (estimate against the channel block's ground truth, from the
  real flowgraph) is carried to every round: h_hat_i(m) = h_i(m) (1 + e_i). This is a calibration done
  once and trusted for the run, not a per-round re-estimate: its error does not shrink or grow with the
  round's fade (benchmarks/bench_csi_vs_perfect.py says so next to its figures).

Clients pre-compensate the measured offsets: :func:`known_offsets` gives each client's carrier offset
(the total measured at the receiver, so the sum arrives with none left but the estimation error) and
its delay relative to the earliest client (a client cannot start before its slot, so the earliest
one defines time zero): the loopback air delays by whole samples, the uhd air shifts each client's
``tx_time`` by the fractional delay and rotates its burst (:func:`precompensate`). The server uses the
measured ``CalibratedCsi.sigma_c2`` in the privacy ledger."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.calibration.data import CalibrationFile, check_matches, check_phase_age, warn_if_old
from otafl_sdr.calibration.offset_gate import CFO_SIGNIFICANCE, significant_cfo  # noqa: F401 (re-exported)


class CalibratedCsi:
    """Measured CSI for a run (see the module docstring for how rounds use it).

    Attributes: ``h`` (K,) calibrated gains, ``h_std`` (K,), ``cfo`` (K,) cycles/sample (total, as
    measured at the receiver), ``delay`` (K,) samples relative to the earliest client, ``sigma_c2`` and
    ``sigma_c2_std`` (the measured noise floor), ``h_cj`` / ``h_cj_std`` (the jammer's path, None if not
    calibrated), ``rel_error`` (K,) e_i (loopback) or None, ``air``, ``path``, ``file``."""

    def __init__(self, cal: CalibrationFile, path: str | Path = ""):
        if not cal.clients:
            raise UserError(f"calibration file '{path}' holds no channel estimates; run `otafl-sdr calibrate "
                            f"channel --config CONFIG --out {path}`")
        if not cal.noise:
            raise UserError(f"calibration file '{path}' holds no noise floor; run `otafl-sdr calibrate noise "
                            f"--config CONFIG --out {path}`")
        self.file, self.path, self.air = cal, str(path), cal.air
        self.h = np.array([c.h for c in cal.clients], dtype=np.complex128)
        self.h_std = np.array([c.h_std for c in cal.clients], dtype=np.float64)
        self.cfo = np.array([c.cfo for c in cal.clients], dtype=np.float64)
        self.cfo_std = np.array([c.cfo_std for c in cal.clients], dtype=np.float64)
        # device time each client's phase refers to (uhd calibrations with a significant offset), else None
        self.t_ref = [c.t_ref for c in cal.clients]
        # each client link's Wiener phase variance (rad^2 per sample) its calibration's pilots showed
        self.phase_noise = np.array([c.phase_noise for c in cal.clients], dtype=np.float64)
        arrival = np.array([c.delay for c in cal.clients], dtype=np.float64)
        self.delay = arrival - np.min(arrival)
        self.sigma_c2 = float(cal.noise["sigma_c2"])
        self.sigma_c2_std = float(cal.noise["sigma_c2_std"])
        self.h_cj = cal.jammer.h if cal.jammer is not None else None
        self.h_cj_std = cal.jammer.h_std if cal.jammer is not None else None
        self.rel_error = None
        self.rel_error_cj = None
        self.jammer_noise = dict(cal.jammer_noise) if cal.jammer_noise else None
        if cal.air == "loopback":
            if not all(c.truth for c in cal.clients):
                raise UserError(f"calibration file '{path}' is corrupt (a loopback calibration without the "
                                f"channel block's ground truth)")
            self.rel_error = np.array([c.rel_error() for c in cal.clients], dtype=np.complex128)
            if cal.jammer is not None and cal.jammer.truth:
                self.rel_error_cj = cal.jammer.rel_error()

    @classmethod
    def for_run(cls, cfg, K: int, path: str | Path | None = None) -> "CalibratedCsi":
        """Load ``calibration.file`` (or ``path``: a calibration taken in the run's session), check it against
        the run (UserError if it does not match, is missing or corrupt), warn once if it is older than
        ``calibration.max_age_days``."""
        if path is None and not cfg.calibration.file:
            raise ConfigError("calibration.file", "air.csi = 'calibrated' needs a calibration file; make one "
                                                  "with `otafl-sdr calibrate all --config CONFIG --out FILE`")
        path = Path(path if path is not None else cfg.calibration.file)
        cal = CalibrationFile.load(path)
        check_matches(cal, cfg, K, path)
        warn_if_old(cal, cfg.calibration.max_age_days, path)
        check_phase_age(cal, cfg, path)
        return cls(cal, path)

    @property
    def clients(self) -> int:
        return len(self.h)

    def estimates(self, round_index: int, h_true: np.ndarray) -> np.ndarray:
        """(K,) complex channel each client believes it has in this round (used for pre-inversion).

        uhd: the calibrated h_hat (static channel); loopback/sim: h_true (1 + e_i)."""
        h_true = np.asarray(h_true, dtype=np.complex128)
        if h_true.shape != self.h.shape:
            raise UserError(f"the calibration holds {self.clients} clients but the round has {h_true.shape[0]}")
        if self.rel_error is None:
            return self.h.copy()
        return h_true * (1.0 + self.rel_error)

    def gain_margin(self, z: float = 3.0) -> np.ndarray:
        """(K,) upper confidence bound on |h_i / h_hat_i|, 1 / (1 - z rel_std_i): a client that pre-inverts
        with h_hat_i reaches the receiver with up to this factor more gain than planned (inf when the
        estimate is too poor to bound it). The ledger multiplies the sensitivity by its maximum."""
        rel = self.h_std / np.maximum(np.abs(self.h), 1e-300)
        with np.errstate(divide="ignore"):
            return np.where(z * rel < 1, 1.0 / (1.0 - z * rel), np.inf)

    def jammer_lower(self, z: float = 3.0) -> float:
        """Lower confidence bound on |h_cj| (0 when the file holds no jammer calibration): the jammer
        noise the ledger may count on a real air."""
        if self.h_cj is None:
            return 0.0
        return float(max(abs(self.h_cj) - z * float(self.h_cj_std or 0.0), 0.0))

    def jammer_estimate(self, h_cj_true: complex) -> complex | None:
        """The jammer path the server designs with: calibrated h_cj (uhd) or h_cj (1 + e_cj) (loopback);
        None if the file holds no jammer calibration."""
        if self.h_cj is None:
            return None
        if self.rel_error_cj is None:
            return complex(self.h_cj)
        return complex(h_cj_true * (1.0 + self.rel_error_cj))


def known_offsets(cfg, K: int, whole: bool = True, path=None) -> tuple[np.ndarray, np.ndarray]:
    """(cfo (K,) cycles/sample, delay (K,) samples >= 0) each client pre-compensates in a calibrated
    run: the measured total carrier offset, and the measured delay relative to the earliest client.
    ``whole``: rounded to whole samples (the loopback air delays its bursts by whole samples) and, for
    non-uhd airs, clipped to what the loopback air's schedule allows (client_delay_max + residual_delay);
    the uhd air takes the fractional delay (``tx_time`` is finer than a sample)."""
    csi = CalibratedCsi.for_run(cfg, K, path)
    cfo = significant_cfo(csi.cfo, csi.cfo_std)
    if not whole:
        return cfo, csi.delay.copy()
    delay = np.rint(csi.delay).astype(np.int64)
    if cfg.air.name != "uhd":
        delay = np.clip(delay, 0, int(cfg.loopback.client_delay_max) + int(cfg.loopback.residual_delay))
    return cfo, delay


def phase_refs(cfg, K: int, path=None) -> list:
    """(K,) the device time (UTC s) each client's calibrated phase refers to, or None where the calibration
    did not refer it (no significant offset, not a uhd link): :func:`precompensate`'s ``t_ref``."""
    return list(CalibratedCsi.for_run(cfg, K, path).t_ref)


def phase_noise(cfg, K: int, path=None) -> np.ndarray:
    """(K,) each client link's Wiener phase variance, rad^2 per sample, from its calibration's pilots
    (calibration/phase_wander.py; 0 where none was seen or the file predates it)."""
    return CalibratedCsi.for_run(cfg, K, path).phase_noise.copy()


def delivered_jammer_gain(path) -> float | None:
    """The lower 3-sigma bound of the jammer step in calibration file ``path`` ('' or no step: None)."""
    if not path:
        return None
    cal = CalibrationFile.load(path)
    if not cal.jammer_noise:
        return None
    from otafl_sdr.calibration.jammer_noise import JammerNoise
    return JammerNoise.from_dict(cal.jammer_noise).lower()


def precompensate(burst: np.ndarray, cfo: float, delay: float, rate: float, t0: float,
                  t_ref: float | None = None) -> tuple[np.ndarray, float]:
    """One client's burst with its measured offsets pre-compensated: rotated by -cfo (cycles/sample) and
    sent ``delay`` samples earlier: (burst', t0 - delay / rate).

    The rotation's phase: without ``t_ref`` it starts at 0 on the burst's first sample (each burst on its
    own). With ``t_ref`` (the device time the calibration's phase refers to) it is referenced to device
    time: the sample leaving at time t is rotated by -2 pi cfo (t - t_ref) rate, so the phase a residual
    offset turns between the calibration and the burst is taken out too, continuously across bursts
    (issue 25, item 2), instead of becoming a per-burst random phase after a few seconds."""
    x = np.asarray(burst)
    t_send = float(t0) - float(delay) / float(rate)
    start = 0.0
    if t_ref is not None:                      # cycles turned since t_ref, reduced first (precision)
        start = (float(cfo) * (t_send - float(t_ref)) * float(rate)) % 1.0
    return x * np.exp(-2j * np.pi * (start + float(cfo) * np.arange(len(x)))), t_send
