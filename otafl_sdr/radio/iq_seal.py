"""A sender's IQ stream that no other process can reach, not even for a microsecond: the `zmq` air's sealed
push (the testbed's keyed nodes, net/iq_relay.py, and the in-process zmq air, radio/zmq_air.py).

GNU Radio 3.10's zeromq sinks (push_sink, pub_sink, rep_sink) always bind, and take no socket option: their
ipc socket file can be connected to by any process of the same uid from the bind on, and a PUSH socket
round-robins its messages over every peer connected by then. Unlinking the file right after the bind
(the former ``hide``) left that window open; a loaded host stretched it, and a key-less thief polling the
folder took whole bursts (CI: 2,048 samples from a local testbed run; tests/net/test_iq_socket_birth.py
connects a thief at every socket's birth).

A sealed sender's flowgraph has no socket at all: a native ``blocks.file_descriptor_sink`` writes its
complex64 stream into one end of an unnamed socketpair (no path, no abstract name, nothing in
/proc/net/unix another process can connect to; the process is non-dumpable, radio/zmq_channel.
private_process, so its /proc/PID/fd is closed to others too). A thread of this process
(:class:`PairRelay`) reads the other end and sends whole samples on ``out``: a ZeroMQ PUSH socket whose
owner secured it before binding it, a CURVE server admitting one key (net/iq_relay.py) or an ipc socket
admitting only this process (:func:`own_process_only`, :meth:`Sealed.own_process`)."""
from __future__ import annotations

import os
import socket
import threading

import zmq

from otafl_sdr.errors import UserError

ITEM = 8                      # bytes of one complex64 sample: the unit of every message sent on ``out``
CHUNK = 1 << 16               # bytes read from the socketpair at a time
LINGER_MS = 0                 # a closed relay drops what it still holds (a burst of a finished attempt)


def own_process_only(sock: zmq.Socket) -> None:
    """An ipc socket (set before its bind) that accepts only peers of this process: libzmq checks each
    connection's SO_PEERCRED pid (ZMQ_IPC_FILTER_PID) and closes any other before a byte is exchanged."""
    try:
        sock.setsockopt(zmq.IPC_FILTER_PID, os.getpid())
    except (zmq.ZMQError, AttributeError) as e:
        raise UserError(f"this libzmq cannot restrict an ipc socket to its own process (ZMQ_IPC_FILTER_PID: "
                        f"{e}); the IQ plane needs it") from None


class PairRelay:
    """What a sealed sender writes, read from its socketpair on a daemon thread and sent on ``out`` (a bound
    PUSH socket of ``ctx``, secured before its bind; ``auth``: its ZAP authenticator, stopped at close) as
    messages of whole complex64 samples. ``opener``: instead of ``ctx`` and ``out``, makes them (secured,
    bound) when the stream starts, so that an endpoint never used holds nothing. ``close()`` ends it
    (idempotent)."""

    def __init__(self, ctx: zmq.Context | None = None, out: zmq.Socket | None = None, auth=None, opener=None):
        self.ctx, self.out, self.auth, self.opener = ctx, out, auth, opener
        self.pair: socket.socket | None = None
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.closed = False

    def writer(self) -> int:
        """A fresh socketpair: starts the relay on one end and returns the other's file descriptor, to be
        owned (and closed) by the block that writes into it."""
        if self.thread is not None or self.closed:
            raise RuntimeError("a sealed endpoint carries one stream")
        if self.ctx is None:
            self.ctx, self.out = self.opener()
        self.pair, w = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.thread = threading.Thread(target=self._run, name="iq-seal", daemon=True)
        self.thread.start()
        return w.detach()

    def stop_reading(self) -> None:
        """Stop taking bytes (a writer blocked on a full socketpair gets EPIPE at once: its flowgraph can stop)."""
        if self.pair is not None:
            try:
                self.pair.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _run(self) -> None:
        buf = bytearray(CHUNK)
        carry = b""
        try:
            while True:
                k = self.pair.recv_into(buf)
                if k == 0:                         # the writer closed, or stop_reading()
                    break
                data = carry + bytes(buf[:k])
                whole = len(data) - len(data) % ITEM
                carry = data[whole:]
                if whole:
                    self.out.send(data[:whole], copy=True)
            self.done.wait()                       # keep ``out`` open until close(): its peer may still read
        except (OSError, zmq.ZMQError):
            pass                                   # close(): the pair shut down, the context terminated
        finally:
            self.out.close(LINGER_MS)              # (the pair is closed by close(), after the join)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.ctx is None:                       # never opened
            return
        self.done.set()
        self.stop_reading()
        if self.auth is not None:
            self.auth.stop()
        if self.thread is None:
            self.out.close(LINGER_MS)
        self.ctx.term()                            # wakes a send blocked on a peer that never came (ETERM)
        if self.thread is not None:
            self.thread.join(5.0)
        if self.pair is not None and not (self.thread is not None and self.thread.is_alive()):
            self.pair.close()


class Sealed(str):
    """A push target no other process can reach (module doc): the string is where ``relay.out`` is bound,
    i.e. where a reader connects. A pusher given one (radio/zmq_channel.push_stream) writes into the relay's
    socketpair; closing the pusher closes the relay."""

    def __new__(cls, endpoint: str, relay: PairRelay):
        self = super().__new__(cls, endpoint)
        self.relay = relay
        return self

    @classmethod
    def own_process(cls, endpoint: str) -> "Sealed":
        """Sealed onto an ipc ``endpoint`` that admits only this process (a reader in this process: the
        in-process zmq air's pull_sources), bound when the pusher starts."""
        def opener():
            ctx = zmq.Context()
            try:
                out = ctx.socket(zmq.PUSH)
                own_process_only(out)
                out.bind(endpoint)
            except BaseException:
                ctx.destroy(0)
                raise
            return ctx, out
        return cls(endpoint, PairRelay(opener=opener))
