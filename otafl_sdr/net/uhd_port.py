"""A node's own USRP (air uhd, one radio per host): what the client, jammer and receiver nodes share.

:class:`UhdPort` opens the node's radio (:class:`~otafl_sdr.radio.uhd_radio.UhdRadio`) from the run's
config: client i ``uhd.tx_args[i]``, the jammer ``uhd.jammer_args``, the receiver ``uhd.rx_args`` (or the
node's ``--device-args``, the address as this host sees its radio), tells the server its actual settings
(``radio``), and answers the server's radio-level requests: ``send`` (a calibration exchange's samples
at t_tx), ``set_gain`` (the power calibration's gain steps), ``clock`` (answered ``clock_is`` with the
radio's device time), ``capture`` (receiver: answer ``armed`` with the device time, wait for the server's
``go`` with the times it chose after that handshake (net/uhd_clock.py), command the capture, answer ``going``,
then ``captured`` with the samples, the radio's faults and the release id it was asked for). A round's
burst goes out through :meth:`UhdPort.burst` and is answered with ``burst_done`` (the radio's fault counts:
late, underflow, missing ack, DAC clip).

Tuning epoch (issue 25, item 1): every time this node opens (tunes) its radio it draws a fresh random
``tuning_epoch`` and reports it in its ``radio`` settings; a node restart, a re-tune or a device reset
re-opens the radio and so changes it. The LO phase (and, across a reset, delay and offsets) of a radio
belong to one epoch: the server invalidates every calibration taken under an older epoch (net/server.py)."""
from __future__ import annotations

import json
import secrets
import threading
import time

import numpy as np

from otafl_sdr.net.messages import Message

RADIO_FAILED = "radio_failed"     # fault count of a node whose radio stopped answering (the run stops)
REOPEN_S = 20.0                   # a restarted node retries opening its radio this long: an MPM device stays
                                  # claimed by the dead process ~5 s after its last claim heartbeat
REOPEN_EVERY_S = 1.0


def device_args(cfg, role: str, client_id: int = 0) -> tuple[str, str]:
    """(config key, device address) of this node's radio in the run's config."""
    if role == "client":
        tx = list(cfg.uhd.tx_args)
        if not 0 <= client_id < len(tx):
            from otafl_sdr.errors import ConfigError
            raise ConfigError("uhd.tx_args", f"has {len(tx)} entries; client {client_id} has no radio there (give "
                                             f"one address per client, or --device-args on this node)")
        return f"uhd.tx_args[{client_id}]", tx[client_id]
    if role == "jammer":
        return "uhd.jammer_args", cfg.uhd.jammer_args
    return "uhd.rx_args", cfg.uhd.rx_args


