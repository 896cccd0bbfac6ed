"""The oscillators of a simulated lab's radios (issue 34, item 1): what a carrier offset, its drift, a tune's
random LO phase and phase noise do to the samples that pass between the simulated USRPs.

Standalone (numpy and the standard library only): the hub simulator loads it into its own interpreter
(``.venv-uhdsim``) next to :mod:`otafl_sdr.radio.uhd_sim_loopback`, which applies it to every transmit stream
it adds into a round; the project imports it as ``otafl_sdr.radio.uhd_sim_oscillator`` (presets, tests).

The model, per radio i (one reference oscillator drives both its TX and RX synthesizers):

- **frequency offset** eps_i(t) in ppm of the carrier. Independent oscillators (``b210``): eps_i(0) uniform in
  +- ``ppm`` (Ettus B200/B210 spec sheet: 40 MHz TCXO, frequency accuracy +- 2.0 ppm; the E320 states the
  same class of TCXO), then a random walk, eps_i(t + dt) = eps_i(t) + N(0, (drift_ppb 1e-3)^2 dt): ``drift_ppb``
  is the rms frequency change in ppb after one second (ppb / sqrt(s); a slow thermal wander, about 3 ppb
  (2.7 Hz at 915 MHz) in an hour at the default 0.05). A shared 10 MHz / PPS (``shared_ref``): every radio's
  synthesizers lock to one reference, so eps_i(t) = eps_ref(t) for all i (one draw and one walk, within
  +- ``ppm`` of a GPSDO-class reference, 0.025 ppm by default): the offsets are common and every relative
  offset is exactly 0;
- **the carrier phase** Phi_i(t) = 2 pi f_c int_0^t eps_i 1e-6 dt', advanced in the lab's device time (below);
- **the LO phase at every tune** lo_i ~ U(0, 2 pi): the AD9361 / AD9364 (B210, E320) has no phase-resync of
  its fractional-N RF PLLs, so each tune leaves its TX and RX LOs at a random phase, with or without a shared
  reference (AD9361 reference manual UG-570, "RF PLL": no phase-synchronisation feature; Ettus application
  note "Synchronization and MIMO capability with USRP devices": AD9361-based radios need a phase
  calibration after each tune). Drawn when the radio's stream is (re)made and at ``retune``;
- **phase noise**: within a burst a Wiener phase of ``phase_noise`` rad / sqrt(sample) per synthesizer (the
  default 1.2e-4 at 1 MS/s accumulates 0.5 deg rms over a 5,000-sample frame, the order of the integrated phase
  noise the AD9361 data sheet states for its RF synthesizers); it restarts at each burst (a PLL's close-in
  noise is bounded by its loop; the long-term wander is the reference's, modelled by eps).

What the hub's receiver sees of a burst from radio i that starts in round m at sample n of the round:
x[n] exp(j (Phi_i(t_m) - Phi_0(t_m) + lo_tx_i - lo_rx_0 + 2 pi (f_i - f_0) n / rate + pn_tx_i[n] - pn_rx_0[n]))
with f_i = eps_i(t_m) 1e-6 f_c (Hz): the carrier offset between radio i's TX and the receiver's RX. The lab's
**device time** t_m advances ``advance_s`` at each capture (a fast clock: 200 rounds of 18 s are an hour)
or, with ``advance_s = 0``, by the wall time between captures. ``step_hz`` adds a carrier step to one radio
(an injected 5 Hz jump), ``retune`` redraws its LO phase. Everything is seeded from ``seed`` (the run's
``run.seed``), per radio, so a lab replays the same oscillators; the hub writes each round's true relative
offsets and phases (``truth``) so tests can check estimators against them.
"""
from __future__ import annotations

import json
import math

import numpy as np

# model name -> its parameters (docstring for the sources); "none": an ideal cable (no oscillator effects)
MODELS: dict[str, dict] = {
    "none": {"ppm": 0.0, "drift_ppb": 0.0, "phase_noise": 0.0, "shared_ref": True, "random_lo": False},
    "b210": {"ppm": 2.0, "drift_ppb": 0.05, "phase_noise": 1.2e-4, "shared_ref": False, "random_lo": True},
    "shared_ref": {"ppm": 0.025, "drift_ppb": 0.05, "phase_noise": 1.2e-4, "shared_ref": True, "random_lo": True},
}
DEFAULTS = {"seed": 0, "carrier_hz": 915e6, "rate": 1e6, "advance_s": 0.0}
REFERENCE = 1_000_000      # the seeded stream of the shared reference (radio indices are below it)
KEYS = ("model", "seed", "carrier_hz", "rate", "advance_s", "ppm", "drift_ppb", "phase_noise", "shared_ref",
        "random_lo")


