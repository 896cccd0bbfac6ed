"""Closed-loop per-client coherence within and between rounds (issue 34, items 2 and 3): what a round's
sounding (phy/client_sounding.py) measured of each client, the correction each client's payload then carries,
and the events and alarms ``link_health`` names per client. Pure numpy; reference symbols only: a client's
correction never depends on its data, and it is a unit-modulus rotation of its burst (an isometry: the
energy and the distance between two neighbouring bursts, hence the booked sensitivity, are unchanged), so
the privacy booking is the plan's.

Timeline: samples n of the round from the sounding's first sample (stage 1), the payload frame from
``n2`` = sounding + feedback gap on (stage 2). Client i's burst leaves multiplied by exp(-j theta_i(n)) on top
of its calibration's pre-compensation:

    stage 1:  theta_i(n) = psi_i + 2 pi f_i n / R                                   (the loop's state)
    stage 2:  theta_i(n) = psi_i + 2 pi f_i n / R + phi_i + 2 pi nu_i (n - nB_i) / R   (this round's residual)

with R the sample rate, phi_i the residual phase the sounding measured at the centre of client i's B block
(sample nB_i) and nu_i its residual offset. Both are taken as measured: with independent TCXOs the phase moves
by radians between rounds seconds apart (docs/lab.md: 13 rad rms predicted 18 s ahead) and the sounding,
milliseconds before the payload, knows it to milli-radians; the offset's own error (0.25 Hz rms: the
sounding's noise and the transmitters' phase noise over its 6 ms lever) costs 2 pi 0.25 Hz x 3 ms = 0.005 rad
at the payload. (Fusing it with the previous round's, a Kalman gain learnt from the loop's own residuals,
tracked its own noise: residuals of alternating sign, 4x the measurement's scatter, on the shared-reference
lab.) Stage 2 is phase-continuous with stage 1 (the same rotation plus the measured residual), and the next
round's stage 1 continues stage 2's: f_i <- f_i + nu_i, psi_i <- psi_i + phi_i - 2 pi nu_i nB_i / R
+ 2 pi f_i dT (dT: device time between the rounds' starts).

Events, per client, from the innovations' scale s (the rms innovation of the last ``WINDOW`` calm rounds,
never below the estimate's own standard error), at a gate g_k set so that a calm round names a false event
with probability FALSE_EVENT per client and kind: with s estimated from k zero-mean Gaussian innovations,
innovation / s is Student-t with k degrees of freedom, so g_k = t_k^{-1}(1 - FALSE_EVENT / 2) (17.9 at the first
k = 5, 6.3 at k = 16; a fixed 5-sigma gate on a 5-round scale names a calm round 1.4 % of the time). A **carrier
step** when |nu_i| > g_k sqrt(s_nu^2 + std^2); a **phase jump** (a retune's new LO phase) when the phase is
predictable (s_phi < PREDICTABLE rad: a shared 10 MHz) and |phi_i| > g_k sqrt(s_phi^2 + std^2). Either is taken in full
in the round it is seen (as every measurement), so the payload of that round is already corrected; the
outlier does not enter the scale. With independent TCXOs a phase jump cannot be told from the wander: the phase is not
predictable across rounds, and every round measures it afresh. A **retune** the host made (a hop and back: the
AD9361's PLLs relock at a random phase; radio/uhd_air.UhdAir.retune) is named from the host's own count of tunes,
on either reference, and corrected in its round as every phase is.

Alarms (a recalibration is due, ``air.on_drift``): only what tracking cannot hold: a client's reference gain
beyond ``air.drift_gain_db`` (3 standard errors beyond, the loop corrects phase, never power), a residual
offset beyond half the sounding's unambiguous range, a sounding too weak to correct (phase std beyond
WEAK_RAD); and, without tracking (``air.coherence = "measure"``), a client phase beyond ``air.drift_phase_rad``."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.stats import t as student_t

from otafl_sdr.calibration.client_coherence import client_estimates
from otafl_sdr.phy.client_sounding import SoundingLayout, combine_blocks

FALSE_EVENT = 1e-5     # probability that a calm round names an event, per client and kind (the gate's size)
WINDOW = 16            # calm rounds whose innovations set the scale
MIN_HISTORY = 5        # rounds of history before any event is named
PREDICTABLE = 0.3      # rad: a phase whose round-to-round scale is below this is tracked across rounds
WEAK_RAD = 0.1         # a sounding whose phase std exceeds this cannot correct the payload
SIGNIFICANCE = 3.0     # a gain is a drift only this many standard errors beyond its limit
MODES = ("off", "measure", "track")


def measure_clients(layout: SoundingLayout, z: np.ndarray, amplitudes, symbol_rate: float,
                    phase_noise=None) -> list[dict | None]:
    """Per client the sounding's estimate (phy/client_sounding.combine_blocks keys) from the matched filter's
    symbols ``z`` (n_frame,), or None for a client that sent no reference (``amplitudes[i]`` = 0: the
    amplitude its blocks arrive at when the calibration holds, c). ``phase_noise``: (K,) each link's Wiener
    phase variance per sample from its calibration (calibration/csi.phase_noise), or None (none stated)."""
    z = np.asarray(z, dtype=np.complex128)
    noise = z[layout.noise_slice()]
    noise_var = max(float(np.mean(np.abs(noise) ** 2)) / 2.0, 1e-30)        # per real coordinate
    out: list[dict | None] = []
    for i, c in enumerate(amplitudes):
        if not c:
            out.append(None)
            continue
        ref = {i: layout.reference}
        (a,) = client_estimates(z, {i: (layout.a_start(i), layout.block)}, ref, c, noise_var, symbol_rate)
        (b,) = client_estimates(z, {i: (layout.b_start(i), layout.block)}, ref, c, noise_var, symbol_rate)
        q = 0.0 if phase_noise is None else float(phase_noise[i]) * layout.sps        # per symbol
        out.append(combine_blocks(a, b, layout.lever, symbol_rate, q))
    return out


def _scale(values, floor: float) -> float:
    """The rms of the calm innovations ``values``, never below ``floor`` (the estimate's own std)."""
    v = np.asarray(list(values), dtype=np.float64)
    return max(float(np.sqrt(np.mean(v * v))) if v.size else 0.0, float(floor))


@lru_cache(maxsize=None)
def event_gate(history: int) -> float:
    """The gate g_k (module doc) for a scale estimated from ``history`` = k calm innovations."""
    return float(student_t.ppf(1.0 - FALSE_EVENT / 2.0, history))


@dataclass
class ClientLoop:
    """One client's state (module doc): psi (rad), f (Hz), whether it was acquired, the histories."""

    psi: float = 0.0
    f: float = 0.0
    acquired: bool = False
    phase_hist: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    cfo_hist: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    tunes: int | None = None      # its radio's host tunes when last seen (None: not yet)
    # this round's stage-2 residual (phi, nu, nB)
    phi: float = 0.0
    nu: float = 0.0
    nb: float = 0.0


class CoherenceLoop:
    """Every client's loop for one calibration (``mode`` 'track' corrects, 'measure' only reports); ``rate``
    in samples / s. ``stage1`` / ``stage2`` give the phases theta_i(n) to rotate by (module doc)."""

    def __init__(self, clients: int, rate: float, mode: str = "track"):
        if mode not in MODES[1:]:
            raise ValueError(f"coherence mode must be 'measure' or 'track', not {mode!r}")
        self.rate, self.mode = float(rate), mode
        self.clients = [ClientLoop() for _ in range(int(clients))]

    def stage1(self, i: int, n: np.ndarray) -> np.ndarray:
        c = self.clients[i]
        return c.psi + 2 * np.pi * c.f * np.asarray(n, dtype=np.float64) / self.rate

    def stage2(self, i: int, n: np.ndarray) -> np.ndarray:
        c = self.clients[i]
        n = np.asarray(n, dtype=np.float64)
        return self.stage1(i, n) + c.phi + 2 * np.pi * c.nu * (n - c.nb) / self.rate

    def observe(self, estimates: list, nb: list, tunes: list | None = None) -> list[dict | None]:
        """Fold in this round's sounding (``estimates`` from :func:`measure_clients`, ``nb`` each client's B
        centre, samples); sets the stage-2 residuals; returns ``link_health``'s ``clients`` records.
        ``tunes``: each client's count of host tunes (radio/uhd_air.UhdAir.retune), or None: a client whose
        count moved since its last sounding is named 'retuned by its host' (its new LO phase is no wander)."""
        records = []
        for i, (e, c) in enumerate(zip(estimates, self.clients)):
            c.phi = c.nu = 0.0
            if e is None:
                records.append(None)
                continue
            retuned = tunes is not None and c.tunes is not None and int(tunes[i]) != c.tunes
            if tunes is not None:
                c.tunes = int(tunes[i])
            event = "retuned by its host" if retuned else self._event(c, e)
            c.nb = float(nb[i])
            first = not c.acquired                    # acquisition: the calibration's residual, not a wander
            c.acquired = True
            if self.mode == "track":
                c.phi, c.nu = e["phase_rad"], e["cfo_hz"]
            if not (event or first):
                c.phase_hist.append(e["phase_rad"])
                c.cfo_hist.append(e["cfo_hz"])
            records.append({"client": i, **{k: float(e[k]) for k in ("phase_rad", "phase_std", "cfo_hz", "cfo_std_hz",
                                                                      "gain_db", "gain_db_std")},
                            "event": event or None, "tracked_cfo_hz": float(c.f + c.nu),
                            **({"alone": True} if e.get("alone") else {})})   # OFDM's lone sender: 0 +- 0 by construction
        return records

    @staticmethod
    def _event(c: ClientLoop, e: dict) -> str:
        if len(c.cfo_hist) >= MIN_HISTORY:
            s = _scale(c.cfo_hist, e["cfo_std_hz"])
            if abs(e["cfo_hz"]) > event_gate(len(c.cfo_hist)) * math.hypot(s, e["cfo_std_hz"]):
                return "carrier step"
        if len(c.phase_hist) >= MIN_HISTORY:
            s = _scale(c.phase_hist, e["phase_std"])
            if s < PREDICTABLE and abs(e["phase_rad"]) > event_gate(len(c.phase_hist)) * math.hypot(s, e["phase_std"]):
                return "phase jump"
        return ""

    def end_round(self, dt_s: float = 0.0) -> None:
        """The next round's stage 1 continues this round's stage 2 (module doc); ``dt_s``: device time to the
        next round's start (0 where the radios keep none, UHD's simulator)."""
        for c in self.clients:
            if self.mode != "track":
                continue
            c.psi = math.remainder(c.psi + c.phi - 2 * math.pi * c.nu * c.nb / self.rate, 2 * math.pi)
            c.f += c.nu
            c.psi = math.remainder(c.psi + 2 * math.pi * c.f * float(dt_s), 2 * math.pi)
            c.phi = c.nu = 0.0


def alarms(records: list, mode: str, gain_db_limit: float, phase_limit: float, unambiguous_hz: float) -> list[str]:
    """What tracking cannot hold this round, one phrase per client and figure (module doc); [] when calm."""
    out = []
    for r in records:
        if not r:
            continue
        who = f"client {r['client']}"
        if abs(r["gain_db"]) > gain_db_limit + SIGNIFICANCE * r["gain_db_std"]:
            out.append(f"{who}: reference gain {r['gain_db']:+.2f} dB (air.drift_gain_db = {gain_db_limit:g})")
        if abs(r["cfo_hz"]) > 0.5 * unambiguous_hz:
            out.append(f"{who}: residual carrier offset {r['cfo_hz']:+.1f} Hz, beyond what a round's sounding "
                       f"resolves (+- {0.5 * unambiguous_hz:.0f} Hz)")
        if r["phase_std"] > WEAK_RAD:
            out.append(f"{who}: sounding too weak to correct (phase +- {r['phase_std']:.2f} rad)")
        if mode == "measure" and abs(r["phase_rad"]) > phase_limit + SIGNIFICANCE * r["phase_std"]:
            out.append(f"{who}: phase {r['phase_rad']:+.2f} rad, not tracked (air.coherence = 'measure'; "
                       f"air.drift_phase_rad = {phase_limit:g})")
    return out


def measured(owner, estimates: list, nb: list, cfg, rate: float, unambiguous_hz: float,
             tunes: list | None = None) -> tuple[list, list]:
    """(link_health's ``clients`` records, this round's alarms) of a sounding that only measures
    (``air.coherence = "measure"``: the OFDM rounds, the testbed's nodes): ``owner.coherence`` (the air's or
    the server's per-client loop, made on first use or when the client count changes) names events against
    each client's calm history; nothing is corrected."""
    if getattr(owner, "coherence", None) is None or len(owner.coherence.clients) != len(estimates):
        owner.coherence = CoherenceLoop(len(estimates), rate, "measure")
    records = owner.coherence.observe(estimates, nb, tunes=tunes)
    return records, alarms(records, "measure", float(cfg.air.drift_gain_db), float(cfg.air.drift_phase_rad),
                           unambiguous_hz)


__all__ = ["FALSE_EVENT", "MODES", "ClientLoop", "CoherenceLoop", "alarms", "event_gate", "measure_clients", "measured"]
