"""The control-plane wire format: round trips, and every kind of malformed, truncated or oversized
message is refused with MalformedMessage (never another exception), including random frames."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otafl_sdr.net.messages import (PROTOCOL_VERSION, SCHEMA, Limits, MalformedMessage, Message, decode,
                                    encode)


def _ack(**over):
    f = {"round": 3, "s": 1.5, "alpha_re": 0.2, "alpha_im": -0.1, "mode": "update", "norm": 0.9,
         "train_loss": None, "clipped": False}
    f.update(over)
    return f


def test_round_trip_keeps_arrays_bit_exact():
    w = np.random.default_rng(0).standard_normal(1001).astype(np.float32)
    frames = encode(Message("round_start", {"round": 7, "alpha_u": 3.5, "mu": 0.0, "deadline": 1e9,
                                            "t_tx": 0.0, "diagnostic": True}, {"w": w}), sender="server")
    msg = decode(frames)
    assert msg.type == "round_start" and msg.sender == "server" and msg["round"] == 7
    assert msg.arrays["w"].dtype == np.float32 and np.array_equal(msg.arrays["w"], w)
    p = np.linspace(-1, 1, 11)
    m2 = decode(encode(Message("ack", _ack(), {"update": p}), sender="client-0"))
    assert np.array_equal(m2.arrays["update"], p) and m2["train_loss"] is None


def test_big_endian_arrays_travel_as_little_endian():
    a = np.arange(5, dtype=">f8")
    msg = decode(encode(Message("ack", _ack(), {"update": a}), sender="client-0"))
    assert msg.arrays["update"].dtype.str == "<f8" and np.array_equal(msg.arrays["update"], np.arange(5.0))


def _frames_with(header_patch=None, frames_patch=None):
    frames = [bytes(f) for f in encode(Message("ack", _ack(), {"update": np.ones(4)}), sender="client-1")]
    h = json.loads(frames[0])
    if header_patch:
        header_patch(h)
    frames[0] = json.dumps(h).encode()
    if frames_patch:
        frames = frames_patch(frames)
    return frames


@pytest.mark.parametrize("patch, why", [
    (lambda h: h.update(v=PROTOCOL_VERSION + 1), "version"),
    (lambda h: h.update(type="launch_missiles"), "unknown message type"),
    (lambda h: h["fields"].pop("s"), "lacks field"),
    (lambda h: h["fields"].update(extra=1), "unknown field"),
    (lambda h: h["fields"].update(round="3"), "must be int"),
    (lambda h: h["fields"].update(round=True), "must be int"),
    (lambda h: h["fields"].update(s=None), "is null"),
    (lambda h: h["arrays"][0].__setitem__(1, "|O"), "not allowed"),
    (lambda h: h["arrays"][0].__setitem__(2, [5]), "truncated"),
    (lambda h: h["arrays"][0].__setitem__(2, [3]), "trailing"),
    (lambda h: h["arrays"][0].__setitem__(0, "w"), "unexpected array"),
    (lambda h: h["arrays"][0].__setitem__(2, [-1]), "bad shape"),
    (lambda h: h.pop("from"), "header keys"),
])
def test_schema_violations_are_refused(patch, why):
    with pytest.raises(MalformedMessage, match=why):
        decode(_frames_with(patch))


def test_truncated_and_extra_frames_are_refused():
    with pytest.raises(MalformedMessage, match="truncated"):
        decode(_frames_with(frames_patch=lambda f: [f[0], f[1][:-3]]))
    with pytest.raises(MalformedMessage, match="data frame"):
        decode(_frames_with(frames_patch=lambda f: f[:1]))
    with pytest.raises(MalformedMessage, match="data frame"):
        decode(_frames_with(frames_patch=lambda f: f + [b"x"]))
    with pytest.raises(MalformedMessage, match="empty"):
        decode([])


def test_non_json_and_nan_headers_are_refused():
    with pytest.raises(MalformedMessage, match="not JSON"):
        decode([b"\xff\xfe not json"])
    with pytest.raises(MalformedMessage, match="non-JSON number"):
        decode([b'{"v": 1, "type": "ack", "from": "x", "fields": {"s": NaN}, "arrays": []}'])
    with pytest.raises(MalformedMessage, match="not a JSON object"):
        decode([b"[1, 2]"])
    nan = np.array([1.0, np.nan])
    frames = _frames_with(frames_patch=lambda f: [f[0], nan.tobytes() + nan.tobytes()])
    with pytest.raises(MalformedMessage, match="NaN"):
        decode(frames)


def test_limits_refuse_oversized_messages():
    small = Limits(header_bytes=4096, frames=2, array_bytes=64, message_bytes=1024)
    with pytest.raises(MalformedMessage, match="bytes > limit"):
        decode(encode(Message("ack", _ack(), {"update": np.ones(100)}), sender="c"), small)
    with pytest.raises(MalformedMessage, match="frames > limit"):
        decode([b"{}"] * 4, small)
    with pytest.raises(MalformedMessage, match="message of"):
        decode([b"{}", b"x" * 2000], small)
    with pytest.raises(MalformedMessage, match="header of"):
        decode([b" " * 5000], Limits(header_bytes=4096))
    with pytest.raises(MalformedMessage, match="limit"):   # the sender refuses to build it too
        encode(Message("ack", _ack(), {"update": np.ones(100)}), sender="c", limits=small)


def test_encode_validates_like_decode():
    with pytest.raises(MalformedMessage):
        encode(Message("ack", _ack(s=float("inf"))), sender="c")
    with pytest.raises(MalformedMessage, match="needs array"):
        encode(Message("round_start", {"round": 1, "alpha_u": 1.0, "mu": 0.0, "deadline": 1.0, "t_tx": 0.0,
                                       "diagnostic": False}), sender="server")
    for mtype in SCHEMA:   # every type has a schema the validator understands
        assert isinstance(SCHEMA[mtype][0], dict)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=10)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=64), min_size=0, max_size=5))
def test_random_frames_never_raise_anything_else(frames):
    try:
        decode(frames)
    except MalformedMessage:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SCHEMA)), st.dictionaries(st.text(max_size=10), _json, max_size=6),
       st.lists(st.tuples(st.text(max_size=8), st.sampled_from(["<f8", "<f4", "|u1", "<c8", "xx"]),
                          st.lists(st.integers(-2, 6), max_size=3)), max_size=2),
       st.lists(st.binary(max_size=40), max_size=3))
def test_random_headers_never_raise_anything_else(mtype, fields, arrays, data):
    header = json.dumps({"v": PROTOCOL_VERSION, "type": mtype, "from": "client-0", "fields": fields,
                         "arrays": [list(a) for a in arrays]}).encode()
    try:
        decode([header] + data)
    except MalformedMessage:
        pass
