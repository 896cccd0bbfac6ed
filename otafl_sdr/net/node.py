"""The loop every non-server node runs: register, take the run's config from the welcome, then answer
the server's messages while heartbeating.

Heavy work (training, flowgraphs, demodulation) runs on one worker thread, in order of arrival, so the
main thread keeps heartbeating and keeps reading messages (a 'drop' must reach a capture in progress).
A job returns the reply to send, or None. A malformed message is logged and dropped by the link; an
exception inside a job is logged, reported to the server as an 'error' message, and the node goes on.
The node exits 0 on 'shutdown' or SIGTERM/SIGINT, and 4 when the server has been silent for
``net.timeout_s`` (so no node outlives its server for long)."""
from __future__ import annotations

import logging
import queue
import signal
import threading
import time
import tomllib
import traceback
from concurrent.futures import Future, ThreadPoolExecutor

from otafl_sdr.config.schema import Config, apply_values
from otafl_sdr.errors import AirError, UserError
from otafl_sdr.net.faults import FaultPlan
from otafl_sdr.net.messages import Message
from otafl_sdr.net.security import KeyStore
from otafl_sdr.net.transport import NodeLink

log = logging.getLogger("otafl.net")

EXIT_OK = 0
EXIT_SERVER_LOST = 4
EXIT_SETUP_FAILED = 2
EXIT_OTHER_RUN = 6
HEARTBEAT_LATE = 3.0     # a heartbeat this many periods apart is logged: something stalled the process (GIL)


def parse_config(text: str) -> Config:
    """The server's resolved (already validated) config, without re-validating it here (validation
    imports every room's registry; the server did it)."""
    cfg = Config()
    apply_values(cfg, tomllib.loads(text))
    return cfg


