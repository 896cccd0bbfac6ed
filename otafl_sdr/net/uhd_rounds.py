"""The server's side of a testbed ``uhd`` run: every client, the jammer and the receiver are nodes on their
own hosts, each driving its own USRP (issue 13, item 4).

One attempt of a round (:meth:`TestbedUhdAir.attempt`):

1. the handshake (net/uhd_clock.py): ``capture`` (prepare) to the receiver, ``jam_at`` to the jammer (its
   noise drawn from its host's entropy, within the DAC's full scale) and ``clock`` to each client; each
   answers with its radio's device time (``armed``, ``clock_is``). The server refuses to schedule when its
   own clock is off a node's device time beyond ``uhd.clock_tolerance_s`` (one line naming the node and the
   offset; nothing sent, the booking withdrawn: the run stops, a resume reuses it);
2. only then t_tx = now (UTC) + ``uhd.start_delay``: the radios' device time is UTC on every host (PPS-set,
   see radio/uhd_radio.py), so the server schedules in UTC seconds; the receiver's capture starts
   ``LEAD_SAMPLES`` earlier (t_rx) and lasts burst + 2 x lead samples; ``go`` carries the times to the
   receiver and the jammer, which answer ``going`` (capture commanded; the jammer's time still ahead);
3. only then ``transmit_at`` goes to each sender, with the shared reference design and, in a calibrated
   run, each client's measured carrier offset and delay to pre-compensate (a jammer that refuses, dies or
   stays silent leaves every client untold: nothing is released, ``Attempt.unsent``: the retry is not
   booked again);
4. every transmitter answers ``burst_done`` with its radio's fault counts, the receiver ``captured`` with
   the samples and its own; the server (whose radio the receiver is) demodulates with the in-process air's
   :func:`~otafl_sdr.radio.uhd_round_signal.finish_round`: any fault loses the round, never a silent zero.
   A jammer (or client) whose burst was not confirmed clean after the clients were told is reported in
   ``Reception.undelivered``: the release rule books what went out at channel noise (rounds/accounting.py).

The same messages make the testbed a calibration link (``exchange``, ``set_tx_gain``, ``serials``), so
``calibration.session`` measures noise, channels, power and the jammer's delivered noise with the nodes'
own radios right before round 1 (and ``air.recalibrate_every``), as the in-process air does.

Every message of an attempt carries the release id its ledger line booked (``transmit_at``, ``jam_at``,
``capture``); the receiver echoes it in ``captured`` and the server logs each id it received (issue 28,
item 1), as on zmq. Each demodulated round's reference statistics become its link-health figures
(calibration/link_health.py: ``self.health``, written to the row by the server). Each node's radio reports
its tuning epoch (net/uhd_port.py); :meth:`TestbedUhdAir.epochs` gives them to the server, which invalidates
a calibration taken under another epoch.

Before anything is accounted, :meth:`TestbedUhdAir.preflight_acks` refuses a round whose jammer burst
would pass the DAC's full scale at a 4.5-sigma peak (a planned quantity), in one line, as the in-process
air's preflight does; a client's burst is never refused on its data: each client clips it to the DAC's
full scale, a fixed planned level (``uhd_round_signal.clip_to_dac``, recorded in ``plan.extra``)."""
from __future__ import annotations

import json
import logging
import time

import numpy as np

from otafl_sdr.errors import AirError
from otafl_sdr.transmission import Reception
from otafl_sdr.phy.reference_design import allowance, reference_design

log = logging.getLogger("otafl.net")

CAL_ROUND = -1           # round number of calibration exchanges
RECEIVED = "received the capture of release"    # server.log: one line per release id the receiver echoed


