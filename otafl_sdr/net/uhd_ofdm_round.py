"""OFDM on the uhd testbed's nodes (``phy.waveform = "ofdm"``, air uhd with node processes; issue 26 item 2):
what the server adds to an attempt's timed messages (net/uhd_rounds.py), what the client and jammer nodes
send, and how the server demodulates the receiver node's capture. The in-process air's round
(radio/uhd_ofdm.py) over the nodes: the same frame, factors, reference and receiver.

Server (``attempt_design``): the round's data carriers, the frame's reference delay (the calibration's
earliest-client arrival, power/ofdm_plan.plan_ofdm) and the shared pre-equalised reference c / H~_ik for
the attempt's senders (power/ofdm_plan.ofdm_reference on the session's per-subcarrier calibration,
calibration/ofdm_channel.py: H~_ik = h_i G_ik; a client that died before the attempt neither sends nor is
on the reference). Planned quantities only, sent as arrays of ``transmit_at`` (``ofdm_carriers``,
``ofdm_rx_delay``, ``ofdm_ref`` (K, U)) and ``jam_at`` (carriers, delay).

Client i (``own_alpha_sc`` at ``round_start``, ``client_burst`` at ``transmit_at``): its alpha_ik from its
OWN decision alpha_i, its calibrated shape G_ik and its own power limit (power/ofdm_plan.plan_subcarriers:
the bound s_ik enforced at the client), payload x alpha_ik x the planned scale / PA correction ``tx_amp``
(a NaN / inf payload goes as zeros at the planned power), the server's reference row, the layout's
unitary IFFT and prefix, every sample clipped to the DAC's full scale; sent at t_tx with no carrier /
delay pre-compensation (the relative delays and phases are in H~_ik, as in process). Jammer
(``jammer_burst``): alpha_cj CN(0, 2) on the payload slots from its host's OS entropy, then the ``slot``
symbols alone the server reads per subcarrier (radio/ofdm_jammer_slot.py: the noise it delivered).

Server after the capture (``finish``): phy/ofdm.demodulate from t0 (timing searched at most L - 1 samples
past the calibrated arrival), the aggregate unpack(y) / (alpha_u tx_scale); with ``air.record_iq`` the
capture from t0 with one SigMF annotation per OFDM symbol (radio/recording.ofdm_round_meta). With
``air.coherence = "measure"`` every client's burst continues, after the jammer's slot, with its part of the
per-client sounding (phy/ofdm_client_sounding.py; its level from the shared ``ofdm_ref``, the same at every
client) and the server reads each client's phase, offset and gain from it (``link_health['clients']``)."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.phy.ofdm_burst import check_carriers, ofdm_frame
from otafl_sdr.transmission import Reception


def _shapes(cfg, plan, csi) -> np.ndarray:
    """(K, U) G_ik as power/ofdm_plan.plan_ofdm takes it: the calibrated section, else the seeded shapes."""
    from otafl_sdr.calibration.ofdm_channel import subcarrier_csi
    from otafl_sdr.channel.ofdm_sim import subcarrier_shapes
    K = plan.clients
    h_known = np.asarray(plan.extra.get("csi", plan.h), np.complex128)
    sub = subcarrier_csi(csi, cfg, K)
    return subcarrier_shapes(cfg, plan.round, K) if sub is None else sub.shapes(h_known)


def attempt_design(cfg, plan, senders: list[int], csi) -> dict:
    """{"carriers", "rx_delay", "ref" (K, U), "ref_amp" (U,), "frame"}: the attempt's design (module doc)."""
    from otafl_sdr.phy.packing import symbols_for
    from otafl_sdr.phy.reference_design import allowance
    from otafl_sdr.power.ofdm_plan import ofdm_reference
    od = plan.extra["ofdm"]
    lay = OfdmLayout.from_phy(cfg.phy)
    active = np.zeros(plan.clients, dtype=bool)
    active[list(senders)] = True
    h_known = np.asarray(plan.extra.get("csi", plan.h), np.complex128)
    H = h_known[:, None] * _shapes(cfg, plan, csi)
    trunc = np.asarray(od["truncated"], bool) | ~active[:, None]
    ref, ref_amp = ofdm_reference(lay, H, trunc, allowance(plan, active), symbols_for(plan.dim), int(od["n_ofdm"]))
    delay = max(int(od.get("ref_delay", 0)), 0)
    frame = ofdm_frame(lay, plan.dim, od["carriers"], 1, delay)
    return {"carriers": np.asarray(od["carriers"], np.int64), "rx_delay": delay, "ref": ref, "ref_amp": ref_amp,
            "frame": frame}


def add_arrays(sends: dict, design: dict) -> None:
    """Put the design's arrays into the attempt's ``transmit_at`` / ``jam_at`` messages (in place)."""
    common = {"ofdm_carriers": design["carriers"], "ofdm_rx_delay": np.array([design["rx_delay"]], np.int64)}
    for name, (mtype, fields, arrays) in sends.items():
        arrays.update(common)
        if mtype == "transmit_at":
            arrays["ofdm_ref"] = np.asarray(design["ref"], np.complex128)


