"""A coherent uhd round (issue 34, items 2 and 3): sounding, feedback, payload, in one timed capture of the
in-process ``uhd`` air (``air.coherence = "track"``; single carrier; ``"measure"`` sounds after the payload in
the round's one burst instead, radio/appended_sounding.py).

With independent oscillators a client's phase at the receiver moves by radians between rounds seconds apart
(docs/lab.md), so no calibration, and no prediction from the previous round, can line the clients' payloads
up. Each round therefore measures every client's phase and offset milliseconds before its payload:

1. t0 = device time + ``uhd.start_delay``; the receiver is armed for the whole round (lead, the sounding,
   ``uhd.feedback_gap_s``, the payload frame, lead). Each client sends its sounding part at t0 (its reference
   blocks in slots of its own, phy/client_sounding.py; reference symbols only, sent whatever its data), with
   its calibration's pre-compensation and the loop's current correction (calibration/coherence_loop.py);
2. once the capture holds the sounding, the receiver measures each client's residual phase, offset and gain
   with their standard errors (``link_health['clients']``), and the loop decides each client's correction:
   that is the feedback (one process drives every radio here, so feeding back is computing it);
3. each client's payload frame (the round's burst, uhd_round_signal.client_bursts) leaves at
   t0 + (sounding + gap) / rate rotated by its correction, phase-continuous with its sounding, the jammer's
   burst with it;
4. the payload part of the capture is demodulated as any round's (uhd_round_signal.finish_round).
A sounding that cannot correct the payload (``unusable``: a client's blocks did not arrive as sent) sends no
payload: the attempt is lost ("sounding failed") and retried (``air.retries``) under its booking.

Privacy: the sounding carries no data and the correction is a unit-modulus rotation decided from reference
symbols (calibration/coherence_loop.py's doc): what is booked is the plan's, unchanged. On UHD's simulator the
radios keep no device time; every part is padded in at its offset in the capture (UhdAir._capture), the
jammer sends zeros during the sounding so the lab's hub does not wait for it, and each client's sounding part
ends with the gap's zeros so the hub can hand the sounding over before the payload exists."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.jammer_slots import JAMMER_SAMPLES, QUIET_SAMPLES, attach, clean, measure, slot_noise
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE, LEAD_SAMPLES
from otafl_sdr.radio.uhd_round_signal import (client_bursts, client_reference, clip_to_dac, dac_faults, finish_round,
                                              jammer_burst, undelivered_noise)


SOUNDING_PEAK = 0.5       # the sounding's peak sample, as a fraction of the DAC's full scale (-6 dBFS)


def sounding_boost(layout, ref_gain: np.ndarray) -> float:
    """One factor for every client's sounding, so that the largest part peaks at SOUNDING_PEAK of the DAC's full
    scale: the clients' blocks still arrive at one amplitude (c x boost; ref_gain_i = c / h_i), far above the
    noise (the frame's own reference is budgeted like the payload, at its SNR: ~10 dB where the coherent sum's
    theory NMSE is 0.04, which would leave a 61-symbol block's phase 0.03 rad off). Reference symbols only, no
    data: the level is a planned constant, like a calibration pilot's."""
    peaks = [float(np.max(np.abs(layout.burst(i, g)))) for i, g in enumerate(ref_gain) if g]
    return SOUNDING_PEAK * DAC_FULL_SCALE / max(peaks) if peaks and max(peaks) > 0 else 0.0


GROSS_GAIN_DB = 6.0       # a client's sounding this far off its calibrated level did not arrive as sent


def unusable(estimates: list, unambiguous_hz: float) -> str:
    """Why this round's sounding cannot correct the payload ('' when it can): a client's blocks arrived
    GROSS_GAIN_DB off their level, with an offset beyond what the sounding resolves, or too weak to give its
    phase (calibration/coherence_loop.WEAK_RAD). Seen on UHD's simulator when a capture lost its sounding (the
    hub's zero fill on a loaded host): corrections of 50 kHz, the payload at 54x its theory NMSE."""
    from otafl_sdr.calibration.coherence_loop import WEAK_RAD
    for i, e in enumerate(estimates):
        if e is not None and (abs(e["gain_db"]) > GROSS_GAIN_DB or abs(e["cfo_hz"]) > unambiguous_hz
                              or e["phase_std"] > WEAK_RAD):
            return (f"client {i}'s sounding unusable (gain {e['gain_db']:+.1f} dB, offset {e['cfo_hz']:+.1f} Hz, "
                    f"phase +- {e['phase_std']:.2f} rad)")
    return ""


def link_phase_noise(air, K: int):
    """(K,) each client link's Wiener phase variance per sample from the run's calibration (calibration/csi.py,
    its pilots' phase noise: the sounding's offset error carries it), or None without a calibrated CSI; read
    once per calibration (``air.calibration_path``). ``air``: the in-process uhd air or the testbed server's."""
    cfg = air.cfg if hasattr(air, "cfg") else air.exp.cfg
    if cfg.air.csi != "calibrated":
        return None
    key = (air.calibration_path, K)
    cached = getattr(air, "_phase_noise", None)
    if cached is None or cached[0] != key:
        from otafl_sdr.calibration.csi import phase_noise
        cached = (key, phase_noise(cfg, K, air.calibration_path))
        air._phase_noise = cached
    return cached[1]


def _calibrated_rotation(air, i: int, t0: float, rate: float, n: np.ndarray) -> tuple[np.ndarray, float]:
    """(exp(-j 2 pi cfo_i (start + n)): client i's calibrated pre-compensation at round samples ``n``, continuous
    across the round's parts (calibration/csi.precompensate's phase at t0); the send time of sample 0)."""
    from otafl_sdr.calibration.csi import phase_refs, precompensate
    if air.cfg.air.csi != "calibrated":
        return np.ones(len(n), np.complex128), t0
    cfo, delay = air._known[0][i], air._known[1][i]
    t_ref = phase_refs(air.cfg, len(air._known[0]), air.calibration_path)[i] if cfo else None
    first, ts = precompensate(np.ones(1, np.complex128), cfo, delay, rate, t0, t_ref=t_ref)
    return complex(first[0]) * np.exp(-2j * np.pi * cfo * np.asarray(n, dtype=np.float64)), ts


def coherent_round(air, plan: RoundPlan, rng: np.random.Generator) -> Reception:
    """One round of ``air`` (a started UhdAir) with per-client sounding (module doc)."""
    from otafl_sdr.calibration.coherence_loop import CoherenceLoop, alarms, measure_clients
    from otafl_sdr.calibration.link_health import link_health
    from otafl_sdr.phy.client_sounding import SoundingLayout
    from otafl_sdr.radio.recording import round_meta

    t_wall = time.perf_counter()
    air.coherence_alarms = []
    cfg, u = air.cfg, air.cfg.uhd
    rate, sim, K = float(u.rate), bool(u.simulator), plan.clients
    bursts, ref_amp = client_bursts(plan, air.modem)
    ref_gain, _, _ = client_reference(plan, air.modem)
    n_sym = symbols_for(plan.dim)
    n = air.modem.burst_samples(n_sym)
    jam = None
    if plan.alpha_cj > 0:
        if air._jammer is None:
            from otafl_sdr.errors import AirError
            raise AirError("uhd air: the plan needs the jammer (alpha_cj > 0) but no jammer radio is configured")
        # then alone, and a quiet slot after it: the noise it delivered measured every round (radio/jammer_slots.py)
        jam = np.concatenate([jammer_burst(air.modem, n_sym, plan.alpha_cj, rng),
                              slot_noise(air.modem, plan.alpha_cj, rng, JAMMER_SAMPLES)])
    slots = (JAMMER_SAMPLES, QUIET_SAMPLES) if jam is not None else (0, 0)
    clip = dac_faults([jam])
    if clip:
        return finish_round(plan, air.modem, np.zeros(0, np.complex64), ref_amp, clip,
                            wall_s=time.perf_counter() - t_wall)
    layout = SoundingLayout.for_phy(K, cfg.phy)
    gap = max(int(round(float(u.feedback_gap_s) * rate)), 1)
    n2 = layout.n_samples + gap                       # the payload's first sample in the round's timeline
    n_cap = LEAD_SAMPLES + n2 + n + sum(slots) + LEAD_SAMPLES
    t_now = air._device_time()
    t0 = t_now + float(u.start_delay)
    t_rx = t0 - LEAD_SAMPLES / rate
    if cfg.air.csi == "calibrated" and air._known is None:
        from otafl_sdr.calibration.csi import known_offsets
        air._known = known_offsets(cfg, K, whole=False, path=air.calibration_path)
    if air.coherence is None or len(air.coherence.clients) != K:
        air.coherence = CoherenceLoop(K, rate, cfg.air.coherence)
    loop = air.coherence
    if air.coherence_t0 is not None:                  # the last round's stage 2 continues into this stage 1,
        loop.end_round(max(t0 - air.coherence_t0, 0.0))   # over the device time between them (0 on the simulator)
    air.coherence_t0 = t0
    # stage 1: each sending client's sounding part; on the simulator every other radio sends zeros (the hub
    # waits for a stream that has not sent this round) and each part ends with the gap's zeros
    boost = sounding_boost(layout, ref_gain)
    k1 = np.arange(layout.n_samples + (gap if sim else 0))
    jam_shift = air._jammer_delay(K) / rate if air._jammer is not None else 0.0
    first = []
    for i, r in enumerate(air._clients):
        if bursts[i] is None:
            if sim:
                first.append((r, np.zeros(len(k1), np.complex128), t0))
            continue
        part = np.concatenate([layout.burst(i, boost * ref_gain[i]), np.zeros(len(k1) - layout.n_samples)])
        rot, ts = _calibrated_rotation(air, i, t0, rate, k1)
        first.append((r, clip_to_dac(part * rot * np.exp(-1j * loop.stage1(i, k1))), ts))
    if air._jammer is not None and sim:
        first.append((air._jammer, np.zeros(len(k1), np.complex128), t0 - jam_shift))
    amplitudes = [complex(h * g * boost) if g and bursts[i] is not None else 0j
                  for i, (h, g) in enumerate(zip(_known_channel(plan), ref_gain))]
    state = {}
    pn = link_phase_noise(air, K)

    def feedback(prefix: np.ndarray) -> list:
        """The payload sends, from the sounding's samples (step 2 of the module doc)."""
        t_fb = time.perf_counter()
        start = layout.find(prefix, LEAD_SAMPLES)
        est = measure_clients(layout, layout.symbols(prefix, start), amplitudes, rate / layout.sps, pn)
        k2 = n2 + np.arange(n)
        tail = np.zeros(sum(slots) + LEAD_SAMPLES + 8 if sim else 0, np.complex128)   # the simulator: cover the capture
        state["failed"] = unusable(est, layout.unambiguous_hz(rate))
        if state["failed"]:          # no payload with a correction it cannot trust: the attempt is lost, retried
            state["feedback_ms"] = 1e3 * (time.perf_counter() - t_fb)
            return [(r, np.zeros(n + len(tail), np.complex128), t0 + n2 / rate) for r in air._tx_radios()] if sim else []
        state["records"] = loop.observe(est, [layout.b_centre_sample(i) for i in range(K)],
                                        tunes=[r.tunes for r in air._clients])
        sends = []
        for i, r in enumerate(air._clients):
            if bursts[i] is None:
                if sim:
                    sends.append((r, np.zeros(n + len(tail), np.complex128), t0 + n2 / rate))
                continue
            rot, ts = _calibrated_rotation(air, i, t0, rate, k2)
            x = clip_to_dac(bursts[i] * rot * np.exp(-1j * loop.stage2(i, k2)))
            sends.append((r, np.concatenate([x, tail]), ts + n2 / rate))
        if jam is not None or (air._jammer is not None and sim):
            x = jam if jam is not None else np.zeros(n, np.complex128)
            sends.append((air._jammer, np.concatenate([x, tail[slots[0]:]]), t0 + n2 / rate - jam_shift))
        state["feedback_ms"] = 1e3 * (time.perf_counter() - t_fb)
        return sends

    n_first = LEAD_SAMPLES + layout.n_samples + 2 * 8
    air.tx_faults = {}
    samples, faults = air._capture(n_cap, t_rx, first, feedback=(n_first, feedback))
    if state.get("failed"):
        faults = dict(faults, **{"sounding failed": 1})
    elif "records" not in state:
        faults = dict(faults, rx_timeout=max(int(faults.get("rx_timeout", 0)), 1))
    undelivered = undelivered_noise(air.tx_faults)
    payload = np.asarray(samples)[n2:n2 + n + 2 * LEAD_SAMPLES] if len(samples) > n2 else np.zeros(0, np.complex64)
    meta = None
    if cfg.air.record_iq:
        meta = round_meta(cfg, plan, sample_rate=rate, ref_amplitude=ref_amp, n_symbols=n_sym, modem=air.modem,
                          center_freq=u.freq, air=air.name, hw=air.hw, t0=t0 + n2 / rate,
                          annotation_start=LEAD_SAMPLES, extra={"devices": air.settings, "simulator": sim,
                                                                "rx_start": t_rx + n2 / rate})
    rec = finish_round(plan, air.modem, payload, ref_amp, faults, wall_s=time.perf_counter() - t_wall,
                       record_meta=meta)
    rec.undelivered = undelivered
    if state.get("failed") and not rec.ok:
        rec.reason = f"{rec.reason} ({state['failed']})"          # which client's sounding, and how far off
    if jam is not None and "records" in state and clean(faults):    # the payload and the slot went out, captured clean
        end = LEAD_SAMPLES + n2 + n
        attach(rec, measure(samples, end, air.modem, plan.alpha_u, air._jammer_delay(K), quiet_at=end + slots[0]))
    air.health = link_health(rec.extra, LEAD_SAMPLES)
    records = state.get("records")
    if records is not None:
        if air.health is None:
            air.health = {}
        air.health["clients"] = records
        air.health["feedback_ms"] = round(state["feedback_ms"], 2)    # the host's turnaround (<< the gap on radios)
        air.coherence_alarms = alarms(records, cfg.air.coherence, float(cfg.air.drift_gain_db),
                                      float(cfg.air.drift_phase_rad), layout.unambiguous_hz(rate))
    return rec


def _known_channel(plan: RoundPlan) -> np.ndarray:
    from otafl_sdr.radio.uhd_round_signal import known_channel
    return known_channel(plan)


__all__ = ["coherent_round"]
