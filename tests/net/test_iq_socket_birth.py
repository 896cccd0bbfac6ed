"""A key-less thief of the run's own uid at the birth of every IQ socket (issue 28, item 2; CI once saw such
a thief take 2,048 samples from a local zmq testbed run).

The thief of tests/net/test_iq_same_uid.py polls the IQ folder and /proc/net/unix and wins only when the
node is descheduled between creating a socket and securing it. Here the window is forced open: every time
the process under test creates a listening socket (a GNU Radio zeromq sink's constructor binds; so does
pyzmq's ``Socket.bind``), it stops right after the bind until the thief, a process of its own, has
connected to every socket path the IQ folder and /proc/net/unix name and its libzmq has seen each connect
succeed or fail (socket monitor). The burst then goes out. Whatever the order of binds, options and
relays, the thief must get 0 bytes, and the reader the burst sample for sample.

Before the fix this took bytes from every burst: a push_sink's socket file exists from its bind until
radio/zmq_channel.hide (now gone) unlinked it, and a PUSH socket round-robins its messages over every peer that
connected by then (bytes under a one-time pad, the link named attacked: a keyed burst lost to a same-uid
process). Now no GNU Radio block binds a socket in keyed mode: radio/iq_seal.py."""
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq
from gnuradio import zeromq

from otafl_sdr.net.iq_relay import IqPlane
from otafl_sdr.net.security import KeyStore, make_keys, node_names

from iq_thief import FIND_SOCKETS
from test_iq_sockets import _burst

pytestmark = [pytest.mark.net, pytest.mark.gnuradio]

THIEF = r"""
import os, sys, time, zmq
from zmq.utils.monitor import recv_monitor_message
roots = sys.argv[1].split(",")
ctx = zmq.Context()
poller = zmq.Poller()
taken, socks = set(), []
got = 0
""" + FIND_SOCKETS + r"""def drain():
    global got
    for s, _ in poller.poll(0):
        while True:
            try:
                got += len(s.recv(zmq.NOBLOCK))
            except zmq.Again:
                break
def take(path):         # two PULL sockets, no keys; back once libzmq saw each connect(2) succeed or fail
    taken.add(path)
    mons = []
    for _ in range(2):
        s = ctx.socket(zmq.PULL); s.setsockopt(zmq.LINGER, 0); s.setsockopt(zmq.RECONNECT_IVL, 5)
        mons.append((s, s.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_CONNECT_DELAYED | zmq.EVENT_CONNECT_RETRIED)))
        s.connect("ipc://" + path); poller.register(s, zmq.POLLIN); socks.append(s)
    connected = 0
    for s, m in mons:
        if m.poll(5000):
            connected += recv_monitor_message(m)["event"] == zmq.EVENT_CONNECTED
        s.disable_monitor()                        # (libzmq would block on a closed monitor's next event)
        m.close(0)
    return connected
buf = b""
print("ready", flush=True)
while True:
    drain()
    if not zmq.select([0], [], [], 0.005)[0]:
        continue
    chunk = os.read(0, 4096)
    if not chunk:
        break
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        if line == b"go":
            new = sorted(sockets() - taken)
            print("took", len(new), sum(take(p) for p in new), flush=True)
        elif line == b"stop":
            t = time.time() + 0.5
            while time.time() < t:
                drain(); time.sleep(0.01)
            print("stolen", len(taken), got, flush=True)
            sys.exit(0)
"""


