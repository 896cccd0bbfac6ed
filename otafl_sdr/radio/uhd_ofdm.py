"""The uhd air's OFDM round (``phy.waveform = "ofdm"``, issue 26 item 2): per-subcarrier analog aggregation on
USRPs (or UHD's simulator), planned on the session's per-subcarrier calibration (calibration/ofdm_channel.py,
power/ofdm_plan.py with ``air.csi = "calibrated"``).

Each sending client's burst is the round's OFDM frame (phy/ofdm_burst.py, the streams the loopback and zmq
airs build too) with its per-subcarrier factors applied and the layout's unitary IFFT and cyclic prefix
(``OfdmLayout.to_time``) done in numpy: subcarrier k carries alpha_ik f_i x its payload symbols and the
pre-equalised reference c / H~_ik (H~_ik the calibration's estimate referred to the earliest client's
arrival, so the relative delays and phases of the links are inverted with it), f_i the planned DAC scale x
PA correction (radio/uhd_power.py) on the payload only, as in the single-carrier round. A NaN / inf payload
row goes as zeros at the planned power. The jammer sends alpha_cj CN(0, 2) on every payload slot, then goes
on alone for a slot the receiver reads per subcarrier (radio/ofdm_jammer_slot.py): the noise it delivered,
against its per-subcarrier booking (privacy/ofdm_jammer_shortfall.py).

Every burst leaves at t0 through the air's timed exchange (``UhdAir._capture``: faults, acks, the
simulator's padding) and the capture, from t0 on, is demodulated by phy/ofdm.demodulate: timing searched at
most L - 1 samples past the calibrated arrival (the search never correlates the payload), the receiver's
CFO, per-subcarrier LS phase, pilot phase tracking; the aggregate is unpack(y) / (alpha_u f). Per-client
carrier offsets are not pre-compensated (the E320's channels, or radios on one 10 MHz, share the LO; the
receiver takes out the common offset). With ``air.record_iq`` the capture from t0 is recorded, one SigMF
annotation per OFDM symbol (radio/recording.ofdm_round_meta), with what replay needs to repeat the
receiver. With ``air.coherence = "measure"`` every client's burst continues, after the jammer's slot, with
its part of the per-client sounding (phy/ofdm_client_sounding.py, ``sounding_part``) and the receiver reads
each client's phase and offset against the composite and its gain (``link_health['clients']``,
``measure_sounding``, ``client_records``); the testbed's nodes (net/uhd_ofdm_round.py) use the same
functions."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.calibration.ofdm_channel import backoff
from otafl_sdr.channel.ofdm_sim import delay_extent
from otafl_sdr.errors import AirError
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.ofdm_burst import client_stream, ofdm_frame
from otafl_sdr.phy.ofdm_client_sounding import OfdmSounding
from otafl_sdr.phy.packing import symbols_for, unpack_reals
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.jammer_slots import attach
from otafl_sdr.radio.ofdm_jammer_slot import SLOT_SYMBOLS, jammer_burst_with_slot, measure
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE, LEAD_SAMPLES
from otafl_sdr.radio.uhd_round_signal import clip_to_dac, dac_faults, undelivered_noise

PHASE_NOISE = 1e-6          # rad / sqrt(sample) the receiver's phase tracker assumes (a shared reference)
SOUNDING_PEAK = 0.5         # the per-client sounding's largest peak, as a fraction of the DAC's full scale


def ofdm_bursts(plan: RoundPlan, lay: OfdmLayout) -> tuple[list, object]:
    """(per client its time-domain burst or None when silent, the round's OfdmFrame), from the plan only
    (``plan.extra["ofdm"]``, ``plan.extra["tx_amp"]``) and the payload rows (module doc)."""
    od = plan.extra.get("ofdm") if isinstance(plan.extra, dict) else None
    if od is None:
        raise AirError("an OFDM round needs its per-subcarrier plan (power/ofdm_plan.plan_ofdm)")
    frame = ofdm_frame(lay, plan.dim, od["carriers"], 1, max(int(od.get("ref_delay", 0)), 0))
    if frame.n_ofdm != int(od["n_ofdm"]):
        raise AirError(f"uhd OFDM: the plan's {od['n_ofdm']} payload symbols are not the frame's {frame.n_ofdm}")
    alpha = np.asarray(od["alpha"], np.complex128)
    ref = np.asarray(od["ref"], np.complex128)
    amp = (plan.extra.get("tx_amp") or [1.0] * plan.clients)
    sending = np.array([m != "silent" for m in plan.mode]) & (np.asarray(plan.alpha) != 0)
    bursts: list = []
    for i in range(plan.clients):
        if not sending[i]:
            bursts.append(None)
            continue
        a = alpha[i] * float(amp[i])                         # the payload's factor; the reference stays c / H~_ik
        bursts.append(lay.to_time(client_stream(frame, plan.payload[i], a, ref[i]) * a[None, :]))
    return bursts, frame


def ofdm_round(air, plan: RoundPlan, rng: np.random.Generator) -> Reception:
    """One OFDM round on ``air`` (a started radio.uhd_air.UhdAir), module doc."""
    from otafl_sdr.radio.uhd_events import summarise
    from otafl_sdr.radio.uhd_power import tx_scale

    if air._tb is None:
        raise AirError("uhd air: transmit() before start()")
    t_wall = time.perf_counter()
    cfg = air.cfg
    air.coherence_alarms = []
    lay = OfdmLayout.from_phy(cfg.phy)
    od = plan.extra.get("ofdm") or {}
    bursts, frame = ofdm_bursts(plan, lay)
    carriers, n_ofdm, A = frame.carriers, frame.n_ofdm, np.asarray(od["ref_amp"], np.complex128)
    uses, n = frame.burst_samples, symbols_for(plan.dim)
    jam = None
    if plan.alpha_cj > 0:
        if air._jammer is None:
            raise AirError("uhd air: the plan needs the jammer (alpha_cj > 0) but no jammer radio is configured")
        jam = jammer_burst_with_slot(frame, plan.alpha_cj, rng)     # its slot: radio/ofdm_jammer_slot.py
    extra = {"waveform": "ofdm", "ofdm_symbols": n_ofdm, "data_carriers": int(len(carriers)),
             "ref_delay": frame.rx_delay}
    clip = dac_faults([jam])                            # the clients' bursts are clipped to the DAC (below)
    if clip:
        return Reception(None, ok=False, reason=summarise(clip)[1], faults=clip, channel_uses=uses,
                         wall_s=time.perf_counter() - t_wall, extra=extra)
    rate = float(cfg.uhd.rate)
    t0 = air._device_time() + float(cfg.uhd.start_delay)
    t_rx = t0 - LEAD_SAMPLES / rate
    slot = SLOT_SYMBOLS if jam is not None else 0
    snd = OfdmSounding(lay, plan.clients) if cfg.air.coherence == "measure" else None
    parts, level = sounding_parts(snd, plan, slot)
    sends = [(r, np.concatenate([clip_to_dac(b), p]), t0) for r, b, p in zip(air._clients, bursts, parts)
             if b is not None]
    if jam is not None:
        sends.append((air._jammer, jam, t0 - air._jammer_delay(plan.clients) / rate))
    air.tx_faults = {}
    n_snd = snd.n_samples if snd is not None else 0
    samples, faults = air._capture(frame.n_samples + slot * lay.symbol_len + n_snd + 2 * LEAD_SAMPLES, t_rx, sends)
    undelivered = undelivered_noise(air.tx_faults)
    y = np.asarray(samples, np.complex128)[LEAD_SAMPLES:]                  # from t0 on
    b = backoff(lay, delay_extent(cfg))
    faults = {k: int(v) for k, v in faults.items() if v and k != "burst_ack"}
    ok, reason = summarise(faults)
    res = demodulate(y, lay, n, carriers, n_ofdm, A, search=frame.search, backoff=b,
                     smoothing=cfg.phy.ofdm_smoothing, phase_noise=PHASE_NOISE) if ok else None
    if cfg.air.record_iq and y.size:
        from otafl_sdr.radio.recording import ofdm_round_meta
        start = res.timing if res is not None and res.ok else frame.lead * lay.symbol_len + frame.rx_delay
        extra["iq"] = y.astype(np.complex64)
        extra["iq_meta"] = ofdm_round_meta(cfg, plan, lay, n_ofdm, carriers, start, sample_rate=rate,
                                           ref_amplitude=A, air=air.name, hw=air.hw,
                                           receiver={"search": frame.search, "backoff": b,
                                                     "phase_noise": PHASE_NOISE})
    if not ok:
        rec = Reception(None, ok=False, reason=reason, faults=faults, channel_uses=uses,
                        wall_s=time.perf_counter() - t_wall, extra=extra)
    else:
        extra.update(reception_figures(res))
        if jam is not None and res.ok:           # the jammer-only slot after the frame, per subcarrier
            extra["jammer_slots"] = measure(y, res.timing, frame, plan.alpha_u, b, slot)
        agg = unpack_reals(res.symbols, plan.dim) / (plan.alpha_u * tx_scale(plan)) if res.ok else None
        rec = Reception(agg, ok=res.ok, reason=res.reason, channel_uses=uses, wall_s=time.perf_counter() - t_wall,
                        extra=extra)
    rec.undelivered = undelivered
    if rec.extra.get("jammer_slots"):          # a slot with a gap: the jammer charged away, the round retried
        attach(rec, rec.extra["jammer_slots"])
    air.health = ofdm_health(rec, frame, lay)
    if snd is not None and ok and res.ok and air.health is not None:
        from otafl_sdr.radio.uhd_coherent_round import link_phase_noise
        est = measure_sounding(snd, y, res, frame, slot, b, od["ref"], od["ref_amp"], level, rate,
                               link_phase_noise(air, len(od["ref"])))
        if est is not None:
            air.health["clients"], air.coherence_alarms = client_records(air, cfg, snd, est, rate)
    return rec


def sounding_level(snd: OfdmSounding, ref: np.ndarray) -> float:
    """The sounding's level b (phy/ofdm_client_sounding.py), one for all clients (their blocks arrive at c b
    each): the largest client part peaks at SOUNDING_PEAK of the DAC's full scale. From the attempt's
    pre-equalisation ``ref`` (K, U), c / H~_ik, alone: planned quantities, never the data; every client
    computes the same b from the same ``ref``."""
    lay = snd.lay
    peak = max((float(np.max(np.abs(lay.to_time(snd.grid(i, r))))) for i, r in enumerate(np.asarray(ref))),
               default=0.0)
    return SOUNDING_PEAK * DAC_FULL_SCALE / peak if peak > 0 else 0.0


def sounding_part(snd: OfdmSounding, ref: np.ndarray, i: int, pad: int, level: float) -> np.ndarray:
    """The samples client i's burst continues with after its frame stream: ``pad`` samples of silence (the
    jammer's slot; the frame streams end with their tail), then its part of the sounding at ``level``."""
    return np.concatenate([np.zeros(int(pad), np.complex128), level * snd.lay.to_time(snd.grid(i, np.asarray(ref)[i]))])


