"""IQ between processes over ZeroMQ (readers: GNU Radio's ``zeromq.pull_source``, which connects; senders:
a sealed pusher, radio/iq_seal.py, or with ``net.insecure`` a ``zeromq.push_sink``, which binds): the
pieces of the `zmq` air, used by the testbed's node processes and by the in-process
:class:`~otafl_sdr.radio.zmq_air.ZmqAir` alike.

    client i:  frame symbols -> ClientTx (RRC, pre-compensation) -> pusher(..client i)
    jammer:    JammerTx (gated CN(0,2) x alpha_cj) -> pusher(..jammer)
    channel:   pull_source(client i) -> head(n) -> file_sink      (capture, one branch per stream)
               file_source x (K+1) -> LoopbackChannel (h_i, offsets, sum, jammer, AWGN) -> pusher(out)
    receiver:  pull_source(out) -> head(n) -> file_sink  -> Modem.demodulate -> unpack / alpha_u

Every stream of a round has the same length (:attr:`ZmqLayout.n_samples`), so sample k of every
client lands on sample k of the sum, as in the loopback air's single flowgraph. The geometry, offsets and
per-round seeds are the loopback air's (``LoopbackAir.offsets`` and the round generator
``seeding.rng(seed, "noise", it, attempt)``), derived independently by every node: with the loopback
defaults the zmq air delivers the same samples as the loopback air.

A pull source never ends by itself: a capture stops its flowgraph once every branch holds its samples,
a branch is dropped, or the deadline passes. A push flowgraph ends once ZeroMQ has taken every sample
(which needs a connected peer); keep the returned object until the peer has pulled (closing it closes
the socket and may discard what is still queued).

GNU Radio's ZeroMQ blocks cannot do CURVE, so their sockets are UNIX sockets (``ipc://``) in a private
0700 folder (:func:`ipc_folder`, :func:`ipc_endpoint`: unguessable names); a hop between processes goes
through the nodes' CURVE relays (net/iq_relay.py). Every burst carries a tag (:func:`burst_tag`, an HMAC
the two ends of a link compute with a key the server does not hold): a pusher can keep a copy of what it
pushed (``tap=True``), a capture counts what each branch delivered (``Capture.counts``).

Against another process of the same uid (which the 0700 folder does not stop), holding no key:

* a pusher given a :class:`~otafl_sdr.radio.iq_seal.Sealed` endpoint has no socket at all: its flowgraph
  writes into an unnamed socketpair that a relay of this process reads and sends on a ZeroMQ socket secured
  before its bind (radio/iq_seal.py). A push_sink would bind a socket file any same-uid process can
  connect to from the bind on (GNU Radio's sinks take no socket option): only ``net.insecure`` runs, whose
  folder keeps out other uids only, use one;
* staging files (taps, captures, the channel's input) are memfds (:class:`Scratch`), opened by GNU Radio
  at ``/proc/self/fd/N``: they have no name in any folder;
* :func:`private_process` makes the process non-dumpable (``PR_SET_DUMPABLE`` 0, as ssh-agent does), so a
  same-uid process can neither open its ``/proc/PID/fd/N`` nor ptrace it.

A process that can ptrace ours anyway (CAP_SYS_PTRACE, e.g. root) can read its memory: outside this
threat model."""
from __future__ import annotations

import ctypes
import hashlib
import hmac
import os
import secrets
import tempfile
import time

import numpy as np
from gnuradio import blocks, gr, zeromq

from otafl_sdr import seeding
from otafl_sdr.noise_source import entropy_seed
from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.radio.burst_blocks import C64, ClientTx, JammerTx, burst_source
from otafl_sdr.radio.iq_seal import Sealed
from otafl_sdr.radio.loopback_air import LoopbackAir
from otafl_sdr.radio.loopback_channel import LoopbackChannel

ZMQ_TIMEOUT_MS = 100          # poll timeout inside the zeromq blocks
POLL_S = 0.005                # how often a capture checks its branches