def oscillator_config(model: str = "b210", **overrides) -> dict:
    """The full parameter set of ``model`` (a name of ``MODELS``) with ``overrides`` (any of ``KEYS``); raises
    ValueError on an unknown model or key, or a value out of range."""
    if model not in MODELS:
        raise ValueError(f"oscillator model {model!r} is not one of {', '.join(MODELS)}")
    bad = sorted(set(overrides) - set(KEYS))
    if bad:
        raise ValueError(f"unknown oscillator setting(s): {', '.join(bad)}")
    cfg = {"model": model, **DEFAULTS, **MODELS[model], **overrides}
    for key in ("ppm", "drift_ppb", "phase_noise", "advance_s"):
        if not (math.isfinite(float(cfg[key])) and float(cfg[key]) >= 0):
            raise ValueError(f"oscillator {key} must be a finite number >= 0, not {cfg[key]!r}")
    if not float(cfg["rate"]) > 0 or not float(cfg["carrier_hz"]) > 0:
        raise ValueError("oscillator rate and carrier_hz must be > 0")
    return cfg


class Radio:
    """One radio's oscillator state (see the module doc): eps (ppm), the carrier phase Phi (rad), the TX and
    RX LO phases of its current tuning, its tune count and its seeded stream."""

    def __init__(self, index: int, cfg: dict, common: "Radio | None" = None):
        self.index = index                # radio index in the lab; REFERENCE for the shared 10 MHz itself
        self.rng = np.random.default_rng([int(cfg["seed"]), 34, index])
        # phase noise on streams of their own (TX, RX): packets of concurrent streams never reorder the draws
        self.pn_rng = {side: np.random.default_rng([int(cfg["seed"]), 34, index, k]) for k, side in
                       enumerate(("tx", "rx"), start=1)}
        self.cfg = cfg
        self.common = common              # shared reference: eps and Phi are the reference's
        self.eps = 0.0 if common is not None else float(self.rng.uniform(-1.0, 1.0) * float(cfg["ppm"]))
        self.step_ppm = 0.0               # injected carrier steps (ppm)
        self.step_phi = 0.0               # the phase the injected step has accumulated since it was made
        self.phi = 0.0
        self.tunes = 0
        self.lo_tx = self.lo_rx = 0.0
        self.tune()

    def tune(self) -> None:
        """A (re)tune: new random TX and RX LO phases (the AD9361's PLLs have no phase resync)."""
        self.tunes += 1
        if self.cfg["random_lo"]:
            self.lo_tx, self.lo_rx = (float(v) for v in self.rng.uniform(0.0, 2 * np.pi, 2))

    def offset_ppm(self) -> float:
        return (self.common.eps if self.common is not None else self.eps) + self.step_ppm

    def phase(self) -> float:
        return (self.common.phi if self.common is not None else self.phi) + self.step_phi

    def advance(self, dt: float) -> None:
        """Move this radio's own reference forward by ``dt`` seconds of device time (random-walk drift)."""
        fc = float(self.cfg["carrier_hz"])
        if self.common is None:
            e0 = self.eps
            self.eps = e0 + float(self.rng.normal(0.0, float(self.cfg["drift_ppb"]) * 1e-3 * math.sqrt(dt))) if dt > 0 else e0
            self.phi = (self.phi + 2 * np.pi * fc * 1e-6 * 0.5 * (e0 + self.eps) * dt) % (2 * np.pi)
        self.step_phi = (self.step_phi + 2 * np.pi * fc * 1e-6 * self.step_ppm * dt) % (2 * np.pi)

    def pn(self, n: int, start: float = 0.0, side: str = "tx") -> np.ndarray:
        """(n,) a Wiener phase-noise path of this radio's ``side`` ('tx' / 'rx') synthesizer starting from
        ``start`` (rad), one increment per sample."""
        s = float(self.cfg["phase_noise"])
        if s == 0 or n == 0:
            return np.full(n, start)
        return start + np.cumsum(self.pn_rng[side].normal(0.0, s, n))