class UhdPort:
    """The node's radio and its message handlers (see the module doc)."""

    def __init__(self, node, role_label: str, override: str | None = None):
        self.node = node
        self.label = role_label
        self.override = override
        self.radio = None
        self._latest = (None, None)
        self._go: dict = {}                          # (round, attempt) -> the server's 'go' (net/uhd_clock.py)
        self._go_cv = threading.Condition()

    def open(self, cfg, role: str, client_id: int = 0) -> None:
        import logging

        from otafl_sdr.errors import AirError
        from otafl_sdr.radio.uhd_radio import UhdRadio
        key, args = device_args(cfg, role, client_id)
        if self.override:
            key, args = "--device-args", self.override
        t0, tries = time.monotonic(), 0
        while True:                    # a restarted node: the dead process's claim expires (bounded, reported)
            tries += 1
            try:
                self.radio = UhdRadio(cfg, self.label, key, args, tx=role != "receiver").open()
                break
            except AirError as e:
                waited = time.monotonic() - t0
                if waited + REOPEN_EVERY_S > REOPEN_S:
                    raise AirError(f"{e} (gave up after {tries} tries in {waited:.1f} s; uhd_port.REOPEN_S = "
                                   f"{REOPEN_S:g})") from None
                logging.getLogger("otafl.net").warning("%s: opening its radio failed (try %d, %.1f s): %s; retrying",
                                                       self.label, tries, waited, str(e).splitlines()[0])
                time.sleep(REOPEN_EVERY_S)
        opened_s = time.monotonic() - t0
        self.epoch = secrets.token_hex(8)          # this tuning of the radio (new on every open)
        warnings = list(self.radio.warnings)
        if tries > 1:
            warnings.append(f"{self.label}: radio opened after {tries} tries in {opened_s:.1f} s (a previous "
                            f"process's claim on it expired)")
        info = dict(self.radio.settings, warnings=warnings, tuning_epoch=self.epoch, open_tries=tries,
                    open_s=round(opened_s, 2))
        self.node.reply("radio", {"settings": json.dumps(info)})

    # ------------------------------------------------------------------ requests
    def handle(self, msg: Message):
        """A job for a radio-level request, or None if ``msg`` is not one."""
        if msg.type == "send":
            return lambda: self.burst(np.asarray(msg.arrays["samples"]), msg["t_tx"], msg["t_rx"], msg["round"],
                                      msg["attempt"], msg["n"])
        if msg.type == "set_gain":
            return lambda: self._set_gain(float(msg["gain"]))
        if msg.type == "capture":
            self._latest = (msg["round"], msg["attempt"])
            return lambda: self._capture(msg)
        if msg.type == "go":                       # answered by the job waiting for it (main thread: no job)
            with self._go_cv:
                self._go = {k: v for k, v in self._go.items() if k[0] >= msg["round"] - 1}
                self._go[(msg["round"], msg["attempt"])] = msg
                self._go_cv.notify_all()
            return None
        if msg.type == "clock":
            return lambda: self.node.reply("clock_is", {"round": msg["round"], "attempt": msg["attempt"],
                                                        "device_time": self.clock()})
        return None

    def clock(self) -> float | None:
        """This radio's device time as the server's clock check reads it (None: the radio is closed)."""
        from otafl_sdr.errors import AirError
        try:
            return None if self.radio is None else float(self.radio.schedule_clock())
        except AirError:
            return None

    def wait_go(self, round_index: int, attempt: int, deadline: float, current=lambda: True) -> Message | None:
        """The server's 'go' for (it, attempt) (its times, or ok false: abandoned), or None at ``deadline``
        (time.time()), when the node stops or ``current()`` says a newer request superseded this one."""
        key = (round_index, attempt)
        with self._go_cv:
            while key not in self._go:
                if time.time() >= deadline or self.node._stop.is_set() or not current():
                    return None
                self._go_cv.wait(0.02)
            return self._go.pop(key)

    def burst(self, samples, t_tx: float, t_rx: float, round_index: int, attempt: int, n_cap: int = 0) -> None:
        from otafl_sdr.errors import AirError
        try:
            if self.radio is None:
                raise AirError(f"uhd: the {self.label} radio is closed after an earlier failure")
            faults = self.radio.send(samples, float(t_tx), float(t_rx), int(n_cap))
        except AirError as e:              # the radio is gone: the server stops the run (checkpoint kept)
            self.node.reply("burst_done", {"round": round_index, "attempt": attempt, "ok": False, "reason": str(e),
                                           "faults": {RADIO_FAILED: 1}})
            return
        clip = faults.get("dac_clip", 0)
        self.node.reply("burst_done", {"round": round_index, "attempt": attempt, "ok": not clip, "faults": faults,
                                       "reason": "the burst passes the DAC full scale; not sent" if clip else ""})

    def _set_gain(self, gain: float) -> None:
        from otafl_sdr.errors import AirError
        try:
            got = self.radio.set_gain(gain)
            self.node.reply("gain_set", {"ok": True, "reason": "", "gain": got})
        except AirError as e:
            self.node.reply("gain_set", {"ok": False, "reason": str(e), "gain": gain})

    def _capture(self, msg: Message) -> None:
        from otafl_sdr.errors import AirError
        round_index, attempt, rid = msg["round"], msg["attempt"], msg["release"]
        armed = False
        try:
            if self.radio is None:
                raise AirError("uhd: the receiver radio is closed after an earlier failure")
            # the handshake: ready, with the device time; the capture is commanded on 'go' (t_tx is chosen
            # after this answer, net/uhd_clock.py)
            self.node.reply("armed", {"round": round_index, "attempt": attempt, "ok": True, "reason": "",
                                      "device_time": self.clock()})
            armed = True
            go = self.wait_go(round_index, attempt, float(msg["deadline"]), lambda: self._latest == (round_index, attempt))
            if go is None or not go["ok"]:
                return                                     # abandoned before anything was scheduled
            self.radio.arm(int(msg["n"]), float(go["t_rx"]))
            self.node.reply("going", {"round": round_index, "attempt": attempt, "ok": True, "reason": ""})
            samples, faults = self.radio.collect(min(float(msg["deadline"]), time.time() + self.node.timeout_s))
        except AirError as e:              # the radio is gone: the server stops the run (checkpoint kept)
            if not armed:
                self.node.reply("armed", {"round": round_index, "attempt": attempt, "ok": False, "reason": str(e),
                                          "device_time": None})
            self.node.reply("captured", {"round": round_index, "attempt": attempt, "release": rid, "ok": False,
                                         "reason": str(e), "faults": {RADIO_FAILED: 1}})
            return
        if self._latest != (round_index, attempt):
            return                                         # the server moved on (a newer request)
        ok = len(samples) == int(msg["n"])
        self.node.reply("captured", {"round": round_index, "attempt": attempt, "release": rid, "ok": ok, "faults": faults,
                                     "reason": "" if ok else f"captured {len(samples)} of {int(msg['n'])} samples"},
                        {"iq": np.ascontiguousarray(samples, dtype=np.complex64)})

    def close(self) -> None:
        if self.radio is not None:
            self.radio.close()
            self.radio = None