def add_sounding(cfg, plan, design: dict, sends: dict) -> None:
    """With ``air.coherence = "measure"``: the attempt's per-client sounding (``design["sounding"]``, an
    OfdmSounding) and every ``transmit_at`` told to continue its burst with its part after the jammer's slot;
    nothing otherwise (in place)."""
    if cfg.air.coherence != "measure":
        return
    from otafl_sdr.phy.ofdm_client_sounding import OfdmSounding
    design["sounding"] = OfdmSounding(design["frame"].lay, plan.clients)
    for mtype, fields, _ in sends.values():
        if mtype == "transmit_at":
            fields.update(sounding=1, slot=int(design.get("slot", 0)) * design["frame"].lay.symbol_len)


def sounding_health(air, design: dict, rec: Reception) -> None:
    """The server's link health (``air.health``, already the frame's) gets the sounding's ``clients`` list, and
    ``air.coherence_alarms`` what it found beyond the limits (net/link_watch.py judges both); in place."""
    air.coherence_alarms = []
    est = rec.extra.pop("sounding", None)
    if est is not None and air.health is not None:
        from otafl_sdr.radio.uhd_ofdm import client_records
        air.health["clients"], air.coherence_alarms = client_records(air, air.exp.cfg, design["sounding"], est,
                                                                     float(air.exp.cfg.uhd.rate))


def alpha_sc_of(cfg, plan, csi, h_known) -> np.ndarray:
    """(K, U) every client's alpha_ik on ``plan`` and the run's calibration (module doc); ``h_known``: the
    flat gains believed (the CSI estimates, as the server's pipeline keeps them in plan.extra["csi"])."""
    from otafl_sdr.phy.reference_design import sending
    from otafl_sdr.power.ofdm_plan import plan_subcarriers
    plan.extra.setdefault("csi", h_known)
    alpha_sc, _, _ = plan_subcarriers(plan.alpha, _shapes(cfg, plan, csi), plan.power_limit, sending(plan),
                                      cfg.phy.ofdm_truncation)
    return np.asarray(alpha_sc, np.complex128)


def own_alpha_sc(cfg, plan, i: int, csi, h_known) -> np.ndarray:
    """(U,) client i's alpha_ik on its own plan (:func:`alpha_sc_of`'s row i)."""
    return alpha_sc_of(cfg, plan, csi, h_known)[int(i)]


def _frame_of(cfg, msg, dim: int):
    lay = OfdmLayout.from_phy(cfg.phy)
    raw, d = msg.arrays.get("ofdm_carriers"), msg.arrays.get("ofdm_rx_delay")
    if raw is None or d is None or np.size(d) != 1:
        raise UserError(f"'{msg.type}' of an OFDM run carries no ofdm_carriers / ofdm_rx_delay")
    try:
        carriers = check_carriers(lay, raw)
    except ValueError as e:
        raise UserError(str(e)) from None
    delay = int(np.asarray(d).ravel()[0])
    if not 0 <= delay < lay.symbol_len:
        raise UserError(f"'{msg.type}': ofdm_rx_delay {delay} is outside 0..{lay.symbol_len - 1}")
    return lay, ofdm_frame(lay, dim, carriers, 1, delay)


def client_burst(node, msg, dec: dict) -> np.ndarray:
    """Client ``node.i``'s time-domain OFDM burst for ``transmit_at`` (module doc), clipped to the DAC."""
    from otafl_sdr.phy.ofdm_burst import client_stream
    from otafl_sdr.radio.uhd_round_signal import clip_to_dac
    lay, frame = _frame_of(node.cfg, msg, len(dec["payload"]))
    ref = msg.arrays.get("ofdm_ref")
    K = int(node.cfg.data.clients)
    if ref is None or tuple(ref.shape) != (K, lay.used) or ref.dtype.kind != "c":
        raise UserError(f"'{msg.type}' needs a complex ofdm_ref of shape ({K}, {lay.used})")
    a = np.asarray(dec["alpha_sc"], np.complex128) * float(msg["tx_amp"])
    ref = np.asarray(ref, np.complex128)
    stream = client_stream(frame, dec["payload"], a, ref[node.i])
    burst = clip_to_dac(lay.to_time(stream * a[None, :]))
    if not msg.get("sounding"):
        return burst
    from otafl_sdr.phy.ofdm_client_sounding import OfdmSounding
    from otafl_sdr.radio.uhd_ofdm import sounding_level, sounding_part
    snd = OfdmSounding(lay, K)
    pad = int(msg.get("slot", 0) or 0)
    if not 0 <= pad <= 4096 * lay.symbol_len:
        raise UserError(f"'{msg.type}': slot {pad} is outside 0..{4096 * lay.symbol_len} samples")
    return np.concatenate([burst, clip_to_dac(sounding_part(snd, ref, node.i, pad, sounding_level(snd, ref)))])


def _slot(msg) -> int:
    slot = int(msg.get("slot", 0) or 0)
    if not 0 <= slot <= 4096:
        raise UserError(f"'{msg.type}': slot {slot} is outside 0..4096 OFDM symbols")
    return slot