class ZmqLayout:
    """Per-run geometry of the zmq air: the loopback air's own (``LoopbackAir.geometry`` computes it,
    including calibrated offsets when ``air.csi = calibrated``), for K clients and d reals.

    Attributes: ``modem``; ``n_sym`` payload symbols; ``len_sym`` symbol-rate stream length;
    ``n_samples`` samples per stream (every client, the jammer and the channel output); ``offset`` where
    the receiver's demodulator starts reading; ``off`` per-client offsets; ``start`` (K,) samples each
    client waits (pre-compensating its known delay); ``tx_cfo`` (K,) the carrier offset each client
    pre-compensates; ``mask`` the jammer's gate; ``nominal`` the compensated arrival offset."""

    def __init__(self, cfg, clients: int, dim: int):
        lb_air = LoopbackAir(cfg)
        self.cfg = cfg
        self.lb = cfg.loopback
        self.K = int(clients)
        self.dim = int(dim)
        self.modem = m = lb_air.modem
        self.n_sym = n_sym = symbols_for(dim)
        g = lb_air.geometry(self.K, n_sym)
        self.off, self.nominal, self.lead_sym, self.len_sym = g["off"], g["nominal"], g["lead_sym"], g["len_sym"]
        self.start, self.tx_cfo = g["start"], g["tx_cfo"]
        self.layout = lay = m.layout(n_sym)
        self.n_samples = self.len_sym * m.sps
        self.with_cfo = bool(np.any(self.tx_cfo != 0))
        self.with_delay = bool(np.any(self.start != 0))
        mask = np.zeros(self.len_sym)
        mask[self.lead_sym:self.lead_sym + lay.n_frame] = m.jammer_mask(n_sym)
        self.mask = mask
        self.offset = self.lead_sym * m.sps + self.nominal - m.guard

    def round_draws(self, round_index: int, attempt: int) -> dict:
        """What the round's generator gives, in the loopback air's order: residual phases (K,) (an
        emulated impairment, seeded from the run), then the seeds of the thermal noise, the phase noise
        and the jammer: protective noise, drawn from OS entropy at the node that uses it
        (noise_source.py), never from the run seed the server holds."""
        rng = seeding.rng(self.cfg.run.seed, "noise", round_index, attempt)
        return self.draws_from(rng, secret=True)

    def draws_from(self, rng: np.random.Generator, secret: bool = True) -> dict:
        rp = self.lb.residual_phase
        res_phase = rng.normal(0.0, rp, self.K) if rp else np.zeros(self.K)
        seeds = rng.integers(1, 2**31 - 1, 3)
        if secret:
            seeds = [entropy_seed() for _ in range(3)]
        return {"res_phase": res_phase, "noise_seed": int(seeds[0]), "phase_seed": int(seeds[1]),
                "jammer_seed": int(seeds[2])}

    def client_symbols(self, alpha_i: complex, payload_i: np.ndarray, ref_gain_i: complex) -> np.ndarray:
        """Client i's symbol-rate stream (len_sym,): silence, the frame of s(u_i) with the reference x
        ref_gain_i / alpha_i, silence. Its ClientTx then multiplies by alpha_i (eq. 10 of paper 000), as
        in the loopback air."""
        stream = np.zeros(self.len_sym, dtype=np.complex64)
        frame = stream[self.lead_sym:self.lead_sym + self.layout.n_frame]
        self.layout.write_reals(frame, np.asarray(payload_i, dtype=np.float64), complex(ref_gain_i) / complex(alpha_i))
        return stream

    def client_scale(self, i: int, alpha_i: complex, draws: dict) -> complex:
        """Client i's transmit factor: alpha_i times its own phase pre-compensation (+ residual error)."""
        return complex(alpha_i * np.exp(1j * (draws["res_phase"][i] - self.off["phase"][i])))

    def channel_gains(self, h: np.ndarray) -> np.ndarray:
        """What the channel applies to client i: h_i times its oscillator phase."""
        return np.asarray(h) * np.exp(1j * self.off["phase"])


# ---------------------------------------------------------------------------------------------
IPC_PATH_MAX = 92             # a UNIX socket's path holds at most 107 bytes (room for '.ROUND.ATTEMPT')


def ipc_folder(prefix: str = "otafl-iq-") -> str:
    """A fresh private folder (mode 0700, random name) for IQ sockets: under $TMPDIR, or /tmp when
    $TMPDIR's path leaves no room for a socket name."""
    base = tempfile.gettempdir()
    if len(base) > IPC_PATH_MAX - 60:
        base = "/tmp"
    d = tempfile.mkdtemp(prefix=prefix, dir=base)
    os.chmod(d, 0o700)
    return d