def sounding_parts(snd: OfdmSounding | None, plan: RoundPlan, slot: int) -> tuple[list, float]:
    """(per client what its burst continues with, sounding_part; the level b); empty parts without a
    sounding."""
    if snd is None:
        return [np.zeros(0, np.complex128)] * plan.clients, 0.0
    ref = np.asarray(plan.extra["ofdm"]["ref"], np.complex128)
    level = sounding_level(snd, ref)
    return [sounding_part(snd, ref, i, int(slot) * snd.lay.symbol_len, level) for i in range(plan.clients)], level


def measure_sounding(snd: OfdmSounding, y: np.ndarray, res, frame, slot: int, backoff: int, ref: np.ndarray,
                     ref_amp: np.ndarray, level: float, rate: float, phase_noise=None) -> list | None:
    """Each client's estimate from the sounding in ``y`` (the capture from t0), read on the demodulated
    frame's timing, window backoff and carrier offset (``res``: phy/ofdm.OfdmResult); None when the capture
    does not hold it. The planned arrival c b: c from the superposed reference ``ref_amp`` A_k = c x senders
    (``ref`` (K, U) the attempt's pre-equalisation: who sends where); ``phase_noise`` (K,) each link's Wiener
    phase variance per sample from its calibration, or None."""
    lay = frame.lay
    senders = np.asarray(ref) != 0
    count = senders.sum(axis=0)
    A = np.abs(np.asarray(ref_amp, np.complex128))
    if not np.any(count):
        return None
    c = float(np.max(A[count > 0] / count[count > 0]))
    start = int(res.timing) + (frame.symbols + int(slot) - frame.lead) * lay.symbol_len
    if start + snd.n_samples > len(y):
        return None
    seg = np.asarray(y[start:start + snd.n_samples], np.complex128)
    cfo = float(res.extra.get("cfo", 0.0))                          # the receiver's, from the frame's training
    seg = seg * np.exp(-2j * np.pi * cfo * (start - int(res.timing) + np.arange(len(seg))))
    return snd.measure(lay.read(seg, 0, snd.n_symbols, backoff), senders, c * level, rate, phase_noise)


