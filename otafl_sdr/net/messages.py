"""The control-plane wire format: one ZeroMQ multipart message = a JSON header frame + one binary frame
per numpy array. No pickle: an array travels as its raw little-endian bytes, its dtype and shape named
in the header, so ``decode`` can check every byte count before touching the data.

Header (UTF-8 JSON object, at most ``Limits.header_bytes``)::

    {"v": PROTOCOL_VERSION, "type": "round_start", "from": "server",
     "fields": {...},                         # checked against SCHEMA[type]
     "arrays": [["w", "<f4", [155862]], ...]} # one binary frame follows per entry, in order

``decode`` raises :class:`MalformedMessage` (with the reason) for anything else: wrong version, unknown
type, missing / extra / mistyped fields, non-finite numbers, a dtype outside :data:`DTYPES`, a frame
whose length disagrees with dtype x shape (truncated), too many frames, or more bytes than the limits
allow. Nodes catch it, log it and go on."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

PROTOCOL_VERSION = 1
DTYPES = frozenset({"<f4", "<f8", "<c8", "<c16", "<i4", "<i8", "|u1", "|b1"})
NAME_MAX = 64            # node names, message types, array names
TEXT_MAX = 1 << 20       # longest string field (the run's config TOML travels in 'welcome')


@dataclass(frozen=True)
class Limits:
    """Size limits a decoder enforces. ``array_bytes`` bounds each array, ``message_bytes`` the whole
    message; the defaults fit a model of ~8 M float64 parameters."""

    header_bytes: int = 2 * TEXT_MAX
    frames: int = 8
    array_bytes: int = 64 << 20
    message_bytes: int = 80 << 20
    ndim: int = 4


DEFAULT_LIMITS = Limits()


class MalformedMessage(ValueError):
    """A message that does not follow the schema (or exceeds a limit); nodes log it and drop it."""


# field kinds: "int", "float" (finite), "num" (finite or None), "str", "bool", "names" (list of str),
# "endpoints" (dict str -> str), "counts" (dict str -> int), "cgains" (dict str -> [re, im]).
# A trailing "?" allows None. Arrays: name -> required?
SCHEMA: dict[str, tuple[dict[str, str], dict[str, bool]]] = {
    # node -> server: I am here (iq_endpoint: where my IQ push socket binds, if I have one)
    "register": ({"role": "str", "node": "str", "pid": "int", "iq_endpoint": "str?", "air": "str"}, {}),
    # server -> node: accepted; the run's resolved config (TOML) and the run's identity
    "welcome": ({"config": "str", "run_id": "str", "heartbeat_s": "float", "timeout_s": "float"}, {}),
    "refused": ({"reason": "str"}, {}),
    # server -> node it does not know (e.g. a restarted server): register again
    "reregister": ({}, {}),
    "heartbeat": ({}, {}),
    # node -> server: set up (data, model, flowgraph geometry) and ready for rounds
    "ready": ({}, {}),
    # server -> clients: train from w for iteration `round` (answer by `deadline`, transmit at `t_tx`)
    "round_start": ({"round": "int", "alpha_u": "float", "mu": "float", "deadline": "float",
                     "t_tx": "float", "diagnostic": "bool"}, {"w": True}),
    # client -> server: trained; my power-control decision (s_i >= 1, alpha_i, mode: planned, never from the
    # data) and diagnostics (norm / train_loss / clipped / 'update' are 0 / None / False / absent outside
    # diagnostic mode; 'update': the clipped update w_i - w as trained, float32; u_i = update / tau)
    "ack": ({"round": "int", "s": "float", "alpha_re": "float", "alpha_im": "float", "mode": "str",
             "norm": "float", "train_loss": "num", "clipped": "bool"},
            {"update": False}),
    # server -> client / jammer: go on the air now (t_tx: device time for timed bursts)
    # (release, here and in jam / channel_round / receive / aggregate: the id of the release the ledger booked
    # for this attempt before it was sent; the receiver echoes it, the server logs every id it received)
    # (ref_gains: the shared pre-equalised reference design, client name -> [re, im] of c / h_i)
    # (ofdm_*: phy.waveform = "ofdm" on air zmq, net/zmq_ofdm.py: the round's data carriers and the shared
    # reference design per client (K, U) / as the receiver expects it (U,); planned quantities, never data)
    "transmit": ({"round": "int", "attempt": "int", "release": "str", "t_tx": "float", "ref_gains": "cgains"},
                 {"ofdm_carriers": False, "ofdm_ref": False}),
    "jam": ({"round": "int", "attempt": "int", "release": "str", "alpha_cj": "float", "t_tx": "float", "dim": "int"},
            {"ofdm_carriers": False}),
    # client / jammer -> server: my burst is out (or why not)
    "tx_done": ({"round": "int", "attempt": "int", "ok": "bool", "reason": "str", "samples": "int"}, {}),
    # server -> channel emulator: capture these streams, apply the channel, push to the receiver
    "channel_round": ({"round": "int", "attempt": "int", "release": "str", "sources": "endpoints", "jammer": "str?",
                       "dim": "int", "sigma_c2": "float", "deadline": "float"}, {"ofdm_carriers": False}),
    # server -> channel: stop waiting for a node that died mid-round
    "drop": ({"round": "int", "attempt": "int", "node": "str"}, {}),
    "channel_done": ({"round": "int", "attempt": "int", "received": "names", "missing": "names",
                      "ok": "bool", "reason": "str"}, {}),
    # IQ node -> server: one end of an IQ link's burst ('sent' or 'got'): how many samples, whether all
    # of them, and its tag (an HMAC keyed per link, which the server compares and cannot compute)
    "iq_report": ({"round": "int", "attempt": "int", "link": "str", "side": "str", "samples": "int",
                   "complete": "bool", "tag": "str"}, {}),
    # server -> receiver: capture the burst from `endpoint` and demodulate it
    "receive": ({"round": "int", "attempt": "int", "release": "str", "endpoint": "str?", "alpha_u": "float", "dim": "int",
                 "ref_re": "float", "ref_im": "float", "deadline": "float", "t_rx": "float"},
                {"ofdm_carriers": False, "ofdm_ref_amp": False}),
    # receiver -> server: the aggregate estimate unpack(y)/alpha_u (absent when the burst was lost)
    "aggregate": ({"round": "int", "attempt": "int", "release": "str", "ok": "bool", "reason": "str", "faults": "counts",
                   "channel_uses": "int"}, {"aggregate": False, "iq": False}),
    "round_end": ({"round": "int"}, {}),
    # --- air uhd: every node drives its own USRP (net/uhd_rounds.py; round -1 = a calibration exchange)
    # server -> clients: the calibration the run took in session (its JSON file): the same CSI, noise floor
    # and power plan on every node
    "calibration": ({"text": "str"}, {}),
    # node -> server, after setup: its radio's actual settings (JSON object: serial, rate, freq, gain, ...)
    "radio": ({"settings": "str"}, {}),
    # server -> client: send your burst at device time t_tx (the capture starts at t_rx); offsets: name ->
    # [cfo cycles/sample, delay samples] of a calibrated run (empty otherwise); t_ref: the device time the
    # client's calibrated phase refers to (its rotation continues from it; None: it starts at 0 each burst)
    # (n: the capture's length in samples from t_rx; release: the ledger's id of this attempt, as on zmq)
    # (tx_amp: what the client multiplies its payload by: the round's planned scale x its PA correction)
    "transmit_at": ({"round": "int", "attempt": "int", "release": "str", "t_tx": "float", "t_rx": "float", "n": "int",
                     "ref_gains": "cgains", "offsets": "cgains", "t_ref": "num", "tx_amp": "float", "sounding": "int",
                     "slot": "int"},
                    {"ofdm_carriers": False, "ofdm_rx_delay": False, "ofdm_ref": False}),
    # (ofdm_*: phy.waveform = "ofdm" on air uhd, net/uhd_ofdm_round.py: carriers, the frame's reference delay,
    # the shared reference c / H~_ik per client (K, U); planned quantities, never data; sounding: 1 when the
    # client's burst continues, after the jammer's ``slot`` OFDM symbols, with its part of the per-client
    # sounding (single carrier: phy/client_sounding.py, net/uhd_sounding.py; OFDM: phy/ofdm_client_sounding.py);
    # slot in samples; 0 otherwise)
    "jam_at": ({"round": "int", "attempt": "int", "release": "str", "alpha_cj": "float", "t_tx": "float",
                "t_rx": "float", "n": "int", "dim": "int", "slot": "int"},
               {"ofdm_carriers": False, "ofdm_rx_delay": False}),
    # (slot: samples of noise the jammer goes on sending alone after the frame: the round's jammer-only
    # slot, radio/jammer_slots.py; 0 on OFDM rounds)
    # server -> client, before round 1 (the coherence check, net/uhd_check_rounds.py): your share of a check
    # round's plan (round <= -1001; never a run's round): its factor and mode, the known payload row to send
    # (d,) and, on OFDM, your alpha_ik (U,); public, planned by the server, no client data
    "check_decision": ({"round": "int", "mode": "str", "alpha_re": "float", "alpha_im": "float"},
                       {"payload": True, "alpha_sc": False}),
    # server -> client / jammer (calibration): send these samples at t_tx
    "send": ({"round": "int", "attempt": "int", "t_tx": "float", "t_rx": "float", "n": "int"},
             {"samples": True}),
    # client / jammer -> server: the timed burst went out (its radio's fault counts), or why not
    "burst_done": ({"round": "int", "attempt": "int", "ok": "bool", "reason": "str", "faults": "counts"}, {}),
    "set_gain": ({"gain": "float"}, {}),
    "gain_set": ({"ok": "bool", "reason": "str", "gain": "float"}, {}),
    # server -> receiver: capture n samples from device time t_rx; it answers 'armed' once the capture is
    # commanded (the server sends the bursts only then), then 'captured' with the samples and its faults
    # (release: the ledger's id of the attempt, '' for a calibration exchange; the receiver echoes it)
    "capture": ({"round": "int", "attempt": "int", "release": "str", "n": "int", "t_rx": "float",
                 "deadline": "float"}, {}),
    # (t_rx = 0: prepare only; the capture is commanded on 'go'). 'armed' (receiver, jammer) carries the
    # radio's device time when it answered (the server checks its own clock against it, net/uhd_clock.py)
    "armed": ({"round": "int", "attempt": "int", "ok": "bool", "reason": "str", "device_time": "num"}, {}),
    # server -> transmitter: your device time, please (the handshake before t_tx is chosen)
    "clock": ({"round": "int", "attempt": "int"}, {}),
    "clock_is": ({"round": "int", "attempt": "int", "device_time": "num"}, {}),
    # server -> receiver / jammer, after the handshake: the chosen times (ok false: the attempt is abandoned);
    # they answer 'going' (capture commanded / burst's time still ahead) before any client is told
    "go": ({"round": "int", "attempt": "int", "ok": "bool", "t_tx": "float", "t_rx": "float"}, {}),
    "going": ({"round": "int", "attempt": "int", "ok": "bool", "reason": "str"}, {}),
    "captured": ({"round": "int", "attempt": "int", "release": "str", "ok": "bool", "reason": "str",
                  "faults": "counts"}, {"iq": False}),
    "shutdown": ({"reason": "str"}, {}),
    # node -> server: something went wrong that the operator should see (the node keeps running)
    "error": ({"message": "str"}, {}),
}


@dataclass
class Message:
    type: str
    fields: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    sender: str = ""

    def __getitem__(self, key):
        return self.fields[key]

    def get(self, key, default=None):
        return self.fields.get(key, default)


def _check_field(mtype: str, name: str, kind: str, value) -> None:
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    where = f"'{mtype}.{name}'"
    if value is None:
        if optional or kind == "num":
            return
        raise MalformedMessage(f"{where} is null")
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2 ** 62
    elif kind in ("float", "num"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    elif kind == "str":
        ok = isinstance(value, str) and len(value) <= TEXT_MAX
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "names":
        ok = (isinstance(value, list) and len(value) <= 4096
              and all(isinstance(v, str) and len(v) <= NAME_MAX for v in value))
    elif kind == "endpoints":
        ok = (isinstance(value, dict) and len(value) <= 4096
              and all(len(k) <= NAME_MAX and isinstance(v, str) and len(v) <= 256 for k, v in value.items()))
    elif kind == "cgains":
        ok = (isinstance(value, dict) and len(value) <= 4096
              and all(len(k) <= NAME_MAX and isinstance(v, list) and len(v) == 2
                      and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
                      for k, v in value.items()))
    elif kind == "counts":
        ok = (isinstance(value, dict) and len(value) <= 256
              and all(len(k) <= NAME_MAX and isinstance(v, int) and not isinstance(v, bool)
                      for k, v in value.items()))
    else:  # pragma: no cover - schema typo
        raise AssertionError(kind)
    if not ok:
        raise MalformedMessage(f"{where} must be {kind}, got {type(value).__name__}")


def _reject_constant(name: str):
    raise MalformedMessage(f"header holds the non-JSON number {name}")


def encode(msg: Message, sender: str = "", limits: Limits = DEFAULT_LIMITS) -> list:
    """Message -> list of frames (bytes header, then one buffer per array). Validates like ``decode``
    so that a node never puts a message on the wire that its peer would drop."""
    spec = SCHEMA.get(msg.type)
    if spec is None:
        raise MalformedMessage(f"unknown message type {msg.type!r}")
    _validate_fields(msg.type, spec[0], msg.fields)
    arrays, frames = [], []
    for name, arr in msg.arrays.items():
        if name not in spec[1]:
            raise MalformedMessage(f"'{msg.type}' carries no array {name!r}")
        a = np.ascontiguousarray(arr)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        a = a.astype(dt, copy=False)
        if dt.str not in DTYPES:
            raise MalformedMessage(f"array {name!r}: dtype {dt.str} is not allowed")
        if a.nbytes > limits.array_bytes:
            raise MalformedMessage(f"array {name!r}: {a.nbytes} bytes > limit {limits.array_bytes}")
        arrays.append([name, dt.str, list(a.shape)])
        frames.append(memoryview(a.reshape(-1).view(np.uint8)))
    for name, required in spec[1].items():
        if required and name not in msg.arrays:
            raise MalformedMessage(f"'{msg.type}' needs array {name!r}")
    header = json.dumps({"v": PROTOCOL_VERSION, "type": msg.type, "from": sender or msg.sender,
                         "fields": msg.fields, "arrays": arrays}, allow_nan=False,
                        separators=(",", ":")).encode()
    if len(header) > limits.header_bytes:
        raise MalformedMessage(f"header of {len(header)} bytes > limit {limits.header_bytes}")
    return [header] + frames


def _validate_fields(mtype: str, spec: dict, fields) -> None:
    if not isinstance(fields, dict):
        raise MalformedMessage(f"'{mtype}' fields must be an object")
    extra = set(fields) - set(spec)
    if extra:
        raise MalformedMessage(f"'{mtype}' has unknown field(s) {sorted(extra)[:5]}")
    for name, kind in spec.items():
        if name not in fields:
            raise MalformedMessage(f"'{mtype}' lacks field {name!r}")
        _check_field(mtype, name, kind, fields[name])


def _buf(frame) -> memoryview:
    """bytes / zmq.Frame / memoryview -> memoryview (zero copy)."""
    b = getattr(frame, "buffer", frame)
    return memoryview(b)


def decode(frames, limits: Limits = DEFAULT_LIMITS) -> Message:
    """Frames (bytes or zmq.Frame) -> Message, or MalformedMessage naming what is wrong.

    Arrays are returned as read-only views on the received buffers (copy before writing)."""
    if not isinstance(frames, (list, tuple)) or not frames:
        raise MalformedMessage("empty message")
    if len(frames) > 1 + limits.frames:
        raise MalformedMessage(f"{len(frames)} frames > limit {1 + limits.frames}")
    bufs = [_buf(f) for f in frames]
    total = sum(b.nbytes for b in bufs)
    if total > limits.message_bytes:
        raise MalformedMessage(f"message of {total} bytes > limit {limits.message_bytes}")
    if bufs[0].nbytes > limits.header_bytes:
        raise MalformedMessage(f"header of {bufs[0].nbytes} bytes > limit {limits.header_bytes}")
    try:
        header = json.loads(bytes(bufs[0]).decode("utf-8"), parse_constant=_reject_constant)
    except MalformedMessage:
        raise
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise MalformedMessage(f"header is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise MalformedMessage("header is not a JSON object")
    if set(header) != {"v", "type", "from", "fields", "arrays"}:
        raise MalformedMessage(f"header keys {sorted(map(str, header))[:6]} != v, type, from, fields, arrays")
    if header["v"] != PROTOCOL_VERSION:
        raise MalformedMessage(f"protocol version {header['v']!r} != {PROTOCOL_VERSION}")
    mtype = header["type"]
    if not isinstance(mtype, str) or mtype not in SCHEMA:
        raise MalformedMessage(f"unknown message type {str(mtype)[:NAME_MAX]!r}")
    sender = header["from"]
    if not isinstance(sender, str) or len(sender) > NAME_MAX:
        raise MalformedMessage("'from' must be a short string")
    fspec, aspec = SCHEMA[mtype]
    _validate_fields(mtype, fspec, header["fields"])
    desc = header["arrays"]
    if not isinstance(desc, list) or len(desc) != len(bufs) - 1:
        raise MalformedMessage(f"'{mtype}': {len(bufs) - 1} data frame(s) but "
                               f"{len(desc) if isinstance(desc, list) else '?'} array description(s)")
    arrays = {}
    for d, buf in zip(desc, bufs[1:]):
        arrays.update([_array(mtype, d, buf, aspec, arrays, limits)])
    for name, required in aspec.items():
        if required and name not in arrays:
            raise MalformedMessage(f"'{mtype}' lacks array {name!r}")
    return Message(mtype, header["fields"], arrays, sender)


def _array(mtype, d, buf, aspec, seen, limits):
    if not (isinstance(d, list) and len(d) == 3 and isinstance(d[0], str) and isinstance(d[1], str)
            and isinstance(d[2], list)):
        raise MalformedMessage(f"'{mtype}': bad array description")
    name, dt, shape = d
    if name not in aspec or name in seen:
        raise MalformedMessage(f"'{mtype}': unexpected array {name[:NAME_MAX]!r}")
    if dt not in DTYPES:
        raise MalformedMessage(f"array {name!r}: dtype {dt[:16]!r} is not allowed")
    if len(shape) > limits.ndim or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2 ** 40
                                           for s in shape):
        raise MalformedMessage(f"array {name!r}: bad shape")
    itemsize = np.dtype(dt).itemsize
    n = itemsize * math.prod(shape)
    if n > limits.array_bytes:
        raise MalformedMessage(f"array {name!r}: {n} bytes > limit {limits.array_bytes}")
    if buf.nbytes != n:
        raise MalformedMessage(f"array {name!r}: frame holds {buf.nbytes} bytes, dtype x shape needs {n} "
                               f"({'truncated' if buf.nbytes < n else 'trailing bytes'})")
    arr = np.frombuffer(buf, dtype=np.dtype(dt)).reshape(shape)
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        raise MalformedMessage(f"array {name!r} holds NaN or inf")
    return name, arr