def ipc_endpoint(folder: str) -> str:
    """An unguessable UNIX-socket endpoint inside ``folder`` (128 random bits in its name)."""
    ep = f"ipc://{os.path.join(folder, secrets.token_hex(16))}"
    if len(ep) - 6 > IPC_PATH_MAX:
        raise ValueError(f"IQ folder '{folder}' is too long a path for a UNIX socket")
    return ep


_PR_SET_DUMPABLE = 4


def private_process() -> None:
    """Make this process non-dumpable (prctl PR_SET_DUMPABLE 0): another process of the same uid without
    CAP_SYS_PTRACE can then not open its /proc/PID/fd/N (the sealed senders' socketpairs, the memfds),
    read its memory or ptrace it. Inherited by fork, reset by execve; no core dumps."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):          # pragma: no cover - not Linux
        pass


class Scratch:
    """A private in-memory file (memfd) GNU Radio opens by ``path`` (/proc/self/fd/N): it has no name in
    any folder, and dies with ``close()`` (and its readers)."""

    def __init__(self, name: str = "otafl-iq"):
        self.fd = os.memfd_create(name)
        self.path = f"/proc/self/fd/{self.fd}"

    def read(self) -> np.ndarray:
        return np.fromfile(self.path, dtype=np.complex64)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def burst_tag(key: bytes | None, header: str, samples: np.ndarray | None) -> str:
    """HMAC-SHA256 over the burst's header (run, link, round, attempt, length) and its complex64 samples,
    hex; '' without a key (the tag is then not checked) or without samples. The key is the link's
    (net/iq_relay.py: known to both of its ends, not to the server), so the tag says nothing about the
    data to anyone else."""
    if not key or samples is None:
        return ""
    x = np.ascontiguousarray(samples, dtype=np.complex64)
    mac = hmac.new(key, f"{header}|{x.size}".encode(), hashlib.sha256)
    mac.update(memoryview(x.view(np.uint8)))
    return mac.hexdigest()


def _to_socket(tb: gr.top_block, block, endpoint: str, n: int, tap: bool) -> "Pusher":
    """Start pushing ``block``'s ``n`` samples: into a :class:`~otafl_sdr.radio.iq_seal.Sealed` endpoint's
    socketpair (a native file_descriptor_sink; no socket to reach), or on a push_sink bound at a plain
    ``endpoint`` (``net.insecure``); ``tap``: keep a copy of the stream as the block made it."""
    sealed = endpoint if isinstance(endpoint, Sealed) else None
    try:
        tapped = _tapped(tb, block, n, tap)
        if sealed is not None:
            sink = blocks.file_descriptor_sink(C64, sealed.relay.writer())     # the block owns the fd
        else:
            sink = zeromq.push_sink(C64, 1, str(endpoint), ZMQ_TIMEOUT_MS, False, -1)
        tb.connect(block, sink)
    except BaseException:
        if sealed is not None:
            sealed.relay.close()
        raise
    return Pusher(tb, sink, n, tapped, str(endpoint), sealed)


def push_stream(tb: gr.top_block, block, endpoint: str, n: int, tap: bool = False) -> "Pusher":
    """Push ``block``'s ``n`` samples from ``tb`` as every pusher of this module does (sealed or on a
    push_sink, tapped: :func:`_to_socket`); for transmitters built elsewhere (radio/zmq_ofdm.py)."""
    return _to_socket(tb, block, endpoint, n, tap)


class Pusher:
    """A running flowgraph that pushes one finite stream: into a sealed endpoint's socketpair, whose relay
    sends it on its secured socket, or to a push_sink's socket.

    ``sent()`` is True once the flowgraph handed over every sample (to the relay's socketpair, or to
    ZeroMQ); ``close()`` stops it and closes the socket (a sealed endpoint's relay with it).
    ``tap``: (file sink, :class:`Scratch`) fed with the same stream (``samples()`` reads it back, for the
    tag); ``reach``: where a reader connects (a sealed endpoint: where its relay's socket is bound);
    ``sealed``: the :class:`~otafl_sdr.radio.iq_seal.Sealed` endpoint, or None."""

    def __init__(self, tb: gr.top_block, sink, n: int, tap: tuple | None = None, reach: str = "",
                 sealed: Sealed | None = None):
        self.tb, self.sink, self.n = tb, sink, int(n)
        self.tap = tap
        self.reach, self.sealed = reach, sealed
        tb.start()

    def sent(self) -> bool:
        return self.sink.nitems_read(0) >= self.n

    def samples(self, deadline: float) -> np.ndarray | None:
        """What went into the socket (needs ``tap``), once the tap holds all of it; None otherwise."""
        if self.tap is None:
            return None
        sink, scratch = self.tap
        while sink.nitems_read(0) < self.n:
            if time.time() >= deadline or self.tb is None:
                return None
            time.sleep(POLL_S)
        x = scratch.read()
        return x[:self.n] if len(x) >= self.n else None

    def wait_sent(self, deadline: float, cancelled=None) -> bool:
        while not self.sent():
            if time.time() >= deadline or (cancelled is not None and cancelled()):
                return False
            time.sleep(POLL_S)
        return True

    def close(self) -> None:
        if self.sealed is not None:
            self.sealed.relay.stop_reading()       # a writer blocked on the socketpair returns: the graph stops
        if self.tb is not None:
            self.tb.stop()
            self.tb.wait()
            self.tb = None
            self.sink = None
        if self.tap is not None:
            self.tap[0].close()
            self.tap[1].close()
            self.tap = None
        if self.sealed is not None:
            self.sealed.relay.close()
            self.sealed = None


def _tapped(tb: gr.top_block, block, n: int, tap: bool) -> tuple | None:
    """Connect ``block`` also to a file sink (the copy a sender tags), when asked."""
    if not tap:
        return None
    scratch = Scratch("otafl-tap")
    sink = blocks.file_sink(C64, scratch.path, False)
    sink.set_unbuffered(True)                  # flushed as it goes: readable while the flowgraph runs
    tb.connect(block, blocks.head(C64, n), sink)
    return sink, scratch


def push_client(layout: ZmqLayout, i: int, symbols: np.ndarray, scale: complex, endpoint: str,
                tap: bool = False) -> Pusher:
    """Client i's transmitter: its symbol stream -> ClientTx -> push_sink (binds ``endpoint``)."""
    tb = gr.top_block(f"otafl_zmq_client_{i}")
    src = burst_source(symbols)
    tx = ClientTx(layout.modem.taps, layout.modem.sps, scale, float(layout.tx_cfo[i]), int(layout.start[i]),
                  layout.with_cfo, layout.with_delay)
    tb.connect(src, tx)
    return _to_socket(tb, tx, endpoint, layout.n_samples, tap)


def push_jammer(layout: ZmqLayout, alpha_cj: float, seed: int, endpoint: str, tap: bool = False) -> Pusher:
    """The jammer's transmitter: JammerTx (gated, shaped CN(0, 2) x alpha_cj) -> push_sink."""
    tb = gr.top_block("otafl_zmq_jammer")
    jam = JammerTx(layout.modem.taps, layout.modem.sps, layout.mask, float(alpha_cj), int(seed),
                   start=layout.nominal)
    return _to_socket(tb, jam, endpoint, layout.n_samples, tap)


class Capture:
    """Pull ``n`` samples from each endpoint (name -> ipc://...) into memory files, natively.

    ``run(deadline, dropped)`` returns name -> (n,) complex64 array, or None for a stream that was
    dropped (``dropped()`` names it) or had not delivered all its samples by the deadline; ``counts``:
    name -> how many samples each branch delivered (a short count is what a second reader leaves)."""

    def __init__(self, endpoints: dict[str, str], n: int):
        self.n = int(n)
        self.tb = gr.top_block("otafl_zmq_capture")
        self.counts: dict[str, int] = {}
        self.branches = {}
        for name, ep in endpoints.items():
            src = zeromq.pull_source(C64, 1, ep, ZMQ_TIMEOUT_MS, False, -1)
            head = blocks.head(C64, self.n)
            scratch = Scratch("otafl-capture")
            sink = blocks.file_sink(C64, scratch.path, False)
            sink.set_unbuffered(False)
            self.tb.connect(src, head, sink)
            self.branches[name] = (head, sink, scratch)

    def _complete(self, name: str) -> bool:
        return self.branches[name][1].nitems_read(0) >= self.n

    def run(self, deadline: float, dropped=lambda: set()) -> dict[str, np.ndarray | None]:
        self.tb.start()
        try:
            while True:
                gone = dropped()
                if all(self._complete(n) or n in gone for n in self.branches) or time.time() >= deadline:
                    break
                time.sleep(POLL_S)
        finally:
            self.tb.stop()
            self.tb.wait()
        out = {}
        gone = dropped()
        for name, (head, sink, scratch) in self.branches.items():
            self.counts[name] = int(sink.nitems_read(0))
            sink.close()
            if self._complete(name) and name not in gone:
                x = scratch.read()
                out[name] = x[:self.n] if len(x) >= self.n else None
            else:
                out[name] = None
            scratch.close()
        self.tb = None
        return out


def capture_one(endpoint: str, n: int, deadline: float, cancelled=None, counts: dict | None = None) -> np.ndarray | None:
    """The receiver's capture: ``n`` samples from ``endpoint``, or None by the deadline (``counts``: gets
    how many arrived, under "rx")."""
    cap = Capture({"rx": endpoint}, n)
    y = cap.run(deadline, (lambda: {"rx"} if cancelled is not None and cancelled() else set()))["rx"]
    if counts is not None:
        counts.update(cap.counts)
    return y


class ChannelRound:
    """Apply one round's channel to captured streams and push the result (binds ``endpoint``).

    ``streams``: (K, n) complex64 client samples (zero rows for silent or missing clients);
    ``jammer``: (n,) or None; ``h`` (K,), ``h_cj``, ``sigma_c2``, ``draws`` (from ``round_draws``).
    Chain: file_source x (K+1) -> LoopbackChannel -> push_sink. Returns a :class:`Pusher`."""

    @staticmethod
    def push(layout: ZmqLayout, streams: np.ndarray, jammer: np.ndarray | None, h: np.ndarray, h_cj: complex,
             sigma_c2: float, draws: dict, endpoint: str, tap: bool = False) -> Pusher:
        K, n = layout.K, layout.n_samples
        staging = stage_rows(streams, jammer, K, n)
        lb = layout.lb
        tb = gr.top_block("otafl_zmq_channel")
        ch = LoopbackChannel(K, client_cfo=layout.off["cfo"], client_delay=layout.off["delay"],
                             rx_cfo=lb.rx_cfo, rx_delay=lb.rx_delay, rx_phase_noise=lb.rx_phase_noise,
                             sigma_c2=sigma_c2, noise_seed=draws["noise_seed"], phase_seed=draws["phase_seed"])
        ch.set_gains(layout.channel_gains(h))
        ch.set_jammer_gain(h_cj if jammer is not None else 0.0)
        sources = [blocks.file_source(C64, staging.path, False, k * n, n) for k in range(K + 1)]
        for k, src in enumerate(sources):
            tb.connect(src, (ch, k))
        pusher = _to_socket(tb, ch, endpoint, n, tap)
        pusher.staging = staging
        return pusher


def stage_rows(streams: np.ndarray, jammer: np.ndarray | None, K: int, n: int) -> "Scratch":
    """The channel emulator's input file: (K, n) client streams (zero rows: silent or missing) and the
    jammer's (n,) row (zeros when None), complex64, row k at item k * n (read by ``file_source``)."""
    streams = np.ascontiguousarray(streams, dtype=np.complex64)
    if streams.shape != (K, n):
        raise ValueError(f"expected client streams of shape {(K, n)}, got {streams.shape}")
    rows = np.zeros((K + 1, n), dtype=np.complex64)
    rows[:K] = streams
    if jammer is not None:
        rows[K] = jammer
    staging = Scratch("otafl-channel")
    try:
        rows.tofile(staging.path)
    except BaseException:
        staging.close()
        raise
    return staging


def release(pusher: Pusher | None) -> None:
    """Close a pusher and its staging file, if any."""
    if pusher is None:
        return
    pusher.close()
    staging = getattr(pusher, "staging", None)
    if staging is not None:
        staging.close()