def jammer_burst(cfg, msg) -> np.ndarray:
    """The jammer's OFDM burst for ``jam_at``: alpha_cj CN(0, 2) on the payload slots, then ``slot`` symbols
    alone (radio/ofdm_jammer_slot.py), OS entropy."""
    from otafl_sdr.noise_source import entropy_rng
    from otafl_sdr.radio.ofdm_jammer_slot import jammer_burst_with_slot
    lay, frame = _frame_of(cfg, msg, int(msg["dim"]))
    return jammer_burst_with_slot(frame, float(msg["alpha_cj"]), entropy_rng(), _slot(msg))


def capture_len(design: dict) -> int:
    """The receiver's capture: the frame, the jammer's slot (``design["slot"]`` symbols, 0 without a
    jammer), the clients' sounding (``design["sounding"]``, a phy/ofdm_client_sounding.OfdmSounding, or
    absent) and the lead either side."""
    from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
    frame = design["frame"]
    n_snd = design["sounding"].n_samples if design.get("sounding") is not None else 0
    return int(frame.n_samples) + int(design.get("slot", 0)) * frame.lay.symbol_len + n_snd + 2 * LEAD_SAMPLES


def finish(cfg, plan, design: dict, samples, faults: dict, wall_s: float, meta_extra: dict) -> Reception:
    """The server's demodulation of the receiver node's capture (module doc), as radio/uhd_ofdm.ofdm_round."""
    from otafl_sdr.calibration.ofdm_channel import backoff
    from otafl_sdr.channel.ofdm_sim import delay_extent
    from otafl_sdr.phy.ofdm import demodulate
    from otafl_sdr.phy.packing import symbols_for, unpack_reals
    from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
    from otafl_sdr.radio.uhd_events import summarise
    from otafl_sdr.radio.uhd_ofdm import PHASE_NOISE, reception_figures
    from otafl_sdr.radio.uhd_power import tx_scale
    t_wall = time.perf_counter()
    lay, frame = OfdmLayout.from_phy(cfg.phy), design["frame"]
    carriers, n_ofdm, A = frame.carriers, frame.n_ofdm, np.asarray(design["ref_amp"], np.complex128)
    extra = {"waveform": "ofdm", "ofdm_symbols": n_ofdm, "data_carriers": int(len(carriers)), "ref_delay": frame.rx_delay}
    y = np.asarray(samples, np.complex128)[LEAD_SAMPLES:]                  # from t0 on
    b = backoff(lay, delay_extent(cfg))
    faults = {k: int(v) for k, v in faults.items() if v and k != "burst_ack"}
    ok, reason = summarise(faults)
    res = demodulate(y, lay, symbols_for(plan.dim), carriers, n_ofdm, A, search=frame.search, backoff=b,
                     smoothing=cfg.phy.ofdm_smoothing, phase_noise=PHASE_NOISE) if ok and y.size else None
    if cfg.air.record_iq and y.size:
        from otafl_sdr.radio.recording import ofdm_round_meta
        start = res.timing if res is not None and res.ok else frame.lead * lay.symbol_len + frame.rx_delay
        extra["iq"] = y.astype(np.complex64)
        meta = ofdm_round_meta(cfg, plan, lay, n_ofdm, carriers, start, sample_rate=float(cfg.uhd.rate),
                               ref_amplitude=A, air="uhd", hw="otafl-sdr testbed, uhd air (one node per radio, OFDM)",
                               receiver={"search": frame.search, "backoff": b, "phase_noise": PHASE_NOISE})
        extra["iq_meta"] = dict(meta, extra=dict(meta.get("extra") or {}, **meta_extra, faults=faults))
    wall = wall_s + time.perf_counter() - t_wall
    if res is None:
        return Reception(None, ok=False, reason=reason or "empty capture", faults=faults,
                         channel_uses=frame.burst_samples, wall_s=wall, extra=extra)
    extra.update(reception_figures(res))
    if design.get("slot") and res.ok:           # the jammer-only slot after the frame, per subcarrier
        from otafl_sdr.radio.ofdm_jammer_slot import measure
        extra["jammer_slots"] = measure(y, res.timing, frame, plan.alpha_u, b, int(design["slot"]))
    if design.get("sounding") is not None and res.ok:      # each client's sounding (phy/ofdm_client_sounding.py)
        from otafl_sdr.radio.uhd_ofdm import measure_sounding, sounding_level
        snd, ref = design["sounding"], np.asarray(design["ref"], np.complex128)
        extra["sounding"] = measure_sounding(snd, y, res, frame, int(design.get("slot", 0)), b, ref, A,
                                             sounding_level(snd, ref), float(cfg.uhd.rate), design.get("phase_noise"))
    agg = unpack_reals(res.symbols, plan.dim) / (plan.alpha_u * tx_scale(plan)) if res.ok else None
    return Reception(agg, ok=res.ok, reason=res.reason, channel_uses=frame.burst_samples, wall_s=wall, extra=extra)
