"""Control-plane security on real sockets (127.0.0.1 only): CURVE keys from `otafl-sdr keys`, a node
without keys or with a foreign key is refused, a node cannot speak for another, non-loopback binds need
keys, and garbage sent to the server is dropped and logged while it keeps serving."""
import os
import shutil
import stat
import subprocess
import sys
import threading
import time

import pytest
import zmq

from otafl_sdr.cli.main import main
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.net.messages import Message, encode
from otafl_sdr.net.security import KeyStore, check_bind, is_loopback, make_keys
from otafl_sdr.net.transport import NodeLink, ServerHub

pytestmark = [pytest.mark.net, pytest.mark.slow]

WELCOME = {"config": "", "run_id": "t", "heartbeat_s": 0.2, "timeout_s": 5.0}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    assert main(["keys", str(d), "--clients", "2"]) == 0
    return d


class HubThread:
    """A ServerHub polled on its own thread (the sockets stay on that thread)."""

    def __init__(self, keys_dir=None, roster=("client-0", "client-1", "receiver")):
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.got = []
        self.keys_dir = keys_dir
        self.roster = list(roster)
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        assert self.ready.wait(10)

    def _run(self):
        self.hub = ServerHub("127.0.0.1", 0, self.roster, WELCOME, KeyStore(self.keys_dir) if self.keys_dir else None,
                             heartbeat_s=0.2, dead_after=2.0)
        self.endpoint = self.hub.endpoint
        self.ready.set()
        try:
            while not self.stop.is_set():
                self.got += self.hub.poll(0.05)
        finally:
            self.hub.close()

    def close(self):
        self.stop.set()
        self.t.join(10)


def test_keys_command_makes_pairs_with_private_permissions(keys):
    names = sorted(p.name for p in (keys / "public").iterdir())
    assert names == sorted(f"{n}.key" for n in ("server", "client-0", "client-1", "receiver", "channel", "jammer"))
    for p in (keys / "private").iterdir():
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(keys / "private").st_mode) == 0o700
    ks = KeyStore(keys)
    pub, sec = ks.pair("client-0")
    assert len(pub) == 40 and len(sec) == 40 and ks.owners()[pub.decode()] == "client-0"
    assert main(["keys", str(keys), "--clients", "1"]) == 2          # never overwritten without --force


def test_non_loopback_bind_needs_keys():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert check_bind("127.0.0.1", "") is False
    for addr in ("0.0.0.0", "*", "10.0.0.2"):
        with pytest.raises(ConfigError, match="net.keys_dir"):
            check_bind(addr, "")
    assert check_bind("10.0.0.2", "/some/keys") is True


def test_curve_admits_the_keyed_node_and_refuses_the_rest(keys, tmp_path):
    hub = HubThread(keys)
    try:
        good = NodeLink(hub.endpoint, "client-0", KeyStore(keys))
        assert good.register("client", None, "zmq", timeout=20).type == "welcome"
        good.close()
        # no keys at all: the CURVE handshake fails, the server never hears it
        bare = NodeLink(hub.endpoint, "client-1", None)
        with pytest.raises(UserError, match="no answer from the server"):
            bare.register("client", None, "zmq", timeout=3)
        bare.close()
        # a valid-looking key pair the server does not know
        other = tmp_path / "other"
        make_keys(other, ["client-1"])
        shutil.copy(keys / "public" / "server.key", other / "public" / "server.key")   # the right server
        stranger = NodeLink(hub.endpoint, "client-1", KeyStore(other))
        with pytest.raises(UserError, match="no answer"):
            stranger.register("client", None, "zmq", timeout=3)
        stranger.close()
        # client-1's routing name with client-0's key: dropped as impersonation
        imp = NodeLink(hub.endpoint, "client-1", None)
        pub, sec = KeyStore(keys).pair("client-0")
        imp.sock.close(0)
        s = imp.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.IDENTITY, b"client-1")
        s.curve_publickey, s.curve_secretkey = pub, sec
        s.curve_serverkey = KeyStore(keys).public("server")
        s.connect(hub.endpoint)
        imp.sock = s
        with pytest.raises(UserError, match="no answer"):
            imp.register("client", None, "zmq", timeout=3)
        imp.close()
        time.sleep(0.3)
        assert set(hub.hub.peers) == {"client-0"}
        assert hub.hub.dropped >= 1                                 # the impersonation was logged and dropped
    finally:
        hub.close()


def test_node_process_without_keys_is_refused(keys):
    """A real `otafl-sdr node` process lacking keys, against a server with CURVE forced on by its keys."""
    hub = HubThread(keys)
    try:
        p = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "node", "receiver", "--server", hub.endpoint,
                            "--register-timeout", "4"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2
        assert "no answer from the server" in p.stderr
        assert "receiver" not in hub.hub.peers
    finally:
        hub.close()


def test_garbage_is_dropped_and_the_server_keeps_serving():
    hub = HubThread(None)
    try:
        ctx = zmq.Context()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.IDENTITY, b"client-0")
        s.connect(hub.endpoint)
        for frames in ([b"\x00\x01garbage"], [b"{}"], [b'{"v":1}', b"x" * 100],
                       encode(Message("heartbeat"), sender="client-0"),            # before registering
                       encode(Message("heartbeat"), sender="client-1")):           # claims another name
            s.send_multipart(frames)
        time.sleep(0.5)
        assert hub.hub.dropped >= 5 and hub.t.is_alive()
        # a roster node unknown to this server (e.g. the server restarted) is asked to register again
        assert s.poll(5000)
        from otafl_sdr.net.messages import decode
        assert decode(s.recv_multipart()).type == "reregister"
        s.close(0)
        ctx.term()
        link = NodeLink(hub.endpoint, "client-0", None)
        assert link.register("client", None, "zmq", timeout=10).type == "welcome"
        link.send("tx_done", {"round": 1, "attempt": 0, "ok": True, "reason": "", "samples": 5})
        end = time.time() + 5
        while not hub.got and time.time() < end:
            time.sleep(0.05)
        assert hub.got and hub.got[0][0] == "client-0" and hub.got[0][1].type == "tx_done"
        link.close()
        # a name outside the roster is refused with a reason
        intruder = NodeLink(hub.endpoint, "client-9", None)
        with pytest.raises(UserError, match="not a node of this run"):
            intruder.register("client", None, "zmq", timeout=10)
        intruder.close()
    finally:
        hub.close()


def test_local_run_uses_ephemeral_keys_and_a_foreign_process_cannot_take_a_node_name(tmp_path):
    """A local zmq run (no keys configured) makes CURVE keys for itself: a process on the same host that
    claims to be client-1 without them gets no answer, and the real client-1 stays in the run."""
    import json
    import os
    import time
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    run = subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--air", "zmq", "--out", str(out),
                            "--quiet", "--set", "data.dataset=digits", "--set", "data.clients=3", "--set",
                            "model.hidden=8", "--set", "run.rounds=6", "--set", "air.name=zmq", "--set",
                            "run.figures=false"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ep = out / "testbed" / "endpoint"
        end = time.time() + 120
        while time.time() < end and not ep.exists():
            time.sleep(0.1)
        assert ep.exists() and (out / "testbed" / "keys" / "public" / "client-1.key").exists()
        intruder = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "node", "client", "--id", "1",
                                   "--server", ep.read_text().strip(), "--register-timeout", "4"],
                                  capture_output=True, text=True, timeout=120, env=env)
        assert intruder.returncode == 2 and "no answer from the server" in intruder.stderr
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
    s = json.loads((out / "summary.json").read_text())
    assert s["control_plane"]["curve"] and s["dead_clients"] == []