def silent_on_simulator(attempt: int, n_cap: int, round_index: int = CAL_ROUND) -> tuple[str, dict, dict]:
    """The ``send`` of a transmitter that is silent in a calibration exchange (the noise step: every one; the
    jammer step: the clients; the OFDM channel step: the jammer), on UHD's simulator only (``uhd.simulator``):
    one zero sample, which its node pads with zeros to the whole capture (radio/uhd_radio.UhdRadio.send), so
    the lab's receiver hears that radio's stream cover the capture instead of waiting for it (a lab capture
    waits up to SimulatedLab's ``idle_s``, 6 s, for a transmitter that has not sent this round: bursts of
    separate node processes may start seconds apart). Zeros add nothing to the capture: the measurement is
    the same. Real radios are never told to send them (a silent radio stays silent). A round's silent jammer
    (``plan.alpha_cj`` = 0) is sent the same, outside the round's accounting (``_exchange``'s ``silent``)."""
    return ("send", {"round": int(round_index), "attempt": int(attempt), "t_tx": 0.0, "t_rx": 0.0, "n": int(n_cap)},
            {"samples": np.zeros(1, np.complex64)})


class TestbedUhdAir:
    """Mixed into :class:`~otafl_sdr.net.server.TestbedAir` for air uhd (see the module doc)."""

    def _uhd_init(self) -> None:
        from otafl_sdr.radio.calibration_flowgraphs import set_uhd_link_geometry
        cfg = self.exp.cfg
        if cfg.air.coherence == "track":           # the nodes measure (net/uhd_sounding.py, uhd_ofdm_round.py)
            from otafl_sdr.errors import ConfigError
            raise ConfigError("air.coherence", "'track' corrects each payload from its own round's sounding, which "
                              "over the nodes would need a message round trip inside the round; the testbed "
                              "measures: --set air.coherence=measure (or off)")
        # air.coherence = "measure": the per-client loop, what its last sounding found beyond the limits
        self.coherence, self.coherence_alarms = None, []
        set_uhd_link_geometry(self, self.exp.cfg)
        self.radios: dict[str, dict] = {}        # node -> its radio's actual settings (the 'radio' message)
        self.calibration_path, self._known, self._jammer_gain, self._jam_delay = None, None, None, None
        self._exchanges = 0
        self.health: dict | None = None          # the last demodulated round's link health
        self.refused, self.unsent, self.t_tx = "", False, 0.0   # the last exchange's clock refusal, proof, t_tx

    # ------------------------------------------------------------------ what the nodes said
    def note_radio(self, name: str, settings: str) -> None:
        try:
            self.radios[name] = json.loads(settings)
        except ValueError:
            log.warning("%s sent unreadable radio settings", name)
            return
        tries = self.radios[name].get("open_tries", 1)
        if isinstance(tries, int) and tries > 1:        # a restarted node waited for its radio's claim to expire
            log.warning("%s opened its radio after %d tries in %.1f s (tuning epoch %s)", name, tries,
                        float(self.radios[name].get("open_s", 0.0)), self.radios[name].get("tuning_epoch", "?"))

    def describe(self) -> dict:
        order = [f"client-{i}" for i in range(self.clients)] + (["jammer"] if self.has_jammer else []) + ["receiver"]
        radios = [dict(self.radios.get(n, {}), node=n) for n in order]
        warnings = [w for r in radios for w in r.pop("warnings", [])]
        return {"radios": radios, "warnings": warnings, "simulator": bool(self.exp.cfg.uhd.simulator),
                "nodes": True}

    def epochs(self) -> dict:
        """node -> the tuning epoch its radio reported (a new one after every restart, re-tune or reset)."""
        return {n: str(r.get("tuning_epoch", "")) for n, r in self.radios.items()}

    def serials(self) -> dict:
        def s(n):
            return str(self.radios.get(n, {}).get("serial", ""))
        return {"clients": [s(f"client-{i}") for i in range(self.clients)],
                "jammer": s("jammer") if self.has_jammer else "", "receiver": s("receiver")}

    def truth(self, t: int, ref_sample: float) -> None:
        return None

    # ------------------------------------------------------------------ calibration results
    def use_calibration(self, path) -> None:
        self.calibration_path, self._known, self._jammer_gain, self._jam_delay = path, None, None, None

    def jammer_delay(self) -> float:
        """The jammer's calibrated arrival delay (samples) relative to the earliest client in a calibrated run
        (radio/uhd_exchange.jammer_delay, as the in-process air applies it); 0 otherwise."""
        if self.exp.cfg.air.csi != "calibrated":
            return 0.0
        if self._jam_delay is None:
            from otafl_sdr.radio.uhd_exchange import jammer_delay
            self._jam_delay = jammer_delay(self.exp.cfg, self.clients, self.calibration_path)
        return self._jam_delay

    def delivered_jammer_gain(self) -> float | None:
        cfg = self.exp.cfg
        if not cfg.power.jammer:
            return None
        if self._jammer_gain is None:
            from otafl_sdr.calibration.csi import delivered_jammer_gain
            self._jammer_gain = (delivered_jammer_gain(self.calibration_path or cfg.calibration.file),)
        return self._jammer_gain[0]

    def offsets(self) -> dict:
        """client name -> [cfo, delay] each client pre-compensates (air.csi = 'calibrated'), else {}."""
        cfg = self.exp.cfg
        if cfg.air.csi != "calibrated":
            return {}
        if self._known is None:
            from otafl_sdr.calibration.csi import known_offsets
            from otafl_sdr.calibration.csi import phase_refs
            self._known = known_offsets(cfg, self.clients, whole=False, path=self.calibration_path) + \
                (phase_refs(cfg, self.clients, self.calibration_path),)
        cfo, delay = self._known[:2]
        return {f"client-{i}": [float(cfo[i]), float(delay[i])] for i in range(self.clients)}

    def phase_ref(self, i: int) -> float | None:
        """The device time client i's calibrated phase refers to (its pre-compensation's t_ref), or None."""
        if self.exp.cfg.air.csi != "calibrated":
            return None
        self.offsets()
        return self._known[2][i]

    def rounds_under(self, cfg, before_round: int = 1):
        """The coherence check's rounds under its config, before the run's round ``before_round``
        (experiment/coherence_gate.py): a context manager yielding the air the check's rounds go through
        (net/uhd_check_rounds.py)."""
        from otafl_sdr.net.uhd_check_rounds import rounds_under
        return rounds_under(self, cfg, before_round)

    # ------------------------------------------------------------------ before accounting
    def preflight_acks(self, plan, acks: dict) -> dict:
        """Refuse (AirError, one line) a plan the radios cannot carry, before it is accounted: planned
        quantities only (the clients clip their bursts to the DAC's full scale, a fixed level); the round's
        planned power (radio/uhd_power.py: tx_scale and PA correction, sent in transmit_at; a plan into a
        radio's compression refused), its row fields returned."""
        from otafl_sdr.radio.jammer_peak import refuse_jammer_peak     # with advice that works (issue 34)
        from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE
        plan.extra["dac_clip_level"] = DAC_FULL_SCALE
        refuse_jammer_peak(self.exp.cfg, plan, "uhd")
        from otafl_sdr.radio.uhd_power import PowerPlan
        if getattr(self, "_power", None) is None or self._power.path != self.calibration_path:
            self._power = PowerPlan(self.exp.cfg, self.clients, self.calibration_path)
        from otafl_sdr.radio.uhd_ofdm import ofdm_row
        return {**(self._power.plan_round(plan) or {}), **ofdm_row(plan)}

    # ------------------------------------------------------------------ one timed exchange
    def _exchange(self, round_index: int, attempt: int, n_cap: int, rx_offset: float, sends: dict, infra: list[str],
                  deadline: float, arm_first: str = "", release: str = "",
                  silent: dict | None = None) -> tuple[np.ndarray | None, dict, str, bool]:
        """The handshake, then the timed exchange (net/uhd_clock.py): ``capture`` (prepare) to the receiver, the
        ``arm_first`` node's own message (a round's jammer: it draws its burst) and ``clock`` to every other
        sender; each answers with its radio's device time. The server checks its clock against them (a clock
        off beyond ``uhd.clock_tolerance_s``: ``self.refused``, nothing scheduled), THEN chooses
        ``self.t_tx`` = its clock + ``uhd.start_delay`` and sends ``go`` to the receiver (t_rx = t_tx +
        ``rx_offset``) and the first node; once both answered ``going`` (capture commanded; the jammer's time
        still ahead) each ``sends[name] = (type, fields, arrays)`` goes out with its ``t_tx`` / ``t_rx`` fields
        (offsets, s) made absolute. A jammer that refuses, dies or stays silent leaves the clients untold
        (``self.unsent``: nothing released). Returns (samples or None, faults, reason, infra died).
        ``self.undelivered``: the protective noise not confirmed delivered once client data was on the air.
        ``silent`` (UHD's simulator: a round's silent jammer, :func:`silent_on_simulator`): sends that go out with
        the clients' and are never waited for nor accounted (their reports are not read)."""
        from otafl_sdr.radio.uhd_events import merge_counts
        from otafl_sdr.net.uhd_clock import clock_refusal, injected_skew, server_clock

        exp, hub, cfg = self.exp, self.exp.hub, self.exp.cfg
        regs = {n: hub.peers[n].registrations for n in [*infra, *sends] if n in hub.peers}
        first = arm_first if arm_first in sends else ""
        skew = injected_skew(round_index)
        sent_at = server_clock(skew)
        hub.send("receiver", "capture", {"round": round_index, "attempt": attempt, "release": release, "n": int(n_cap),
                                         "t_rx": 0.0, "deadline": float(deadline)})
        for name, (mtype, fields, arrays) in sends.items():
            if name == first:
                hub.send(name, mtype, dict(fields, t_tx=0.0, t_rx=0.0), arrays)
            else:
                hub.send(name, "clock", {"round": round_index, "attempt": attempt})
        times: dict[str, tuple] = {}             # node -> (device time, server clock when read)
        armed = captured = None
        going: dict[str, object] = {}
        reports: dict[str, object] = {}
        first_armed = None
        scheduled = told = False                 # go sent; the clients told to transmit (data on the air)
        self.undelivered, self.refused, self.unsent, self.t_tx = {}, "", False, 0.0
        while time.time() < deadline:
            for name, msg in exp.pump(0.02):
                if msg.get("round") != round_index or msg.get("attempt") != attempt:
                    continue
                if msg.type in ("armed", "clock_is") and msg["device_time"] is not None:
                    times[name] = (float(msg["device_time"]), server_clock(skew))
                if msg.type == "armed" and name == "receiver":
                    armed = msg
                elif msg.type == "armed" and name == first:
                    first_armed = msg
                elif msg.type == "clock_is" and name in sends:
                    times.setdefault(name, (None, server_clock(skew)))
                elif msg.type == "going" and name in ("receiver", first):
                    going[name] = msg
                elif msg.type == "captured" and name == "receiver":
                    if msg["release"] != release:         # not the release this capture was asked for
                        log.warning("round %d attempt %d: the receiver echoed release %r, not %r; ignored", round_index,
                                    attempt, msg["release"], release)
                        continue
                    captured = msg
                elif msg.type == "burst_done" and name in sends:
                    reports[name] = msg
                    if not msg["ok"]:
                        log.warning("round %d attempt %d: %s did not transmit: %s", round_index, attempt, name, msg["reason"])
            if armed is not None and not armed["ok"]:
                captured = {"faults": {"radio_failed": 1}, "reason": armed["reason"]}
                break
            bad = [m for m in (first_armed, going.get(first)) if first and m is not None and not m["ok"]]
            if bad:
                self._abandon(round_index, attempt, first, scheduled)
                self.unsent = True
                return None, {}, f"{first} did not arm: {bad[0]['reason']} (no client was told to transmit)", False
            heard = armed is not None and (not first or first_armed is not None) and \
                all(n in times for n in sends if n != first)
            if heard and not scheduled:          # the handshake is complete: check the clock, choose t_tx
                self.refused = clock_refusal(times, sent_at, float(cfg.uhd.clock_tolerance_s))
                if self.refused:
                    self._abandon(round_index, attempt, first, False)
                    self.unsent = True
                    log.error("round %d attempt %d: %s", round_index, attempt, self.refused)
                    return None, {}, self.refused, False
                self.t_tx = server_clock(skew) + float(cfg.uhd.start_delay)
                for name in ["receiver"] + ([first] if first else []):
                    off = float(sends[name][1].get("t_tx", 0.0)) if name == first else 0.0
                    hub.send(name, "go", {"round": round_index, "attempt": attempt, "ok": True, "t_tx": self.t_tx + off,
                                          "t_rx": self.t_tx + rx_offset})
                scheduled = True
            if scheduled and not told and all(n in going for n in ["receiver"] + ([first] if first else [])):
                for name, (mtype, fields, arrays) in sends.items():
                    if name != first:
                        hub.send(name, mtype, dict(fields, t_tx=self.t_tx + float(fields["t_tx"]),
                                                   t_rx=self.t_tx + float(fields["t_rx"])), arrays)
                for name, (mtype, fields, arrays) in (silent or {}).items():
                    hub.send(name, mtype, dict(fields, t_tx=self.t_tx, t_rx=self.t_tx + rx_offset), arrays)
                told = True
                log.info("round %d attempt %d: on the air (%d transmitters)", round_index, attempt, len(sends))
            # a node that died or registered again (restarted) since the exchange began never answers: no waiting
            gone = [n for n in [*infra, *sends] if n not in regs or not hub.alive(n)
                    or hub.peers[n].registrations != regs[n]]
            if captured is not None and (not told or all(n in reports or n in gone for n in sends)):
                break
            if not told and [n for n in gone if n.startswith("client-")]:     # its decision went with it
                self._abandon(round_index, attempt, first, scheduled)
                self.unsent = True
                return None, {}, f"{', '.join(n for n in gone if n in sends)} restarted or died before it was told " \
                                 f"to transmit (no client was told)", False
            dead = [n for n in infra if n in gone]
            if dead:
                if "receiver" not in dead:             # its capture still reaches the server
                    self.undelivered = self.undelivered_noise(sends, reports, told)
                self.unsent = not told
                return None, {}, f"{', '.join(dead)} died during the exchange", True
        self.undelivered = self.undelivered_noise(sends, reports, told)
        self.unsent = not told
        if not scheduled:
            self._abandon(round_index, attempt, first, False)
        from otafl_sdr.net.uhd_port import RADIO_FAILED
        failed = [(n, m["reason"]) for n, m in reports.items() if m["faults"].get(RADIO_FAILED)]
        if captured is not None and dict(captured["faults"]).get(RADIO_FAILED):
            failed.append(("receiver", captured["reason"]))
        if failed:                     # a radio is gone: stop the run (the orchestrator keeps the checkpoint)
            name, why = failed[0]
            err = AirError(f"{name}'s USRP failed: {why.splitlines()[0] if why else 'no reason given'}; check it "
                           f"with `uhd_find_devices` on its host, restart the node, then resume with "
                           f"`otafl-sdr node server --resume DIR`")
            err.undelivered = dict(self.undelivered)       # charged by the release rule before the run stops
            raise err
        faults = merge_counts(*(m["faults"] for m in reports.values()))
        silent = [n for n in sends if told and n not in reports]
        if silent:
            faults["no_burst_report"] = len(silent)
        if captured is None or not told:
            reason = ("the receiver did not arm its capture by the deadline" if armed is None
                      else "the handshake did not complete by the deadline" if not told
                      else "no capture from the receiver by the deadline")
            return None, faults, reason, False
        faults = merge_counts(faults, captured["faults"])
        samples = np.asarray(captured.arrays.get("iq", np.zeros(0, np.complex64)), dtype=np.complex64)
        return samples, faults, captured["reason"], False

    def _abandon(self, round_index: int, attempt: int, first: str, scheduled: bool) -> None:
        """Release the receiver's (and the first node's) wait for 'go': nothing of this attempt is sent."""
        for name in ["receiver"] + ([first] if first else []):
            if self.exp.hub.alive(name):
                self.exp.hub.send(name, "go", {"round": round_index, "attempt": attempt, "ok": False, "t_tx": 0.0,
                                               "t_rx": 0.0})

    def undelivered_noise(self, sends: dict, reports: dict, told: bool) -> dict:
        """Once the clients were told to transmit: each noise source among ``sends`` (the jammer; a client,
        whose burst may carry its own noise) with no clean ``burst_done`` -> what happened (died, no report,
        the radio's faults by name). rounds/accounting.fault_charge books the release it made."""
        from otafl_sdr.radio.uhd_events import FAULT_LABELS
        if not told:
            return {}
        out = {}
        for name in sends:
            m = reports.get(name)
            bad = {k: v for k, v in (dict(m["faults"]) if m is not None else {}).items() if v and k != "burst_ack"}
            if m is None:
                out[name] = "died during its burst" if not self.exp.hub.alive(name) else "sent no burst report"
            elif bad or not m["ok"]:
                out[name] = ", ".join(FAULT_LABELS.get(k, k) for k in sorted(bad)) or m["reason"] or "not sent"
        return out

    def attempt(self, round_index: int, attempt: int, plan, senders: list[int], infra: list[str],
                notes: list) -> tuple[Reception, bool]:
        """One attempt of round ``round_index`` on the nodes' radios (see the module doc)."""
        from otafl_sdr.phy.packing import symbols_for
        from otafl_sdr.radio.recording import round_meta
        from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
        from otafl_sdr.radio.uhd_round_signal import finish_round

        exp, cfg = self.exp, self.exp.cfg
        t0 = time.perf_counter()
        deadline = time.time() + cfg.net.timeout_s
        active = np.zeros(exp.K, dtype=bool)
        active[senders] = True
        h_known = np.asarray(plan.extra.get("csi", plan.h), dtype=np.complex128)
        ref_gain, ref_amp = reference_design(exp.modem, h_known, allowance(plan, active), exp.dim)
        ref_gains = {f"client-{i}": [float(ref_gain[i].real), float(ref_gain[i].imag)] for i in senders}
        n = exp.modem.burst_samples(symbols_for(exp.dim))
        # with the jammer (single carrier): a quiet slot before the frame and a jammer-only slot after it, the
        # noise it delivered measured every round (radio/jammer_slots.py)
        from otafl_sdr.radio.jammer_slots import JAMMER_SAMPLES, QUIET_SAMPLES
        slots = plan.alpha_cj > 0 and not (isinstance(plan.extra, dict) and "ofdm" in plan.extra)
        quiet, slot = (QUIET_SAMPLES, JAMMER_SAMPLES) if slots else (0, 0)
        n_cap = quiet + n + 2 * LEAD_SAMPLES + slot
        rx_off = -(LEAD_SAMPLES + quiet) / float(cfg.uhd.rate)  # times are offsets from t_tx, chosen after the handshake
        offsets = self.offsets()
        rid = str(plan.extra.get("release", "")) if isinstance(plan.extra, dict) else ""   # the ledger's booking
        sends = {f"client-{i}": ("transmit_at", {"round": round_index, "attempt": attempt, "release": rid, "t_tx": 0.0,
                                                 "t_rx": rx_off, "n": int(n_cap), "ref_gains": ref_gains,
                                                 "offsets": offsets, "t_ref": self.phase_ref(i),
                                                 "tx_amp": float((plan.extra.get("tx_amp") or [1.0] * exp.K)[i]),
                                                 "sounding": 0, "slot": 0}, {})
                 for i in senders}
        if plan.alpha_cj > 0:
            sends["jammer"] = ("jam_at", {"round": round_index, "attempt": attempt, "release": rid,
                                          "alpha_cj": float(plan.alpha_cj), "t_rx": rx_off,
                                          "t_tx": -self.jammer_delay() / float(cfg.uhd.rate),
                                          "n": int(n_cap), "dim": int(exp.dim), "slot": int(slot)}, {})
        from otafl_sdr.net.uhd_sounding import add_sounding, read_clients
        sounding, n_cap = add_sounding(cfg, exp.K, sends, slot, n_cap)      # air.coherence = "measure"
        ofdm = self.ofdm_design(plan, senders, sends)           # phy.waveform = "ofdm" (net/uhd_ofdm_round.py)
        n_cap = n_cap if ofdm is None else ofdm["n_cap"]
        silent = ({"jammer": silent_on_simulator(attempt, n_cap, round_index)}
                  if cfg.uhd.simulator and self.has_jammer and "jammer" not in sends and exp.hub.alive("jammer") else None)
        samples, faults, reason, died = self._exchange(round_index, attempt, n_cap, rx_off, sends, infra, deadline,
                                                       arm_first="jammer", release=rid, silent=silent)
        t_tx = self.t_tx
        t_rx = t_tx + rx_off
        if samples is not None and rid:       # one line per release received (the id the receiver echoed);
            log.info("round %d attempt %d: %s %s", round_index, attempt, RECEIVED, rid)   # a check round has none
        undelivered = dict(self.undelivered)
        for name in [c for c in sends if c.startswith("client-") and not exp.hub.alive(c)]:
            if round_index >= 1:                 # a check round's: declared by the check's next round or round 1
                exp.declare_dead([name], round_index, notes, "died while transmitting")
        wall = time.perf_counter() - t0
        if samples is None:
            return Reception(None, ok=False, reason=reason, faults=faults, wall_s=wall, undelivered=undelivered), died
        if not faults and reason:
            return Reception(None, ok=False, reason=reason, wall_s=wall, undelivered=undelivered), False
        meta = None
        if ofdm is not None:
            return self.ofdm_finish(plan, ofdm, samples, faults, wall, undelivered, t_tx, attempt), False
        if cfg.air.record_iq:
            meta = round_meta(cfg, plan, sample_rate=float(cfg.uhd.rate), ref_amplitude=ref_amp,
                              n_symbols=symbols_for(exp.dim), modem=exp.modem, center_freq=cfg.uhd.freq, air="uhd",
                              hw="otafl-sdr testbed, uhd air (one node per radio)", t0=t_tx,
                              annotation_start=LEAD_SAMPLES,
                              extra={"devices": self.describe()["radios"], "simulator": bool(cfg.uhd.simulator),
                                     "rx_start": t_rx, "attempt": attempt})
        capture, samples = samples, samples[quiet:quiet + n + 2 * LEAD_SAMPLES]      # the frame, as the modem reads it
        rec = finish_round(plan, exp.modem, samples, ref_amp, faults, wall_s=wall, record_meta=meta)
        rec.undelivered = undelivered
        from otafl_sdr.radio.jammer_slots import attach, clean, measure
        if slots and clean(faults):             # a capture with a fault (overflow, timeout) measures nothing
            attach(rec, measure(capture, quiet + LEAD_SAMPLES + n, exp.modem, plan.alpha_u, self.jammer_delay(),
                                quiet=quiet + LEAD_SAMPLES))
        from otafl_sdr.calibration.link_health import link_health
        self.health = link_health(rec.extra, LEAD_SAMPLES)
        if sounding is not None:                # each client's part after the frame and the jammer's slot
            read_clients(self, sounding, capture, quiet + LEAD_SAMPLES + n + slot, h_known, ref_gains, clean(faults))
        return rec, False

    def ofdm_design(self, plan, senders: list[int], sends: dict) -> dict | None:
        """An OFDM round's attempt design, its arrays added to ``sends`` (net/uhd_ofdm_round.py); None else."""
        if not isinstance(plan.extra, dict) or "ofdm" not in plan.extra:
            return None
        from otafl_sdr.net.uhd_ofdm_round import add_arrays, add_sounding, attempt_design, capture_len
        design = attempt_design(self.exp.cfg, plan, senders, self.exp.parts.csi)
        add_arrays(sends, design)
        if "jammer" in sends:                    # its slot alone after the frame (radio/ofdm_jammer_slot.py)
            from otafl_sdr.radio.ofdm_jammer_slot import SLOT_SYMBOLS
            design["slot"] = SLOT_SYMBOLS
            sends["jammer"][1]["slot"] = SLOT_SYMBOLS
        add_sounding(self.exp.cfg, plan, design, sends)        # air.coherence = "measure": after frame and slot
        if design.get("sounding") is not None:
            from otafl_sdr.radio.uhd_coherent_round import link_phase_noise
            design["phase_noise"] = link_phase_noise(self, plan.clients)
        design["n_cap"] = capture_len(design)
        for name, (mtype, fields, arrays) in sends.items():
            fields["n"] = design["n_cap"]
        return design

    def ofdm_finish(self, plan, design, samples, faults, wall, undelivered, t_tx, attempt) -> Reception:
        from otafl_sdr.net.uhd_ofdm_round import finish
        rec = finish(self.exp.cfg, plan, design, samples, faults, wall, {
            "devices": self.describe()["radios"], "simulator": bool(self.exp.cfg.uhd.simulator), "t0": t_tx,
            "attempt": attempt})
        rec.undelivered = undelivered
        if rec.extra.get("jammer_slots"):      # a slot with a gap: the jammer charged away (radio/jammer_slots.py)
            from otafl_sdr.radio.jammer_slots import attach
            attach(rec, rec.extra["jammer_slots"])
        from otafl_sdr.radio.uhd_ofdm import ofdm_health
        from otafl_sdr.phy.ofdm import OfdmLayout
        self.health = ofdm_health(rec, design["frame"], OfdmLayout.from_phy(self.exp.cfg.phy))
        from otafl_sdr.net.uhd_ofdm_round import sounding_health
        sounding_health(self, design, rec)
        return rec

    # ------------------------------------------------------------------ the calibration link
    def exchange(self, streams: np.ndarray) -> np.ndarray:
        """Calibration: each transmitter's non-zero span of its row of ``streams`` as one timed burst, the
        receiver capturing the whole length (the in-process UhdLink's exchange, over the nodes); an exchange
        lost to a fault is sent again (calibration/procedures.exchange_with_retries)."""
        from otafl_sdr.calibration.procedures import exchange_with_retries
        return exchange_with_retries(lambda: self._exchange_once(streams), log)

    def _exchange_once(self, streams: np.ndarray) -> tuple[np.ndarray | None, str]:
        """One calibration exchange: (the capture, '') or (None, why it was lost)."""
        from otafl_sdr.radio.uhd_events import summarise

        streams = np.asarray(streams, dtype=np.complex64)
        T, L = streams.shape
        names = [f"client-{i}" for i in range(self.clients)] + (["jammer"] if self.has_jammer else [])
        if T != len(names):
            raise AirError(f"calibration: {T} transmit streams for {len(names)} transmitting radios")
        rate = float(self.exp.cfg.uhd.rate)
        self._exchanges += 1
        sends = {}
        for name, x in zip(names, streams):
            nz = np.flatnonzero(x)
            if nz.size:
                first, last = int(nz[0]), int(nz[-1])
                sends[name] = ("send", {"round": CAL_ROUND, "attempt": self._exchanges, "t_tx": first / rate,
                                        "t_rx": 0.0, "n": int(L)}, {"samples": x[first:last + 1]})
            elif self.exp.cfg.uhd.simulator:
                sends[name] = silent_on_simulator(self._exchanges, L)
        deadline = time.time() + float(self.exp.cfg.net.timeout_s)
        samples, faults, reason, _ = self._exchange(CAL_ROUND, self._exchanges, L, 0.0, sends,
                                                    ["receiver"] + [n for n in sends if n == "jammer"], deadline)
        self.exchange_time = self.t_tx           # the capture's first sample, device time (calibration/phase_ref.py)
        ok, why = summarise(faults)
        if samples is None or not ok or len(samples) < L:
            return None, why or reason or "short capture"
        return samples, ""

    def set_tx_gain(self, gain_db: float) -> None:
        exp, hub = self.exp, self.exp.hub
        names = [f"client-{i}" for i in range(self.clients)] + (["jammer"] if self.has_jammer else [])
        hub.broadcast(names, "set_gain", {"gain": float(gain_db)})
        got: dict[str, object] = {}
        deadline = time.time() + float(exp.cfg.net.timeout_s)
        while len(got) < len(names) and time.time() < deadline:
            for name, msg in exp.pump(0.05):
                if msg.type == "gain_set" and name in names:
                    got[name] = msg
        bad = [f"{n}: {m['reason']}" for n, m in got.items() if not m["ok"]]
        missing = [n for n in names if n not in got]
        if bad or missing:
            raise AirError(f"calibration: TX gain {gain_db:g} dB not set on "
                           + "; ".join(bad + [f"{n}: no answer" for n in missing]))