class LabOscillators:
    """Every radio's oscillator in one lab (kept by the hub). ``open_round(now)`` advances device time (module
    doc); ``rotation(i, pos, n, state)`` gives the factor the hub multiplies radio i's samples pos .. pos + n of
    the round by; ``receiver_rotation`` the receiver's own phase noise for its capture."""

    def __init__(self, cfg: dict, n: int = 64):
        self.cfg = oscillator_config(**cfg)
        ref = None
        if self.cfg["shared_ref"]:
            ref = Radio(REFERENCE, dict(self.cfg, random_lo=False))      # the shared 10 MHz (GPSDO-class) reference
        self.ref = ref
        self.radios = [Radio(i, self.cfg, ref) for i in range(int(n))]
        self.t = 0.0                      # device time of the current round (s)
        self.rounds = 0
        self._last_wall = None

    def open_round(self, wall_now: float) -> float:
        """A capture opened a new round: device time moves on (``advance_s`` or the wall time since the last)."""
        adv = float(self.cfg["advance_s"])
        dt = adv if adv > 0 else (0.0 if self._last_wall is None else max(wall_now - self._last_wall, 0.0))
        self._last_wall = wall_now
        if self.rounds and dt > 0:
            if self.ref is not None:
                self.ref.advance(dt)
            for r in self.radios:
                r.advance(dt)
            self.t += dt
        self.rounds += 1
        return self.t

    def relative_cfo_hz(self, i: int) -> float:
        """Carrier offset of radio i's TX against the receiver's (radio 0's) RX, Hz."""
        return (self.radios[i].offset_ppm() - self.radios[0].offset_ppm()) * 1e-6 * float(self.cfg["carrier_hz"])

    def relative_phase(self, i: int) -> float:
        """Radio i's TX phase against the receiver's RX at the start of the round (rad, in (-pi, pi])."""
        a, b = self.radios[i], self.radios[0]
        return float(np.angle(np.exp(1j * (a.phase() - b.phase() + a.lo_tx - b.lo_rx))))

    def rotation(self, i: int, pos: int, n: int, pn_start: float = 0.0) -> tuple[np.ndarray, float]:
        """((n,) complex factor for samples pos .. pos + n of radio i's burst in this round, the phase noise at
        its end (the next packet's ``pn_start``))."""
        k = np.arange(pos, pos + n, dtype=np.float64)
        pn = self.radios[i].pn(n, pn_start)
        ph = self.relative_phase(i) + 2 * np.pi * self.relative_cfo_hz(i) / float(self.cfg["rate"]) * k + pn
        return np.exp(1j * ph), float(pn[-1]) if n else pn_start

    def receiver_rotation(self, n: int, pn_start: float = 0.0) -> tuple[np.ndarray, float]:
        """((n,) the receiver's own phase-noise factor exp(-j pn_rx) for n captured samples, its end value)."""
        pn = self.radios[0].pn(n, pn_start, "rx")
        return np.exp(-1j * pn), float(pn[-1]) if n else pn_start

    def retune(self, i: int) -> None:
        self.radios[i].tune()

    def set_step(self, i: int, hz: float) -> None:
        """Radio i's carrier from now on ``hz`` off its oscillator's (an injected jump; 0 removes it)."""
        self.radios[i].step_ppm = float(hz) / float(self.cfg["carrier_hz"]) * 1e6

    def truth(self, radios: list[int]) -> dict:
        """This round's true relative offsets and phases (what an estimator should find), JSON-ready."""
        return {"round": self.rounds, "t_s": self.t,
                "radios": {str(i): {"cfo_hz": self.relative_cfo_hz(i), "phase_rad": self.relative_phase(i),
                                    "tunes": self.radios[i].tunes} for i in radios}}


def load(path: str) -> dict:
    """An oscillator config file (JSON, written by SimulatedLab) as a full config."""
    with open(path) as f:
        raw = json.load(f)
    return oscillator_config(**raw)


__all__ = ["DEFAULTS", "KEYS", "MODELS", "REFERENCE", "LabOscillators", "Radio", "load", "oscillator_config"]