class Node:
    """Base of the client, jammer, receiver and channel nodes. Subclasses set ``role`` and implement
    ``setup()`` (after the welcome; runs on the worker) and ``handle(msg)`` (main thread: returns a
    callable to queue on the worker, or None)."""

    role = "node"

    def __init__(self, name: str, server: str, air: str, keys_dir: str | None = None,
                 iq_endpoint: str | None = None, register_timeout: float = 60.0, device_args: str | None = None,
                 iq_dir: str | None = None):
        self.name = name
        self.server = server
        self.air = air
        self.keys = KeyStore(keys_dir) if keys_dir else None
        self.iq_endpoint = iq_endpoint
        self.iq = None                               # air zmq: the IQ plane (net/iq_relay.py)
        if air == "zmq":
            from otafl_sdr.net.iq_relay import IqPlane
            self.iq = IqPlane(name, self.role, iq_endpoint, iq_dir, self.keys)
        self.device_args = device_args               # air uhd: this host's radio address (else the config's)
        self.register_timeout = register_timeout
        self.faults = FaultPlan(name)
        self.cfg = None
        self._layouts: dict = {}                    # air zmq: the IQ plane's layout per payload size
        self.link: NodeLink | None = None
        self._stop = threading.Event()
        self._exit = EXIT_OK
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-work")
        self._pending: list[Future] = []
        self._outbox: queue.Queue = queue.Queue()   # replies from the worker, sent by the main thread
        self._fatal = False                          # setup failed: report and exit
        self._ready_sent = False

    # ------------------------------------------------------------------ for subclasses
    def setup(self) -> None:
        """Build what the role needs from ``self.cfg`` (runs on the worker thread)."""

    def handle(self, msg: Message):
        raise NotImplementedError

    def reply(self, mtype: str, fields: dict, arrays: dict | None = None) -> None:
        """Queue a message to the server (thread-safe; the main thread sends it)."""
        self._outbox.put((mtype, fields, arrays or {}))

    def close(self) -> None:
        """Release role resources (flowgraphs)."""

    def iq_report(self, sender: str, reader: str, round_index: int, attempt: int, side: str, samples: int, n: int,
                  x=None) -> None:
        """Report one end of an IQ link's burst to the server (net/iq_guard.py): ``samples`` of ``n``, and
        the tag of ``x`` (the samples themselves never leave)."""
        tag = self.iq.tag(sender, reader, round_index, attempt, x) if x is not None else ""
        self.reply("iq_report", {"round": round_index, "attempt": attempt, "link": f"{sender}>{reader}", "side": side,
                                 "samples": int(samples), "complete": int(samples) >= n, "tag": tag})

    def layout(self, dim: int):
        """The zmq IQ plane's layout (radio/zmq_channel.ZmqLayout) for payloads of ``dim`` reals; the
        newest one is kept."""
        from otafl_sdr.radio.zmq_channel import ZmqLayout
        if dim not in self._layouts:
            self._layouts = {dim: ZmqLayout(self.cfg, self.cfg.data.clients, dim)}
        return self._layouts[dim]

    # ------------------------------------------------------------------ the loop
    def _signal(self, signum, frame):
        log.info("%s: signal %d, stopping", self.name, signum)
        self._stop.set()

    def run(self) -> int:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._signal)
        self.link = NodeLink(self.server, self.name, self.keys)
        try:
            welcome = self.link.register(self.role, self.iq_endpoint, self.air, self.register_timeout)
            self.cfg = parse_config(welcome["config"])
            self.run_id = welcome["run_id"]
            if self.iq is not None:
                self.iq.run_id = self.run_id
            self.heartbeat_s = float(welcome["heartbeat_s"])
            self.timeout_s = float(welcome["timeout_s"])
            log.info("%s: registered with %s (run %s)", self.name, self.server, self.run_id)
            self._submit(self._setup)
            self._loop()
        finally:
            self._stop.set()
            self._pool.shutdown(wait=True, cancel_futures=True)
            try:
                self.close()
            finally:
                self.link.close()
                if self.iq is not None:
                    self.iq.close()
        return self._exit

    def _setup(self) -> None:
        try:
            self.setup()
        except Exception:
            self._fatal = True
            raise
        self.reply("ready", {})
        self._ready_sent = True

    def _register_fields(self) -> dict:
        import os
        return {"role": self.role, "node": self.name, "pid": os.getpid(), "iq_endpoint": self.iq_endpoint,
                "air": self.air}

    def _submit(self, fn) -> None:
        self._pending.append(self._pool.submit(fn))

    def _loop(self) -> None:
        last_beat = 0.0
        while not self._stop.is_set():
            now = time.time()
            if now - last_beat >= self.heartbeat_s:
                if last_beat and now - last_beat > HEARTBEAT_LATE * self.heartbeat_s:   # this process stalled
                    log.warning("%s: heartbeat %.1f s late (the process was stalled)", self.name,
                                now - last_beat - self.heartbeat_s)
                self.link.send("heartbeat")
                last_beat = now
            busy = bool(self._pending) or not self._outbox.empty()
            for msg in self.link.recv(0.005 if busy else min(0.2, self.heartbeat_s / 2)):
                if msg.type == "shutdown":
                    log.info("%s: shutdown (%s)", self.name, msg["reason"])
                    self._stop.set()
                    break
                if msg.type == "heartbeat":
                    continue
                if msg.type == "reregister":     # the server restarted: announce ourselves again
                    log.info("%s: the server asks us to register again", self.name)
                    self.link.send("register", self._register_fields())
                    continue
                if msg.type == "welcome":        # an answer to a re-sent register
                    if msg["run_id"] != self.run_id or parse_config(msg["config"]) != self.cfg:
                        log.error("%s: the server now runs another experiment (%s); exiting", self.name,
                                  msg["run_id"])
                        self._exit = EXIT_OTHER_RUN
                        return
                    if self._ready_sent:
                        self.link.send("ready")
                    continue
                try:
                    job = self.handle(msg)
                except Exception as e:  # noqa: BLE001 - a bad request must not take the node down
                    self._report(f"handling '{msg.type}' failed: {type(e).__name__}: {e}")
                    continue
                if job is not None:
                    self._submit(job)
            self._reap()
            while not self._outbox.empty():
                mtype, fields, arrays = self._outbox.get()
                self.link.send(mtype, fields, arrays)
            if self._fatal:
                log.error("%s: setup failed; exiting", self.name)
                self._exit = EXIT_SETUP_FAILED
                return
            if time.time() - self.link.last_heard > self.timeout_s:
                log.error("%s: the server has been silent for %.0f s; exiting", self.name, self.timeout_s)
                self._exit = EXIT_SERVER_LOST
                return

    def _reap(self) -> None:
        still = []
        for f in self._pending:
            if not f.done():
                still.append(f)
                continue
            e = f.exception()
            if e is not None:
                if isinstance(e, (UserError, AirError)):
                    self._report(f"{type(e).__name__}: {e}")
                else:
                    self._report("".join(traceback.format_exception(e)).strip())
        self._pending = still

    def _report(self, text: str) -> None:
        log.error("%s: %s", self.name, text)
        try:
            self.link.send("error", {"message": text[-4000:]})
        except Exception:  # noqa: BLE001 - reporting is best effort
            pass


class TransmitterNode(Node):
    """A node that transmits (client, jammer): its IQ pusher on the zmq air (radio/zmq_channel.py) or its
    USRP on the uhd air (net/uhd_port.py), released after each burst and on close."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.pusher = None
        self.port = None                      # air uhd: this node's USRP

    def release_pusher(self) -> None:
        if self.pusher is not None:
            from otafl_sdr.radio.zmq_channel import release
            release(self.pusher)
            local = getattr(self.pusher, "local", None)
            if local is not None:
                local.close()
            self.pusher = None

    def push_burst(self, start, round_index: int, attempt: int, cancelled) -> bool:
        """Push one burst: ``start(endpoint, tap)`` builds the pusher on this node's IQ endpoint (or the
        CURVE relay's ipc side); waits until ZeroMQ took it, then reports the link's 'sent' end."""
        import time
        from otafl_sdr.net.iq_relay import reader_of
        local = self.iq.push(round_index, attempt)
        try:
            self.pusher = start(local.endpoint, self.iq.keys is not None)
        except BaseException:
            local.close()
            raise
        self.pusher.local = local
        deadline = time.time() + self.timeout_s
        ok = self.pusher.wait_sent(deadline, cancelled=cancelled)
        if cancelled():
            return ok
        n, pushed = self.pusher.n, int(self.pusher.sink.nitems_read(0))
        x = self.pusher.samples(deadline if ok else time.time() + 0.5)      # the whole burst, for its tag
        self.iq_report(self.name, reader_of(self.name), round_index, attempt, "sent", pushed, n, x)
        return ok

    def close(self) -> None:
        self.release_pusher()
        if self.port is not None:
            self.port.close()
