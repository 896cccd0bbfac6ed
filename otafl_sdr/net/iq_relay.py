"""A node's IQ plane (air zmq): where its GNU Radio ZeroMQ blocks bind and connect, and the CURVE relays
that carry IQ between processes.

GNU Radio's zeromq blocks cannot do CURVE, so they only ever see UNIX sockets (``ipc://``) inside their
own process; every hop between two processes is a CURVE relay with the nodes' own key pairs, the same keys
as the control plane:

* the sender's flowgraph is sealed (radio/iq_seal.py): it has no socket; it writes into an unnamed
  socketpair whose relay thread (:class:`~otafl_sdr.radio.iq_seal.PairRelay`) serves the burst on a CURVE
  server socket, its ZAP handler running and its keys set before the bind, that admits only the link's
  reader (the channel emulator for a client or the jammer, the receiver for the channel):
  ``ipc://FOLDER/NAME.ROUND.ATTEMPT`` on one host (``otafl-sdr run --air zmq``; no TCP IQ port at all),
  ``tcp://ADDR:PORT`` across hosts (``--iq-endpoint``). (GNU Radio's push_sink, which binds and takes no
  socket option, was reachable by any same-uid process between its bind and its unlinking: the leak this
  replaced, tests/net/test_iq_socket_birth.py);
* the reader's relay connects with its own key pair and the sender's public key (so it cannot be talked
  to by anyone else; :class:`Relay`: ``zmq.proxy`` on its own thread, which releases the GIL) and hands
  the stream to its pull_source on an ipc socket that accepts only its own process
  (``ZMQ_IPC_FILTER_PID``, checked by libzmq with SO_PEERCRED, set before the bind).

A process of the run's own uid that holds none of the run's keys thus finds, in the folder, only CURVE
sockets it cannot handshake with and pid-filtered sockets that refuse it; the nodes are non-dumpable
(radio/zmq_channel.private_process), so it cannot open their /proc/PID/fd either. One that can ptrace
the nodes (CAP_SYS_PTRACE, e.g. root) or read the keys folder is outside this threat model. Without keys
(``net.insecure``) a local run's blocks talk directly over the 0700 folder (only other uids are kept out).

Each burst is tagged (radio/zmq_channel.burst_tag) by both ends of its link with the link's key,
X25519(own secret, peer public) of the two nodes' CURVE keys hashed with the link's name: the server,
which holds neither secret, compares the two tags (net/iq_guard.py) and learns nothing else from them.
Without keys (``net.insecure``) tags are empty and only the sample counts are compared."""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import shutil
import threading

import zmq

from otafl_sdr.errors import UserError
from otafl_sdr.net.security import KeyStore, is_loopback
from otafl_sdr.radio.iq_seal import PairRelay, Sealed, own_process_only


READER = {"client": "channel", "jammer": "channel", "channel": "receiver"}   # who reads a role's IQ
LINGER_MS = 0                 # a closed relay drops what it still holds (a burst of a finished attempt)
RECONNECT_MS = 10             # a reader's relay retries the sender's socket this often until it is bound


def link_name(sender: str, reader: str) -> str:
    return f"{sender}>{reader}"


def reader_of(name: str) -> str:
    return READER["client" if name.startswith("client-") else name]


