"""Sockets of the control plane: the server's ROUTER (:class:`ServerHub`) and a node's DEALER
(:class:`NodeLink`). Both speak :mod:`otafl_sdr.net.messages`; a message that fails ``decode`` is logged
and dropped, never raised into the node's loop.

The hub keeps the roster: who registered, from which key, when each node was last heard. A node is
*alive* while it has been heard within ``dead_after`` seconds (heartbeats every ``heartbeat_s``); the
hub drains its queue before judging, so a server busy evaluating never declares a node dead that in
fact kept beating."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import zmq

from otafl_sdr.errors import UserError
from otafl_sdr.net.messages import DEFAULT_LIMITS, Limits, MalformedMessage, Message, decode, encode
from otafl_sdr.net.security import SERVER, KeyStore

log = logging.getLogger("otafl.net")

ROLES = ("client", "jammer", "receiver", "channel")


def role_of(name: str) -> str | None:
    """'client-3' -> 'client', 'receiver' -> 'receiver'; None for a name no role owns."""
    if name in ("jammer", "receiver", "channel"):
        return name
    if name.startswith("client-") and name[7:].isdigit() and str(int(name[7:])) == name[7:]:
        return "client"
    return None


def _zmtp_heartbeats(sock, ivl_ms: int = 1000, timeout_ms: int = 10000) -> None:
    """Transport-level pings (answered by libzmq's I/O thread, whatever Python is doing): a connection
    whose peer is gone is closed after ``timeout_ms``."""
    sock.setsockopt(zmq.HEARTBEAT_IVL, ivl_ms)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, timeout_ms)
    sock.setsockopt(zmq.HEARTBEAT_TTL, timeout_ms)


@dataclass
class Peer:
    name: str
    role: str
    pid: int
    iq_endpoint: str | None
    air: str
    last_seen: float
    registrations: int = 1
    ready: bool = False
    notes: list = field(default_factory=list)


class ServerHub:
    """ROUTER socket bound at ``tcp://bind:port`` (port 0: a free one), CURVE when ``keys`` is given.

    ``roster``: the node names allowed to register. ``welcome``: fields of the welcome message.
    ``poll(timeout)`` returns the (name, Message) pairs other than register / heartbeat."""

    def __init__(self, bind: str, port: int, roster: list[str], welcome: dict, keys: KeyStore | None,
                 heartbeat_s: float, dead_after: float, limits: Limits = DEFAULT_LIMITS):
        self.ctx = zmq.Context()
        self.limits = limits
        self.roster = set(roster)
        self.welcome = welcome
        self.heartbeat_s = heartbeat_s
        self.dead_after = dead_after
        self.peers: dict[str, Peer] = {}
        self.dropped = 0                              # malformed / unauthenticated messages dropped
        self.auth = None
        self.owners: dict[str, str] | None = None
        sock = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 500)
        # Without CURVE (loopback), a restarted node takes over its own name at once. With CURVE, a name
        # stays with the connection that holds it (so a keyed peer cannot take over another's routing);
        # ZMTP heartbeats clear the connection of a node that died, so its restart gets the name back.
        sock.setsockopt(zmq.ROUTER_HANDOVER, 0 if keys is not None else 1)
        _zmtp_heartbeats(sock)
        sock.setsockopt(zmq.MAXMSGSIZE, limits.message_bytes + 4096)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        if keys is not None:
            from zmq.auth.thread import ThreadAuthenticator
            self.auth = ThreadAuthenticator(self.ctx, log=logging.getLogger("otafl.net.auth"))
            self.auth.start()
            self.auth.configure_curve(domain="*", location=str(keys.public_dir))
            public, secret = keys.pair(SERVER)
            sock.curve_publickey = public
            sock.curve_secretkey = secret
            sock.curve_server = True
            self.owners = keys.owners()
        try:
            if port:
                sock.bind(f"tcp://{bind}:{port}")
            else:
                port = sock.bind_to_random_port(f"tcp://{bind}")
        except zmq.ZMQError as e:
            sock.close(0)
            self.close()
            raise UserError(f"cannot bind the control plane at tcp://{bind}:{port}: {e}") from None
        self.sock = sock
        self.port = port
        self.endpoint = f"tcp://{bind}:{port}"
        self._last_beat = 0.0
        self.poller = zmq.Poller()
        self.poller.register(sock, zmq.POLLIN)

    # ------------------------------------------------------------------------------------------
    def send(self, name: str, mtype: str, fields: dict | None = None, arrays: dict | None = None) -> None:
        frames = encode(Message(mtype, fields or {}, arrays or {}), sender=SERVER, limits=self.limits)
        try:
            self.sock.send_multipart([name.encode()] + frames, copy=False)
        except zmq.ZMQError as e:                    # pragma: no cover - unroutable peers are dropped silently
            log.warning("send %s to %s failed: %s", mtype, name, e)

    def broadcast(self, names, mtype: str, fields: dict | None = None, arrays: dict | None = None) -> None:
        """Encode once, send to every name."""
        frames = encode(Message(mtype, fields or {}, arrays or {}), sender=SERVER, limits=self.limits)
        for n in names:
            self.sock.send_multipart([n.encode()] + frames, copy=False)

    def alive(self, name: str, now: float | None = None) -> bool:
        p = self.peers.get(name)
        return p is not None and (now or time.time()) - p.last_seen <= self.dead_after

    def ready(self, name: str) -> bool:
        """Alive and done with its setup since it last registered."""
        return self.alive(name) and self.peers[name].ready

    def live(self, names) -> list[str]:
        now = time.time()
        return [n for n in names if self.alive(n, now)]

    # ------------------------------------------------------------------------------------------
    def poll(self, timeout: float) -> list[tuple[str, Message]]:
        """Wait up to ``timeout`` s for traffic, then drain the queue. Heartbeats go out on the way."""
        out: list[tuple[str, Message]] = []
        end = time.time() + max(0.0, timeout)
        while True:
            self._beat()
            wait = max(0.0, min(end - time.time(), self.heartbeat_s))
            if self.poller.poll(int(wait * 1000) if not out else 0):
                while self.sock.poll(0, zmq.POLLIN):
                    item = self._recv_one()
                    if item is not None:
                        out.append(item)
            if out or time.time() >= end:
                return out

    def _beat(self) -> None:
        now = time.time()
        if now - self._last_beat >= self.heartbeat_s:
            self._last_beat = now
            names = self.live(self.peers)
            if names:
                self.broadcast(names, "heartbeat")

    def _recv_one(self):
        frames = self.sock.recv_multipart(copy=False)
        ident = frames[0].bytes
        try:
            name = ident.decode("ascii")
        except UnicodeDecodeError:
            name = repr(ident[:32])
        if len(frames) < 2:
            return self._drop(name, "no header frame")
        if self.owners is not None:                  # CURVE: the key must belong to the claimed name
            user = frames[1].get("User-Id")
            if self.owners.get(user) != name:
                return self._drop(name, f"its CURVE key belongs to {self.owners.get(user)!r}, not to it")
        try:
            msg = decode(frames[1:], self.limits)
        except MalformedMessage as e:
            return self._drop(name, str(e))
        if msg.sender != name:
            return self._drop(name, f"claims to be {msg.sender!r}")
        now = time.time()
        if msg.type == "register":
            self._register(name, msg, now)
            return None
        peer = self.peers.get(name)
        if peer is None:
            if name in self.roster:                  # e.g. this server restarted under running nodes
                self.send(name, "reregister")
            return self._drop(name, f"'{msg.type}' before registering")
        peer.last_seen = now
        if msg.type == "heartbeat":
            return None
        if msg.type == "ready":
            peer.ready = True
            log.info("%s ready", name)
            return None
        return name, msg

    def _drop(self, name: str, why: str):
        """Count every dropped message; log the first 10, then one line per 1,000 (a local process must not
        be able to grow the log without bound)."""
        self.dropped += 1
        if self.dropped <= 10:
            log.warning("dropped a message from %s: %s", name, why)
        elif self.dropped % 1000 == 0:
            log.warning("dropped %d messages so far (latest from %s: %s)", self.dropped, name, why)
        return None

    def _register(self, name: str, msg: Message, now: float) -> None:
        role = role_of(name)
        if name not in self.roster or role != msg["role"] or msg["node"] != name:
            self.send(name, "refused", {"reason": f"'{name}' (role {msg['role']}) is not a node of this run"})
            log.warning("refused registration of %s (role %s)", name, msg["role"])
            return
        air = getattr(self, "air", None)
        if air is not None and msg["air"] != air:
            self.send(name, "refused", {"reason": f"this run's air is '{air}' but {name} was started with --air "
                                                  f"{msg['air']}; start it with --air {air}"})
            log.warning("refused registration of %s (air %s, the run's is %s)", name, msg["air"], air)
            return
        old = self.peers.get(name)
        self.peers[name] = Peer(name, role, msg["pid"], msg["iq_endpoint"], msg["air"], now,
                                registrations=(old.registrations + 1) if old else 1)
        log.info("%s %s (pid %d, iq %s)", "re-registered" if old else "registered", name, msg["pid"],
                 msg["iq_endpoint"])
        self.send(name, "welcome", self.welcome)

    def close(self) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None:
            sock.close(linger=200)
            self.sock = None
        if self.auth is not None:
            self.auth.stop()
            self.auth = None
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None


class NodeLink:
    """A node's DEALER socket to the server (routing id = node name; CURVE client when keyed)."""

    def __init__(self, server: str, name: str, keys: KeyStore | None, limits: Limits = DEFAULT_LIMITS):
        self.name = name
        self.limits = limits
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, name.encode())
        sock.setsockopt(zmq.LINGER, 1000)
        _zmtp_heartbeats(sock)
        sock.setsockopt(zmq.MAXMSGSIZE, limits.message_bytes + 4096)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        if keys is not None:
            public, secret = keys.pair(name)
            sock.curve_publickey = public
            sock.curve_secretkey = secret
            sock.curve_serverkey = keys.public(SERVER)
        sock.connect(server)
        self.sock = sock
        self.dropped = 0
        self.last_heard = time.time()

    def send(self, mtype: str, fields: dict | None = None, arrays: dict | None = None) -> bool:
        """Queue a message for the server; False (logged) when there is no connection to queue it on
        (the server is down, or refused our handshake). Never blocks."""
        frames = encode(Message(mtype, fields or {}, arrays or {}), sender=self.name, limits=self.limits)
        try:
            self.sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
            return True
        except zmq.Again:
            if mtype != "register":
                log.warning("%s: no connection to the server; '%s' not sent", self.name, mtype)
            return False

    def recv(self, timeout: float) -> list[Message]:
        """Messages from the server that arrived within ``timeout`` s (malformed ones logged and dropped)."""
        out = []
        if self.sock.poll(int(max(0.0, timeout) * 1000), zmq.POLLIN):
            while self.sock.poll(0, zmq.POLLIN):
                frames = self.sock.recv_multipart(copy=False)
                try:
                    msg = decode(frames, self.limits)
                except MalformedMessage as e:
                    self.dropped += 1
                    log.warning("%s dropped a message: %s", self.name, e)
                    continue
                if msg.sender != SERVER:
                    self.dropped += 1
                    log.warning("%s dropped a message claiming to be from %r", self.name, msg.sender)
                    continue
                self.last_heard = time.time()
                out.append(msg)
        return out

    def register(self, role: str, iq_endpoint: str | None, air: str, timeout: float) -> Message:
        """Send 'register' until 'welcome' (or 'refused') arrives; UserError after ``timeout`` s."""
        end = time.time() + timeout
        fields = {"role": role, "node": self.name, "pid": os.getpid(), "iq_endpoint": iq_endpoint, "air": air}
        next_try = 0.0
        while time.time() < end:
            if time.time() >= next_try:
                next_try = time.time() + (2.0 if self.send("register", fields) else 0.2)
            for msg in self.recv(0.2):
                if msg.type == "welcome":
                    return msg
                if msg.type == "refused":
                    raise UserError(f"server refused {self.name}: {msg['reason']}")
        raise UserError(f"{self.name}: no answer from the server within {timeout:g} s (is it running, and "
                        f"do the CURVE keys match? an unauthenticated node is refused silently)")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(linger=500)
            self.sock = None
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None
