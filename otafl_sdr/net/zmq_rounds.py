"""The server's side of a testbed ``zmq`` attempt: the clients and the jammer push their bursts to the
channel emulator node (``channel_round``: the loopback channel block applied to the streams it pulls), the
receiver node demodulates what the emulator pushes on and returns the aggregate unpack(y) / alpha_u. A
sender that dies mid-round is dropped from the emulator's sum; a receiver, channel or jammer that dies
makes the attempt one to redo once it is back (the caller counts those)."""
from __future__ import annotations

import logging
import time

import numpy as np

from otafl_sdr.transmission import Reception
from otafl_sdr.phy.reference_design import allowance, reference_design
from otafl_sdr.net.iq_guard import ATTACKED, link_problems
from otafl_sdr.net.zmq_ofdm import attempt_design, ofdm_arrays, ofdm_recording

log = logging.getLogger("otafl.net")
REPORT_GRACE_S = 2.0         # how long the server waits for the senders' IQ reports once the aggregate is in
RECEIVED = "received the aggregate of release"     # server.log: one line per release id received


def zmq_attempt(exp, round_index: int, attempt: int, plan, senders: list[int], infra: list[str],
            notes: list) -> tuple[Reception, bool]:
    """One attempt of round ``round_index`` through the zmq channel emulator (``exp``: the server's TestbedTransport)."""
    cfg, hub = exp.cfg, exp.hub
    t0 = time.perf_counter()
    deadline = time.time() + cfg.net.timeout_s
    names = [f"client-{i}" for i in senders]
    active = np.zeros(exp.K, dtype=bool)
    active[senders] = True
    h_known = np.asarray(plan.extra.get("csi", plan.h) if isinstance(plan.extra, dict) else plan.h,
                         dtype=np.complex128)
    ofdm = attempt_design(cfg, plan, senders) if isinstance(plan.extra, dict) and "ofdm" in plan.extra else None
    arrays = ofdm_arrays(ofdm)                              # net/zmq_ofdm.py ({} on a single carrier)
    if ofdm is None:
        ref_gain, ref_amp = reference_design(exp.modem, h_known, allowance(plan, active), exp.dim)
        ref_gains = {f"client-{i}": [float(ref_gain[i].real), float(ref_gain[i].imag)] for i in senders}
    else:                                                   # per subcarrier: the arrays carry the design
        ref_amp, ref_gains = complex(np.mean(ofdm["ref_amp"])), {}
    t_tx = time.time()
    sources = {n: hub.peers[n].iq_endpoint for n in names}
    jam_ep = hub.peers["jammer"].iq_endpoint if plan.alpha_cj > 0 else None
    rid = str(plan.extra.get("release", "")) if isinstance(plan.extra, dict) else ""   # the ledger's booking
    hub.send("channel", "channel_round", {"round": round_index, "attempt": attempt, "release": rid, "sources": sources,
                                          "jammer": jam_ep, "dim": exp.dim, "deadline": deadline,
                                          "sigma_c2": float(plan.extra.get("air_sigma_c2", plan.sigma_c2))},
             arrays.get("channel", {}))
    rx_ep = hub.peers["channel"].iq_endpoint
    hub.send("receiver", "receive", {"round": round_index, "attempt": attempt, "release": rid, "endpoint": rx_ep,
                                     "alpha_u": float(plan.alpha_u), "dim": exp.dim,
                                     "ref_re": float(np.real(ref_amp)), "ref_im": float(np.imag(ref_amp)),
                                     "deadline": deadline, "t_rx": t_tx}, arrays.get("receiver", {}))
    if plan.alpha_cj > 0:
        hub.send("jammer", "jam", {"round": round_index, "attempt": attempt, "release": rid, "alpha_cj": float(plan.alpha_cj),
                                   "t_tx": t_tx, "dim": exp.dim}, arrays.get("channel", {}))
    hub.broadcast(names, "transmit", {"round": round_index, "attempt": attempt, "release": rid, "t_tx": t_tx,
                                      "ref_gains": ref_gains}, arrays.get("clients", {}))
    log.info("iteration %d attempt %d: on the air as release %s (%d senders, jammer %s)", round_index, attempt, rid,
             len(names), "on" if plan.alpha_cj > 0 else "off")
    regs = {n: hub.peers[n].registrations for n in infra}     # a restart shows as a new registration
    tx_done: set[str] = set()
    expected = set(names) | ({"jammer"} if plan.alpha_cj > 0 else set())
    reports: dict[tuple[str, str], dict] = {}                # both ends of every IQ link (net/iq_guard.py)
    settle = 0.0
    jam_ok = False
    dropped: set[str] = set()
    channel = None
    agg_msg = None
    while time.time() < deadline + (REPORT_GRACE_S if agg_msg is not None else 0.0):   # the channel's reports
        for name, msg in exp.pump(0.05):                                              # may come just after
            if msg.get("round") != round_index or msg.get("attempt", attempt) != attempt:
                continue
            log.info("iteration %d attempt %d: %s from %s", round_index, attempt, msg.type, name)
            if msg.type == "tx_done":
                tx_done.add(name)
                jam_ok = jam_ok or (name == "jammer" and bool(msg["ok"]))
                if not msg["ok"]:
                    log.warning("iteration %d: %s did not transmit: %s", round_index, name, msg["reason"])
            elif msg.type == "channel_done":
                channel = msg
            elif msg.type == "iq_report":
                reports[(msg["link"], msg["side"])] = msg.fields
            elif msg.type == "aggregate" and msg["release"] == rid:
                agg_msg = msg
                log.info("iteration %d attempt %d: %s %s (ok %s)", round_index, attempt, RECEIVED, rid, msg["ok"])
        if agg_msg is not None and channel is not None:       # and the senders' own reports (or a grace)
            settle = settle or time.time() + REPORT_GRACE_S
            if expected - dropped <= tx_done or time.time() >= settle:
                break
        for n in names:                                       # a sender died mid-round
            if n not in tx_done and n not in dropped and not hub.alive(n):
                dropped.add(n)
                exp.declare_dead([n], round_index, notes, "died while transmitting")
                hub.send("channel", "drop", {"round": round_index, "attempt": attempt, "node": n})
        dead_infra = [n for n in infra if not hub.alive(n) or hub.peers[n].registrations != regs[n]]
        if dead_infra:
            log.warning("iteration %d attempt %d: %s died", round_index, attempt, ", ".join(dead_infra))
            return Reception(None, ok=False, reason=f"{', '.join(dead_infra)} died during the round",
                             wall_s=time.perf_counter() - t0,      # the server gets the capture unless
                             undelivered={} if {"receiver", "channel"} & set(dead_infra)   # its path died
                             else undelivered_noise(plan, jam_ok, channel, dropped)), True
    wall = time.perf_counter() - t0
    undelivered = undelivered_noise(plan, jam_ok, channel, dropped)
    attacked = link_problems(reports, dropped)
    if attacked:                     # stolen / injected samples: the attempt is lost, named, and counted
        return Reception(None, ok=False, reason=f"{ATTACKED}: {'; '.join(attacked)}", wall_s=wall,
                         extra={"attacked": attacked}, undelivered=undelivered), False
    if agg_msg is None:
        return Reception(None, ok=False, reason="no aggregate from the receiver by the deadline",
                         wall_s=wall, undelivered=undelivered), False
    missing = []
    if channel is not None:
        missing = [int(n.split("-")[1]) for n in channel["missing"] if n.startswith("client-")]
    extra = {"missing": missing}
    if cfg.air.record_iq and "iq" in agg_msg.arrays and ofdm is not None:     # the window the receiver read
        extra.update(ofdm_recording(cfg, plan, ofdm, agg_msg.arrays["iq"]))
    elif cfg.air.record_iq and "iq" in agg_msg.arrays:     # the receiver's samples, as it demodulated them
        from otafl_sdr.phy.packing import symbols_for
        from otafl_sdr.radio.recording import round_meta
        n_sym = symbols_for(exp.dim)
        extra["iq"] = np.asarray(agg_msg.arrays["iq"], dtype=np.complex64)
        extra["iq_meta"] = round_meta(cfg, plan, sample_rate=float(cfg.uhd.rate), ref_amplitude=ref_amp,
                                      n_symbols=n_sym, modem=exp.modem, air=cfg.air.name, attempt=attempt,
                                      hw=f"otafl-sdr testbed, {cfg.air.name} air (receiver node)")
    if agg_msg["ok"]:
        agg = np.array(agg_msg.arrays["aggregate"], dtype=np.float64)
        if agg.shape != (exp.dim,):
            return Reception(None, ok=False, reason=f"aggregate of shape {agg.shape}", wall_s=wall), False
        return Reception(agg, ok=True, faults=dict(agg_msg["faults"]), channel_uses=agg_msg["channel_uses"],
                         wall_s=wall, extra=extra, undelivered=undelivered), False
    return Reception(None, ok=False, reason=agg_msg["reason"], faults=dict(agg_msg["faults"]),
                     channel_uses=agg_msg["channel_uses"], wall_s=wall, extra=extra, undelivered=undelivered), False


def undelivered_noise(plan, jam_ok: bool, channel, dropped: set) -> dict:
    """The attempt's protective noise not confirmed delivered into the channel emulator's sum (which the
    emulator pushes on to the receiver whatever is missing): the jammer unless its ``tx_done`` was ok or the
    emulator received its burst; every client it misses or that died (its own noise, if any, went with
    it). rounds/accounting.fault_charge books the release at the noise that was there."""
    received = set(channel["received"]) if channel is not None else set()
    out = {}
    if plan.alpha_cj > 0 and not jam_ok and "jammer" not in received:
        out["jammer"] = "did not deliver its burst (died, late or refused)"
    for n in (list(channel["missing"]) if channel is not None else []):
        if n.startswith("client-"):
            out[n] = "burst missing at the channel"
    for n in dropped:
        out[n] = "died while transmitting"
    return out