def client_records(air, cfg, snd: OfdmSounding, est: list, rate: float) -> tuple[list, list]:
    """(link_health's ``clients`` records, this round's alarms) from the sounding's estimates: the per-client
    loop (``air.coherence``, kept by the in-process air and the testbed's server alike) in ``measure`` mode
    names a client's phase jump or carrier step against its own calm history (calibration/coherence_loop.py);
    nothing is corrected (the OFDM receiver equalises the composite)."""
    from otafl_sdr.calibration.coherence_loop import measured
    return measured(air, est, [0.0] * len(est), cfg, rate, snd.unambiguous_hz(rate))


def reception_figures(res) -> dict:
    """What an OFDM round's Reception keeps of the receiver's result (phy/ofdm.OfdmResult): timing, rho, the
    receiver's CFO and noise, and the reference statistics link health reads (phy/ofdm.reference_statistics)."""
    return {"timing": res.timing, "rho": res.rho, "noise_var": res.noise_var, **res.extra,
            "cfo": float(res.extra.get("cfo", 0.0))}


def ofdm_health(rec: Reception, frame, lay: OfdmLayout) -> dict | None:
    """The OFDM round's link health (calibration/link_health.py) from its Reception, None when the frame was
    not demodulated: the frame is scheduled ``lead`` OFDM symbols plus the reference delay into the capture
    from t0 (the timing a calm link reads)."""
    from otafl_sdr.calibration.link_health import link_health
    if not rec.ok:
        return None
    return link_health(rec.extra, frame.lead * lay.symbol_len + frame.rx_delay)


def ofdm_row(plan: RoundPlan) -> dict:
    """The round's per-subcarrier figures for rounds.jsonl ({} for a single-carrier round): per client the
    range of its factors |alpha_ik| and of its effective gains |g_ik| over the subcarriers it sends on, the
    truncated (client, subcarrier) pairs, the data carriers and the calibrated CSI's largest gain margin."""
    od = plan.extra.get("ofdm") if isinstance(plan.extra, dict) else None
    if od is None:
        return {}
    a, g = np.abs(np.asarray(od["alpha"])), np.abs(np.asarray(od["eff_gain"]))

    def rng(v, on):
        return [[float(np.min(r[m])), float(np.max(r[m]))] if m.any() else None for r, m in zip(v, on)]
    return {"ofdm_alpha": rng(a, a > 0), "ofdm_eff_gain": rng(g, a > 0),
            "ofdm_truncated": int(np.count_nonzero(np.asarray(od["truncated"]))),
            "ofdm_data_carriers": int(len(od["carriers"])), "ofdm_csi_margin": float(od.get("csi_margin", 1.0))}
