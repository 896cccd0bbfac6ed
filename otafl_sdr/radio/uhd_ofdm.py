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
receiver."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.calibration.ofdm_channel import backoff
from otafl_sdr.channel.ofdm_sim import delay_extent
from otafl_sdr.errors import AirError
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.ofdm_burst import client_stream, ofdm_frame
from otafl_sdr.phy.packing import symbols_for, unpack_reals
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.ofdm_jammer_slot import SLOT_SYMBOLS, jammer_burst_with_slot, measure
from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
from otafl_sdr.radio.uhd_round_signal import clip_to_dac, dac_faults, undelivered_noise

PHASE_NOISE = 1e-6          # rad / sqrt(sample) the receiver's phase tracker assumes (a shared reference)


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
    sends = [(r, clip_to_dac(b), t0) for r, b in zip(air._clients, bursts) if b is not None]
    if jam is not None:
        sends.append((air._jammer, jam, t0 - air._jammer_delay(plan.clients) / rate))
    air.tx_faults = {}
    slot = SLOT_SYMBOLS if jam is not None else 0
    samples, faults = air._capture(frame.n_samples + slot * lay.symbol_len + 2 * LEAD_SAMPLES, t_rx, sends)
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
    air.health = ofdm_health(rec, frame, lay)
    return rec


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