def x25519(k: bytes, u: bytes) -> bytes:
    """X25519(k, u) of RFC 7748: the Diffie-Hellman function of the Curve25519 keys CURVE uses
    (``cryptography``'s X25519, OpenSSL underneath); run once per link and node."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
    return X25519PrivateKey.from_private_bytes(bytes(k)).exchange(X25519PublicKey.from_public_bytes(bytes(u)))


class _OnlyKey:
    """ZAP credentials provider: admits exactly one CURVE public key (z85)."""

    def __init__(self, z85: bytes):
        self.z85 = z85

    def callback(self, domain, key) -> bool:
        return hmac.compare_digest(bytes(key), self.z85)


class Relay:
    """A reader's relay: ``zmq.proxy(front, back)`` on a daemon thread, in its own context (front: the
    CURVE client of the sender's socket, back: this process's own ipc socket). ``close()`` ends it:
    terminating the context wakes the proxy."""

    def __init__(self, ctx: zmq.Context, front: zmq.Socket, back: zmq.Socket):
        self.ctx, self.front, self.back = ctx, front, back
        self.thread = threading.Thread(target=self._run, name="iq-relay", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            zmq.proxy(self.front, self.back)
        except zmq.ZMQError:
            pass                                   # the context was terminated: close()
        finally:
            self.front.close(LINGER_MS)
            self.back.close(LINGER_MS)

    def close(self) -> None:
        if self.ctx is None:
            return
        self.ctx.term()
        self.thread.join(5.0)
        self.ctx = None


class LocalEndpoint:
    """An endpoint for a GNU Radio block (an ipc socket to connect to, or a sealed push target), and what to
    close with it (a relay, socket files: the endpoint's when ``owned``, and ``served``, the relay's ipc
    CURVE socket, which libzmq leaves behind)."""

    def __init__(self, endpoint: str, relay: Relay | PairRelay | None = None, owned: bool = False, served: str = ""):
        self.endpoint, self.relay, self.owned, self.served = endpoint, relay, owned, served

    def close(self) -> None:
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        for ep, mine in ((self.endpoint, self.owned), (self.served, True)):
            if mine and ep.startswith("ipc://") and os.path.exists(ep[6:]):
                os.unlink(ep[6:])


class IqPlane:
    """The IQ plane of node ``name`` (role ``role``). ``endpoint``: where its IQ can be read (ipc://...,
    or tcp://ADDR:PORT through a CURVE relay; None for the receiver); ``folder``: its private ipc folder
    (made, and removed at close, when not given); ``keys``: its KeyStore (None: no CURVE, no tags)."""

    def __init__(self, name: str, role: str, endpoint: str | None, folder: str | None, keys: KeyStore | None,
                 run_id: str = ""):
        from otafl_sdr.radio.zmq_channel import ipc_folder, private_process
        private_process()                     # no same-uid process opens our /proc/PID/fd (socketpairs, memfds)
        self.name, self.role, self.keys, self.run_id = name, role, keys, run_id
        self.endpoint = endpoint
        self._own_folder = folder is None
        self.folder = folder or ipc_folder(f"otafl-iq-{role}-")
        check_private(self.folder)
        if endpoint is not None:
            check_endpoint(endpoint, keys is not None)
        self._keys: dict[str, bytes | None] = {}

    # ------------------------------------------------------------------ tags
    def link_key(self, peer: str) -> bytes | None:
        """The key of the link between this node and ``peer`` (both compute it; the server cannot)."""
        if self.keys is None:
            return None
        if peer not in self._keys:
            from zmq.utils import z85
            shared = x25519(z85.decode(self.keys.pair(self.name)[1]), z85.decode(self.keys.public(peer)))
            info = "otafl-iq-link|" + "|".join(sorted((self.name, peer)))
            self._keys[peer] = hmac.new(shared, info.encode(), hashlib.sha256).digest()
        return self._keys[peer]

    def tag(self, sender: str, reader: str, round_index: int, attempt: int, samples) -> str:
        from otafl_sdr.radio.zmq_channel import burst_tag
        peer = reader if sender == self.name else sender
        return burst_tag(self.link_key(peer), f"{self.run_id}|{link_name(sender, reader)}|{round_index}|{attempt}", samples)

    # ------------------------------------------------------------------ endpoints
    def push(self, round_index: int, attempt: int) -> LocalEndpoint:
        """Where this node's pusher sends the burst of round ``round_index``, attempt ``attempt``: a sealed
        target (radio/iq_seal.Sealed) whose relay serves it by CURVE on this node's endpoint, with the
        attempt appended to an ipc one (so that a reader of a later attempt can never be handed what is left
        of an earlier one); the ZAP handler runs and the socket's keys are set before its bind, and the
        relay lives as long as the burst. Without keys: the attempt's ipc endpoint itself (a push_sink)."""
        if self.endpoint is None:
            raise UserError(f"{self.name} has no IQ endpoint")
        served = self.endpoint
        if served.startswith("ipc://"):
            served = attempt_endpoint(served, round_index, attempt)
            if self.keys is None:
                return LocalEndpoint(served, owned=True)
        ctx = zmq.Context()
        from zmq.auth.thread import ThreadAuthenticator
        auth = ThreadAuthenticator(ctx, log=logging.getLogger("otafl.net.auth"))
        try:
            auth.start()
            auth.configure_curve_callback(domain="*", credentials_provider=_OnlyKey(self.keys.public(reader_of(self.name))))
            back = ctx.socket(zmq.PUSH)
            public, secret = self.keys.pair(self.name)
            back.curve_publickey, back.curve_secretkey, back.curve_server = public, secret, True
            back.bind(served)
        except Exception:
            auth.stop()
            ctx.destroy(0)
            raise
        relay = PairRelay(ctx, back, auth)
        return LocalEndpoint(Sealed(served, relay), relay, served=served)

    def source(self, sender: str, endpoint: str, round_index: int, attempt: int) -> LocalEndpoint:
        """Where a pull_source connects to read ``sender``'s burst of (``round_index``, ``attempt``) at ``endpoint``:
        a fresh ipc endpoint that admits only this process (ZMQ_IPC_FILTER_PID), fed by a CURVE client
        relay that trusts only ``sender``'s public key (without keys: the attempt's ipc endpoint)."""
        from otafl_sdr.radio.zmq_channel import ipc_endpoint
        if endpoint.startswith("ipc://"):
            endpoint = attempt_endpoint(endpoint, round_index, attempt)
            if self.keys is None:
                return LocalEndpoint(endpoint)
        check_endpoint(endpoint, self.keys is not None)
        local = ipc_endpoint(self.folder)
        ctx = zmq.Context()
        try:
            front = ctx.socket(zmq.PULL)
            back = ctx.socket(zmq.PUSH)
            public, secret = self.keys.pair(self.name)
            front.curve_publickey, front.curve_secretkey = public, secret
            front.curve_serverkey = self.keys.public(sender)
            front.reconnect_ivl = RECONNECT_MS       # the sender's relay may bind a moment later
            front.connect(endpoint)
            own_process_only(back)
            back.bind(local)
        except Exception:
            ctx.destroy(0)
            raise
        return LocalEndpoint(local, Relay(ctx, front, back), owned=True)

    def close(self) -> None:
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def attempt_endpoint(endpoint: str, round_index: int, attempt: int) -> str:
    """ipc://PATH -> ipc://PATH.ROUND.ATTEMPT: one socket per burst."""
    return f"{endpoint}.{int(round_index)}.{int(attempt)}"


def check_private(folder: str) -> None:
    """The ipc folder must be a directory only its owner can enter (0700 or stricter)."""
    try:
        st = os.stat(folder)
    except OSError as e:
        raise UserError(f"IQ folder '{folder}': {e.strerror}") from None
    if not os.path.isdir(folder) or st.st_mode & 0o077:
        raise UserError(f"IQ folder '{folder}' must be a directory of mode 0700 (it is "
                        f"{oct(st.st_mode & 0o777)}): its sockets carry the clients' clean signals")
    if st.st_uid != os.getuid():
        raise UserError(f"IQ folder '{folder}' belongs to another user")


def check_endpoint(endpoint: str, curve: bool) -> None:
    """ipc://PATH, or tcp://HOST:PORT with CURVE keys (the relay); anything else is refused."""
    if endpoint.startswith("ipc://") and len(endpoint) > 6:
        return
    if endpoint.startswith("tcp://"):
        if not curve:
            host = endpoint[6:].rsplit(":", 1)[0]
            where = "even on loopback, any local process could read it" if is_loopback(host.strip("[]")) else \
                "it would cross the network in the clear"
            raise UserError(f"IQ endpoint {endpoint}: IQ over TCP travels only through the CURVE relay "
                            f"({where}); give --keys DIR, or keep every node on this host (ipc)")
        return
    raise UserError(f"IQ endpoint '{endpoint}' must be ipc://PATH or tcp://HOST:PORT")