class Thief:
    """The key-less same-uid thief (a process of its own). ``turn()``: it connects to every socket it finds
    now and answers once libzmq tried each; ``stop()``: (socket paths tried, connections that succeeded,
    bytes received)."""

    def __init__(self, roots: list[str]):
        self.p = subprocess.Popen([sys.executable, "-c", THIEF, ",".join(roots)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
                                  start_new_session=True)      # a session of its own, as an attacker's
        assert self._line() == "ready"
        self.connected = 0

    def _line(self) -> str:
        line = self.p.stdout.readline().strip()
        assert line, self.p.communicate(timeout=10)
        return line

    def turn(self) -> None:
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        word, _, connected = self._line().split()
        assert word == "took"
        self.connected += int(connected)

    def stop(self) -> tuple[int, int, int]:
        self.p.stdin.write("stop\n")
        self.p.stdin.flush()
        word, tried, got = self._line().split()
        assert word == "stolen"
        self.p.wait(10)
        return int(tried), self.connected, int(got)

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            f.close()


@pytest.fixture
def at_every_bind(monkeypatch):
    """Install the thief's turn right after every listening socket this process creates; yields a list the
    test appends its Thief to, and the count of binds it saw."""
    seen = {"binds": 0, "thief": None}

    def turn():
        seen["binds"] += 1
        if seen["thief"] is not None:
            seen["thief"].turn()

    for name in ("push_sink", "pub_sink", "rep_sink"):
        real = getattr(zeromq, name)

        def born(*a, _real=real, **k):
            block = _real(*a, **k)
            turn()
            return block
        monkeypatch.setattr(zeromq, name, born)
    real_bind = zmq.Socket.bind

    def bind(self, addr, *a, **k):
        r = real_bind(self, addr, *a, **k)
        if str(addr).startswith("ipc://"):
            turn()
        return r
    monkeypatch.setattr(zmq.Socket, "bind", bind)
    return seen


def test_a_thief_connected_at_every_socket_birth_of_the_testbed_iq_plane_gets_nothing(tmp_path, at_every_bind):
    """client-0 pushes a burst and two re-sent attempts through its CURVE relay, the channel reads each
    through its own: the thief, connected at each socket's birth, gets 0 bytes; the channel every sample."""
    from otafl_sdr.radio.zmq_channel import Capture, ipc_endpoint, ipc_folder, push_client, release
    make_keys(tmp_path / "keys", node_names(2, jammer=True))
    keys = KeyStore(tmp_path / "keys")
    folder = ipc_folder("hiq-")
    client = IqPlane("client-0", "client", ipc_endpoint(folder), folder, keys)
    channel = IqPlane("channel", "channel", None, folder, keys)
    L, sym = _burst()
    thief = Thief([folder])
    at_every_bind["thief"] = thief
    whole = []                                         # per attempt: the channel got it sample for sample, tag too
    try:
        for attempt in (0, 1, 2):
            local = client.push(1, attempt)
            pusher = src = None
            try:
                pusher = push_client(L, 0, sym, 1.0, local.endpoint, tap=True)
                src = channel.source("client-0", client.endpoint, 1, attempt)
                cap = Capture({"client-0": src.endpoint}, L.n_samples)
                got = cap.run(time.time() + 10)["client-0"]
                ok = pusher.wait_sent(time.time() + 10)
                sent = pusher.samples(time.time() + 5)
                whole.append(ok and cap.counts["client-0"] == L.n_samples and np.array_equal(got, sent) and
                             client.tag("client-0", "channel", 1, attempt, sent) ==
                             channel.tag("client-0", "channel", 1, attempt, got) != "")
            finally:
                release(pusher)
                local.close()
                if src is not None:
                    src.close()
        at_every_bind["thief"] = None
        tried, connected, stolen = thief.stop()
    finally:
        thief.kill()
        client.close()
        channel.close()
        shutil.rmtree(folder)
    # every burst made sockets and the thief was at each one's birth; what it connected to gave nothing
    assert at_every_bind["binds"] >= 6 and tried >= 6, (at_every_bind["binds"], tried)
    assert stolen == 0, (tried, connected, stolen)
    assert whole == [True, True, True], whole


def test_a_thief_connected_at_every_socket_birth_of_the_in_process_zmq_air_gets_nothing(at_every_bind, monkeypatch):
    """A zmq_inproc round (two clients, the jammer, the channel): the thief, connected at the birth of each of
    its sockets, gets 0 bytes, and the round is received."""
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.errors import AirError
    from otafl_sdr.radio.zmq_air import ZmqAir
    from otafl_sdr.transmission import Mechanism, RoundPlan
    import tempfile
    tmp = tempfile.mkdtemp(prefix="hq", dir="/tmp")    # short: the air makes its folder inside (the thief's root)
    monkeypatch.setattr(tempfile, "tempdir", tmp)
    cfg = load_config(None, ["data.clients=2"])
    g = np.random.default_rng(1)
    payload = g.standard_normal((2, 200))
    payload /= np.linalg.norm(payload, axis=1, keepdims=True)
    h = np.array([0.9 + 0.3j, 0.5 - 0.7j])
    alpha = 5.0 * 0.5 / h
    plan = RoundPlan(round=1, payload=payload, alpha=alpha, h=h, target_gain=np.full(2, 0.5), alpha_u=5.0,
                     alpha_cj=0.05, h_cj=0.7 + 0.2j, sigma_c2=0.001, mode=["update", "update"],
                     mechanism=Mechanism(1, 0.1, 0.1), power_limit=np.full(2, 1e3))
    thief = Thief([tmp])
    at_every_bind["thief"] = thief
    air = ZmqAir(cfg, timeout_s=20)
    r = None
    try:
        try:
            r = air.transmit(plan, np.random.default_rng(2))
        except AirError as e:                          # a stream the thief took: reported after what it got
            r = e
        at_every_bind["thief"] = None
        tried, connected, stolen = thief.stop()
    finally:
        thief.kill()
        air.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert stolen == 0, (tried, connected, stolen)
    assert not isinstance(r, AirError) and r.ok, r
    assert np.abs(r.aggregate - payload.sum(axis=0) * 0.5).max() < 0.1      # the round was received
    assert at_every_bind["binds"] >= 4 and tried >= 4, (at_every_bind["binds"], tried)
