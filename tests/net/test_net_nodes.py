"""Real node processes (`otafl-sdr node receiver` and `otafl-sdr node client`) under a fake server on
127.0.0.1 that feeds them random and malformed messages (hypothesis) and schema-valid nonsense (a model
of the wrong size, an unreachable capture endpoint): the nodes log and drop or report, and never crash;
afterwards they still heartbeat, still answer a proper request, and leave on 'shutdown' with status 0."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otafl_sdr.config.schema import to_toml
from otafl_sdr.configure.load import load_config
from otafl_sdr.net.messages import PROTOCOL_VERSION, SCHEMA, MalformedMessage, Message, decode, encode

pytestmark = [pytest.mark.net]

CFG = load_config(None, ["run.seed=2", "data.dataset=digits", "data.clients=3", "model.hidden=8",
                         "train.local_epochs=1", "run.torch_threads=1", "air.name=zmq",
                         "privacy.targeting=paper"])


class FakeServer:
    """A bare ROUTER that plays the server's side of the protocol by hand."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.seen: dict[str, list] = {}

    def send(self, name: str, mtype: str, fields=None, arrays=None):
        self.sock.send_multipart([name.encode()] + encode(Message(mtype, fields or {}, arrays or {}), "server"))

    def raw(self, name: str, frames):
        self.sock.send_multipart([name.encode()] + list(frames))

    def wait(self, name: str, mtype: str, timeout: float, pred=lambda m: True):
        end = time.time() + timeout
        while time.time() < end:
            if self.sock.poll(100):
                frames = self.sock.recv_multipart()
                try:
                    msg = decode(frames[1:])
                except MalformedMessage:
                    continue
                who = frames[0].decode()
                self.seen.setdefault(who, []).append(msg)
                if msg.type == "register":
                    self.send(who, "welcome", {"config": to_toml(CFG), "run_id": "t", "heartbeat_s": 0.3,
                                               "timeout_s": 60.0})
                if who == name and msg.type == mtype and pred(msg):
                    return msg
        raise AssertionError(f"no '{mtype}' from {name} within {timeout} s")

    def close(self):
        self.sock.close(0)
        self.ctx.term()


def _node(server, args):
    env = dict(os.environ)
    env.pop("OTAFL_NET_DIE_AT", None)
    return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", "node"] + args + ["--server", server.endpoint],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


@pytest.fixture(scope="module")
def nodes():
    server = FakeServer()
    procs = {"receiver": _node(server, ["receiver"]), "client-0": _node(server, ["client", "--id", "0"])}
    try:
        for name in procs:
            server.wait(name, "ready", 300)
        yield server, procs
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        server.close()


_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=6),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=8)


def _header(mtype, fields, arrays):
    return json.dumps({"v": PROTOCOL_VERSION, "type": mtype, "from": "server", "fields": fields,
                       "arrays": arrays}).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(kind=st.integers(0, 2), blobs=st.lists(st.binary(max_size=48), min_size=1, max_size=4),
       mtype=st.sampled_from(sorted(set(SCHEMA) - {"shutdown"})), fields=st.dictionaries(st.text(max_size=8), _json, max_size=5),
       target=st.sampled_from(["receiver", "client-0"]))
def test_random_messages_never_crash_a_node(nodes, kind, blobs, mtype, fields, target):
    server, procs = nodes
    if kind == 0:                                    # random bytes
        server.raw(target, blobs)
    elif kind == 1:                                  # a JSON header of a known type with random fields
        server.raw(target, [_header(mtype, fields, [["w", "<f4", [len(blobs[0]) // 4 + 1]]])] + blobs[:1])
    else:                                            # a valid header whose array is truncated
        server.raw(target, [_header("round_start", {"round": 1, "alpha_u": 1.0, "mu": 0.0, "deadline": 1.0,
                                                    "t_tx": 0.0, "diagnostic": False},
                                    [["w", "<f4", [1000]]]), b"\0" * 40])
    assert procs[target].poll() is None


def test_nodes_survive_nonsense_and_still_work(nodes):
    server, procs = nodes
    # schema-valid nonsense: a model of the wrong size; a capture from an endpoint nobody serves
    server.send("client-0", "round_start", {"round": 1, "alpha_u": 1.0, "mu": 0.0, "deadline": 1e12, "t_tx": 0.0,
                                            "diagnostic": True}, {"w": np.zeros(7, np.float32)})
    err = server.wait("client-0", "error", 120)
    assert "expected a flat model" in err["message"]
    server.send("receiver", "receive", {"round": 1, "attempt": 0, "release": "r1", "endpoint": "tcp://127.0.0.1:9", "alpha_u": 1.0,
                                        "dim": 100, "ref_re": 1.0, "ref_im": 0.0, "deadline": time.time() + 1.0,
                                        "t_rx": 0.0})
    agg = server.wait("receiver", "aggregate", 120)
    assert agg["ok"] is False and "no burst" in agg["reason"]
    for name, p in procs.items():
        assert p.poll() is None, name
        n0 = sum(m.type == "heartbeat" for m in server.seen.get(name, []))
        server.wait(name, "heartbeat", 30, pred=lambda m: True)
        assert sum(m.type == "heartbeat" for m in server.seen.get(name, [])) > n0
    # a proper round_start still trains and answers with the node's own decision
    from otafl_sdr.net.context import node_run
    w = node_run(CFG).trainer.get_flat().numpy()
    server.send("client-0", "round_start", {"round": 2, "alpha_u": 1.0, "mu": 0.0, "deadline": 1e12, "t_tx": 0.0,
                                            "diagnostic": True}, {"w": w})
    ack = server.wait("client-0", "ack", 120)
    assert ack["round"] == 2 and ack["s"] >= 1.0
    assert not {"finite", "reason", "fits_dac"} & set(ack.fields)     # nothing from the data beside the mechanism
    u = ack.arrays["update"].astype(np.float64) / CFG.train.tau
    assert ack.arrays["update"].dtype == np.float32 and u.shape == (w.size,) and np.linalg.norm(u) <= 1 + 1e-6
    assert ack["norm"] == pytest.approx(np.linalg.norm(u))
    # a restarted server that does not know the node asks it to register again; it does, and is ready
    server.send("receiver", "reregister")
    reg = server.wait("receiver", "register", 30)
    assert reg["node"] == "receiver" and reg["pid"] == procs["receiver"].pid
    server.wait("receiver", "ready", 30)
    for name, p in procs.items():
        server.send(name, "shutdown", {"reason": "test over"})
    for name, p in procs.items():
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0, (name, out[-2000:])
        assert "dropped a message" in out                           # logged, not raised
