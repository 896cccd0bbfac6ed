"""The calibration procedures, over any *link*: an object that carries a set of transmit streams to the
receiver and returns the capture. The GNU Radio loopback channel and the USRPs are both links
(:mod:`otafl_sdr.radio.calibration_flowgraphs`), so the same code measures both.

Link interface (duck-typed): ``clients`` K, ``has_jammer``, ``transmitters`` T = K (+1, the jammer
last); ``delay_search`` (lo, hi) samples; ``exchange(streams (T, L) complex) -> (L,) capture`` (one
coherent capture; sample n of every stream leaves its radio at the same instant); ``set_tx_gain(dB)``;
``truth(t, ref_sample)`` -> the ground truth {h, cfo, delay} of transmitter t for the last exchange,
or None on real radios.

Orthogonal time slots: transmitter t sends its pilot burst alone in slot t (one radio at a time), so
each estimate sees only its own link plus noise."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.calibration.estimation import LinkEstimate, estimate_link
from otafl_sdr.calibration.noise_floor import NoiseFloor, estimate_noise
from otafl_sdr.calibration.pilots import PilotBurst
from otafl_sdr.calibration.phase_wander import pooled
from otafl_sdr.calibration.power_fit import PowerFit, fit_power
from otafl_sdr.calibration.repeats_offset import combined_offset

log = logging.getLogger(__name__)

LEAD = 256                 # silent samples before the first slot
SLOT_GAP = 256             # silent samples after each burst (room for the delays searched)
QUANTUM = 256              # streams are a whole number of these (see LoopbackAir.STREAM_QUANTUM)
EXCHANGE_TRIES = 3         # a link's exchange lost to a fault (a late command, an overflow) is sent this often in all
NOISE_SAMPLES = 1 << 16    # silent capture for the noise floor


def transmitter_name(link, t: int) -> str:
    return "jammer" if (link.has_jammer and t == link.clients) else f"client {t}"


@dataclass
class Slots:
    """Burst start samples of ``n`` consecutive slots and the total stream length."""

    starts: np.ndarray
    length: int

    @classmethod
    def make(cls, n: int, burst_len: int, gap: int = SLOT_GAP, lead: int = LEAD, tail: int = 0) -> "Slots":
        step = burst_len + gap
        starts = lead + step * np.arange(n, dtype=np.int64)
        need = lead + step * n + tail
        return cls(starts, int(-(-need // QUANTUM) * QUANTUM))



def exchange_with_retries(once, log=None) -> np.ndarray:
    """A link's exchange, sent again when a fault loses it: ``once()`` -> (capture, '') or (None, why it
    was lost); AirError after ``EXCHANGE_TRIES`` losses (calibration signals carry no client data)."""
    from otafl_sdr.errors import AirError
    lost: list[str] = []
    while True:
        samples, why = once()
        if not why:
            return samples
        lost.append(why)
        if log is not None:
            log.warning("calibration exchange lost (%s); sending it again", why)
        if len(lost) >= EXCHANGE_TRIES:
            raise AirError(f"calibration exchange lost {len(lost)} times ({'; '.join(lost)}); repeat it (see "
                           f"firmware_notes/calibration.md)")

@dataclass
class LinkResult:
    """One transmitter over all repeats: ``estimates`` (R LinkEstimates), ``truths`` (R dicts or None),
    and the combined figures (mean h, its standard error sqrt(mean h_std^2 / R), the repeats' spread)."""

    name: str
    estimates: list
    truths: list
    h: complex
    h_std: float
    h_spread: float
    cfo: float
    cfo_std: float
    delay: float
    snr_db: float
    truth: dict | None = None
    t_ref: float | None = None       # device time h's phase refers to (calibration/phase_ref.py), else None
    phase_noise: float = 0.0         # the link's Wiener phase variance, rad^2 per sample (phase_wander.pooled)

    @property
    def rel_error(self) -> float:
        t = self.truth
        return abs(self.h - t["h"]) / abs(t["h"]) if t else float("nan")


PHASE_COHERENT = 0.9      # |mean h| / mean |h| below this: the repeats' phases do not hold between exchanges


def _combine(name: str, ests: list[LinkEstimate], truths: list, times=None, rate: float | None = None) -> LinkResult:
    """The repeats as one link; with their device times (``times``, a uhd link) and a significant offset, the
    gain referred to one device instant and the offset fitted over their span (calibration/phase_ref.py); the
    offset's standard error the repeats' own scatter where it exceeds their stated one (repeats_offset.py)."""
    from otafl_sdr.calibration.phase_ref import refer_repeats
    R = len(ests)
    h = np.array([e.h for e in ests])
    hm = complex(np.mean(h))
    cfo, cfo_std = combined_offset([e.cfo for e in ests], [e.cfo_std for e in ests])
    ref = refer_repeats(h, [e.h_std for e in ests], cfo, cfo_std, times, rate)
    t_ref = None
    if ref is not None:
        hm, cfo, cfo_std, t_ref = ref
    mags = np.abs(h)
    if R > 1 and abs(hm) < PHASE_COHERENT * float(np.mean(mags)):
        # the repeats' phases disagree beyond noise (independent oscillators, repeats seconds apart: issue 34):
        # averaging them would shrink |h| (by 12 dB in the b210 lab); |h| from the magnitudes, the phase the
        # latest repeat's (a round's per-client sounding measures it again, air.coherence)
        hm = complex(float(np.mean(mags)) * h[-1] / abs(h[-1]))
    truth = None
    if truths and truths[0] is not None:
        # repeats are referred to different instants: the combined truth is the mean of the repeats'
        truth = {"h": complex(np.mean([t["h"] for t in truths])), "cfo": float(truths[0]["cfo"]),
                 "delay": float(truths[0]["delay"])}
    return LinkResult(
        name=name, estimates=ests, truths=list(truths), truth=truth, h=hm,
        h_std=math.sqrt(float(np.mean([e.h_std ** 2 for e in ests])) / R),
        h_spread=float(np.std(h, ddof=1)) if R > 1 else 0.0,
        cfo=cfo, cfo_std=cfo_std, delay=float(np.mean([e.delay for e in ests])),
        snr_db=float(10 * np.log10(np.mean([10 ** (e.snr_db / 10) for e in ests]))), t_ref=t_ref,
        phase_noise=float(np.mean([e.wander_q / e.block_samples if e.block_samples else 0.0 for e in ests])))


def _lost(link, t: int, e: LinkEstimate) -> UserError:
    return UserError(f"calibration: {transmitter_name(link, t)}: {e.reason} in its slot (preamble correlation "
                     f"{e.rho:.3f}); check that radio's cabling, gain and pilot amplitude")


LOST_BURST_RETRIES = 2    # exchanges again when a slot's burst is missing, before the link is called broken


def _exchange_holding_every_burst(link, streams, burst: PilotBurst, slots, amplitude: float, search):
    """One exchange of ``streams`` and every transmitter's estimate in its slot. A capture missing a slot's
    burst (a burst lost late or to an underflow on a loaded host: a real radio drops one now and then) is
    exchanged again, up to LOST_BURST_RETRIES times, each retry logged; still missing: the link is broken
    (one line naming the transmitter). Pilots only: no client data is on the air in a calibration.
    Returns (capture, its device start time or None, [LinkEstimate] per transmitter)."""
    for attempt in range(LOST_BURST_RETRIES + 1):
        y = link.exchange(streams)
        t0 = getattr(link, "exchange_time", None)
        found = [estimate_link(y, burst, int(slots.starts[t]) + burst.frame_offset, amplitude, search)
                 for t in range(link.transmitters)]
        missing = next((t for t, e in enumerate(found) if not e.found), None)
        if missing is None:
            return y, t0, found
        if attempt == LOST_BURST_RETRIES:
            raise _lost(link, missing, found[missing])
        log.warning("calibration: %s: %s in its slot (preamble correlation %.3f); exchanging again (%d of %d)",
                    transmitter_name(link, missing), found[missing].reason, found[missing].rho, attempt + 1,
                    LOST_BURST_RETRIES)


def check_amplitude(burst: PilotBurst, amplitude: float, full_scale: float | None) -> None:
    if not (amplitude > 0 and math.isfinite(amplitude)):
        raise UserError(f"calibration: the pilot amplitude must be > 0, got {amplitude}")
    if full_scale is not None:
        peak = float(np.max(np.abs(burst.samples))) * amplitude
        if peak > full_scale:
            raise UserError(f"calibration: pilot amplitude {amplitude:g} peaks at {peak:.3g}, beyond the DAC full "
                            f"scale {full_scale:g}; lower --pilot-amplitude to <= {full_scale / peak * amplitude:.3g}")


def measure_channels(link, burst: PilotBurst, amplitude: float, repeats: int = 1,
                     rate: float | None = None) -> list[LinkResult]:
    """Every transmitter's link (clients in order, then the jammer), ``repeats`` exchanges of one
    burst per slot each. A link that says when its last exchange's capture started in device time
    (``link.exchange_time``, uhd) has each repeat's gain timed (``rate``: samples/s) and referred to one
    device instant (calibration/phase_ref.py)."""
    if repeats < 1:
        raise UserError(f"calibration: repeats must be >= 1, got {repeats}")
    T = link.transmitters
    lo, hi = link.delay_search
    slots = Slots.make(T, burst.n_samples, gap=max(SLOT_GAP, hi + 64), tail=hi + 64)
    streams = np.zeros((T, slots.length), dtype=np.complex64)
    x = (amplitude * burst.samples).astype(np.complex64)
    for t in range(T):
        streams[t, slots.starts[t]:slots.starts[t] + burst.n_samples] = x
    ests = [[] for _ in range(T)]
    truths = [[] for _ in range(T)]
    times = [[] for _ in range(T)]
    for _ in range(repeats):
        y, t0, found = _exchange_holding_every_burst(link, streams, burst, slots, amplitude, (lo, hi))
        for t, e in enumerate(found):
            ests[t].append(e)
            truths[t].append(link.truth(t, e.ref_sample))
            times[t].append(None if t0 is None or not rate else float(t0) + e.ref_sample / float(rate))
    ests = pooled(ests)                                   # the lab's phase noise in every offset's error
    return [_combine(transmitter_name(link, t), ests[t], truths[t], times[t], rate) for t in range(T)]


def measure_noise(link, modem, n_samples: int = NOISE_SAMPLES) -> NoiseFloor:
    """Noise floor from a capture with every transmitter silent."""
    n = int(-(-int(n_samples) // QUANTUM) * QUANTUM)
    y = link.exchange(np.zeros((link.transmitters, n), dtype=np.complex64))
    return estimate_noise(y, modem.taps, modem.sps)


@dataclass
class PowerSweep:
    """Per transmitter name: the PowerFit over the (amplitude, TX gain) grid."""

    fits: dict
    amplitudes: np.ndarray
    gains: np.ndarray


def sweep_power(link, burst: PilotBurst, amplitudes, gains, gain_ref: float) -> PowerSweep:
    """For each TX gain (``link.set_tx_gain``) every transmitter sends one burst per digital amplitude in
    its own slots; the received power per point is 20 log10 |a h_hat| (coherent, noise-free estimate).
    Points whose burst is not detected (too weak) are left out; a transmitter needs three or more.
    The link is left at ``gain_ref`` (the run's TX gain)."""
    amps = np.asarray(amplitudes, dtype=np.float64)
    gains = np.asarray(gains, dtype=np.float64)
    if amps.size < 2 or np.any(amps <= 0):
        raise UserError("calibration: the power sweep needs at least two digital amplitudes > 0")
    T, A = link.transmitters, len(amps)
    lo, hi = link.delay_search
    slots = Slots.make(T * A, burst.n_samples, gap=max(SLOT_GAP, hi + 64), tail=hi + 64)
    streams = np.zeros((T, slots.length), dtype=np.complex64)
    for t in range(T):
        for j, a in enumerate(amps):
            s = slots.starts[t * A + j]
            streams[t, s:s + burst.n_samples] = (a * burst.samples).astype(np.complex64)
    rows = {t: ([], [], []) for t in range(T)}
    try:
        for g in gains:
            link.set_tx_gain(float(g))
            y = link.exchange(streams)
            for t in range(T):
                for j, a in enumerate(amps):
                    e = estimate_link(y, burst, int(slots.starts[t * A + j]) + burst.frame_offset, a, (lo, hi))
                    if not e.found:             # below the detection threshold: not a measurable point
                        continue
                    rows[t][0].append(a)
                    rows[t][1].append(g)
                    rows[t][2].append(20 * np.log10(abs(e.h) * a))
    finally:
        link.set_tx_gain(float(gain_ref))
    fits = {}
    for t in range(T):
        name = transmitter_name(link, t)
        if len(set(rows[t][0])) < 2 or len(rows[t][0]) < 3:
            raise UserError(f"calibration: {name}: only {len(rows[t][0])} of {A * len(gains)} sweep points were "
                            f"detected; raise the sweep's amplitudes or gains")
        fits[name] = fit_power(*rows[t], gain_ref=gain_ref)
    return PowerSweep(fits, amps, gains)


def pilot_amplitude_for_snr(snr_db: float, sigma_c2: float) -> float:
    """Digital amplitude a giving a per-symbol pilot SNR a^2 E|h|^2 / (2 sigma_c2) = snr_db for E|h|^2 = 1."""
    return float(math.sqrt(2 * sigma_c2 * 10 ** (snr_db / 10)))


__all__ = ["LinkResult", "NoiseFloor", "PowerFit", "PowerSweep", "Slots", "measure_channels", "measure_noise",
           "pilot_amplitude_for_snr", "sweep_power", "transmitter_name"]
