"""A key-less process of the run's OWN uid on a local zmq run (issue 28, item 2: "a key-less local process
can neither read nor steal IQ samples"). The 0700 folder does not stop it: it lists the run's IQ folder
(and /proc/net/unix, which names every bound UNIX socket) as fast as it can and connects several PULL
sockets, without keys, to every socket it finds, and to every TCP port a node listens on.

It gets 0 bytes, and every round is received with no attack named, because every hop between two
processes is a CURVE relay (it cannot handshake), the readers' ipc sockets accept only their own process
(ZMQ_IPC_FILTER_PID, set before the bind) and no sender has a socket of its own: its flowgraph writes into
an unnamed socketpair read by its relay (net/iq_relay.py, radio/iq_seal.py). Before that, the same thief
took client bursts from the push_sinks' sockets, first by name, then (CI: 2,048 samples) in the moment
between a push_sink's bind and the unlinking of its file; tests/net/test_iq_socket_birth.py connects a
thief at the birth of every socket. Out of scope (module docs): a process that can ptrace the nodes
(CAP_SYS_PTRACE) or reads the keys.

The attacked-rounds bound counts the whole run: an attacked attempt is journaled (DIR/iq_attacks.jsonl)
and a resume counts the rounds already there."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from otafl_sdr.errors import UserError
from otafl_sdr.net.iq_guard import ATTACKED, JOURNAL, IqGuard
from otafl_sdr.net.iq_relay import IqPlane, link_name
from otafl_sdr.net.security import KeyStore, make_keys, node_names
from otafl_sdr.transmission import Reception

from iq_thief import FIND_SOCKETS
from test_iq_sockets import CONFIG, _arg, _listening_ports, _rows, _wait_nodes
from test_net_testbed import _cleanup, _sets, _start

pytestmark = [pytest.mark.net, pytest.mark.gnuradio]

THIEF = r"""
import os, signal, sys, time, zmq
roots, until, conns = sys.argv[1].split(","), float(sys.argv[2]), int(sys.argv[3])
ports = [int(p) for p in sys.argv[4].split(",") if p]
dump = open(sys.argv[5], "wb") if len(sys.argv) > 5 and sys.argv[5] else None
done = []
signal.signal(signal.SIGTERM, lambda *a: done.append(1))
ctx = zmq.Context()
poller = zmq.Poller()
taken = set()
where, first = {}, {}
def take(ep):
    taken.add(ep)
    first[ep] = time.time()
    for _ in range(conns):
        s = ctx.socket(zmq.PULL); s.setsockopt(zmq.LINGER, 0); s.setsockopt(zmq.RECONNECT_IVL, 5)
        s.connect(ep); poller.register(s, zmq.POLLIN); where[s] = ep
""" + FIND_SOCKETS + r"""for p in ports:
    take(f"tcp://127.0.0.1:{p}")
print("connected", flush=True)
got = 0
while time.time() < until and not done:
    for path in sockets():
        if "ipc://" + path not in taken:
            take("ipc://" + path)
    for s, _ in poller.poll(5):
        while True:
            try:
                b = s.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            got += len(b) // 8
            if dump is not None:
                dump.write(b); dump.flush()
                with open(sys.argv[5] + ".where", "a") as f:
                    f.write(f"{where[s]} {len(b)} {time.time() - first[where[s]]:.4f}\n")
print(f"{len(taken)} {got}", flush=True)
"""


def _thief(roots: list[str], until: float, conns: int = 2, ports=(), dump=None):
    """The same-uid, key-less thief (this test's own uid, a process of its own); ``dump``: a file it writes
    every byte it gets to."""
    p = subprocess.Popen([sys.executable, "-c", THIEF, ",".join(roots), str(until), str(conns),
                          ",".join(map(str, ports)), str(dump or "")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd="/", start_new_session=True)   # (as the run's)
    assert p.stdout.readline().strip() == "connected", p.communicate()
    return p


def _stop(p) -> tuple[int, int]:
    """(sockets it connected to, samples it got)."""
    if p.poll() is None:
        p.terminate()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    tried, got = out.split()
    return int(tried), int(got)


@pytest.fixture
def keys(tmp_path):
    d = tmp_path / "keys"
    make_keys(d, node_names(2, jammer=True))
    return KeyStore(d)


def test_local_relays_carry_bursts_and_a_same_uid_thief_in_the_folders_gets_nothing(keys):
    """One host, the testbed's layout: client-0 pushes three bursts on its ipc endpoint, the channel reads
    them; a key-less thief of our uid on every socket of both nodes' folders gets 0 samples."""
    from otafl_sdr.radio.zmq_channel import Capture, ipc_endpoint, ipc_folder, push_client, release
    folder = ipc_folder("hiq-")
    client = IqPlane("client-0", "client", ipc_endpoint(folder), folder, keys)
    channel = IqPlane("channel", "channel", None, folder, keys)
    from test_iq_sockets import _burst
    L, sym = _burst()
    thief = _thief([folder], time.time() + 120, conns=4)
    try:
        for it in (1, 2, 3):
            local = client.push(it, 0)
            pusher = src = None
            try:
                pusher = push_client(L, 0, sym, 1.0, local.endpoint, tap=True)
                served = os.listdir(folder)           # the relay's CURVE socket only: the sender has none
                assert served == [os.path.basename(client.endpoint) + f".{it}.0"], served
                time.sleep(0.3)                       # the thief's turn, before the reader
                src = channel.source("client-0", client.endpoint, it, 0)
                cap = Capture({"client-0": src.endpoint}, L.n_samples)
                got = cap.run(time.time() + 20)["client-0"]
                assert pusher.wait_sent(time.time() + 10)
                sent = pusher.samples(time.time() + 10)
                assert cap.counts["client-0"] == L.n_samples and np.array_equal(got, sent)
                assert client.tag("client-0", "channel", it, 0, sent) == channel.tag("client-0", "channel", it, 0, got)
            finally:
                release(pusher)
                local.close()
                if src is not None:
                    src.close()
        time.sleep(0.3)
        tried, stolen = _stop(thief)
    finally:
        if thief.poll() is None:
            thief.kill()
        client.close()
        channel.close()
        left = os.listdir(folder)
        import shutil
        shutil.rmtree(folder)
        assert left == [], left
    assert tried >= 6 and stolen == 0, (tried, stolen)          # it found the sockets, and got nothing


@pytest.mark.slow
def test_a_same_uid_keyless_thief_gets_nothing_from_a_local_testbed_run(tmp_path):
    out = tmp_path / "run"
    # targeting=paper leaves budget for a re-sent round: on a loaded host one round timed out and went out again
    # (booked twice, as it must be), so an exactly targeted run stopped before round 4 (0.337 > 0.3 = 5 releases)
    proc = _start(["--config", CONFIG, "--air", "zmq", "--out", str(out)] +
                  _sets(["run.rounds=4", "data.clients=2", "privacy.targeting=paper", "run.figures=false"]))
    thief = None
    try:
        names = node_names(2, jammer=True)
        cmds = _wait_nodes(proc, out, names)
        folder = _arg(cmds["client-0"], "--iq-dir")
        assert os.stat(folder).st_uid == os.getuid()               # the thief's own uid: it can enter
        pids = {p["name"]: p["pid"] for p in json.loads((out / "testbed" / "pids.json").read_text())["processes"]}
        ports = sorted({p for n in names for p in _listening_ports([pids[n]]).get(pids[n], [])})
        assert ports == []                                         # no node listens on TCP (no relay port)
        thief = _thief([folder], time.time() + 400, conns=4, ports=ports, dump=tmp_path / "stolen.bin")
        stdout, stderr = proc.communicate(timeout=600)
        tried, stolen = _stop(thief)
    finally:
        if thief is not None and thief.poll() is None:
            thief.kill()
            thief.wait()
        _cleanup(proc, out)
    assert tried >= 8, tried                                      # every burst's socket tried
    where = (tmp_path / "stolen.bin.where").read_text() if (tmp_path / "stolen.bin.where").exists() else ""
    assert stolen == 0, (tried, stolen, where)                    # nothing got (the endpoints, bytes, when)
    log = (out / "testbed" / "server.log").read_text()
    summary = json.loads((out / "summary.json").read_text())
    rows = _rows(out)
    ledger = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    # every attempt that went on the air is booked, a re-sent one too
    assert len([e for e in ledger if e["uses_data"]]) == sum(r["attempts"] for r in rows if r["uses_clients"])
    assert proc.returncode == 0, _why_stopped(out, stderr)
    assert ATTACKED not in log and not summary.get("iq_attacked_rounds")            # nothing named
    assert len(rows) == 4 and not any(r["lost"] for r in rows), [(r["round"], r["lost_reason"]) for r in rows]


@pytest.mark.slow
def test_a_same_uid_keyless_thief_gets_nothing_from_the_in_process_zmq_air(tmp_path):
    tmp = tempfile.mkdtemp(prefix="hq", dir="/tmp")               # short: the air's folder is made inside
    out = tmp_path / "run"
    proc = _start(["--config", CONFIG, "--air", "zmq_inproc", "--out", str(out)] +
                  _sets(["run.rounds=4", "data.clients=2", "privacy.targeting=paper", "run.figures=false"]), env_extra={"TMPDIR": tmp})
    thief = None
    try:
        thief = _thief([tmp], time.time() + 400, conns=4)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        tried, stolen = _stop(thief)
    finally:
        if thief is not None and thief.poll() is None:
            thief.kill()
            thief.wait()
        _cleanup(proc, out)
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    assert stolen == 0, (tried, stolen)
    rows = _rows(out)
    assert len(rows) == 4 and not any(r["lost"] for r in rows), [(r["round"], r["lost_reason"]) for r in rows]


# ------------------------------------------------------------------------------------------------------
def _attacked(link="client-0>channel"):
    return Reception(None, ok=False, reason=f"{ATTACKED}: x", extra={"attacked": [f"{link}: got 0 of 3072"]})


def test_the_attacked_rounds_bound_counts_rounds_of_earlier_sessions(tmp_path):
    first, notes = IqGuard(2), []
    first.persist(tmp_path)
    assert first.judge(2, 0, _attacked(), notes, release="r2a0") == ""          # round 2 attacked: 1 of 2
    lines = (tmp_path / JOURNAL).read_text().splitlines()
    assert [json.loads(x)["round"] for x in lines] == [2] and json.loads(lines[0])["release"] == "r2a0"
    resumed = IqGuard(2)                          # a --resume: a fresh server process
    resumed.persist(tmp_path)
    assert sorted(resumed.rounds) == [2]
    stop = resumed.judge(5, 1, _attacked(), [])
    assert stop.startswith(ATTACKED) and "2 round(s) (2, 5" in stop
    fresh = IqGuard(2)                            # without the journal the count would start again
    assert fresh.judge(5, 1, _attacked(), []) == ""
    again = IqGuard(2)                            # the same round attacked again after a resume: one round
    again.persist(tmp_path)
    assert sorted(again.rounds) == [2, 5]


def test_the_attack_journal_skips_a_torn_last_line_and_refuses_damage(tmp_path):
    j = tmp_path / JOURNAL
    j.write_text(json.dumps({"round": 3, "attempt": 0, "release": "", "problems": ["p"]}) + "\n" + '{"round": 4, "att')
    g = IqGuard(3)
    g.persist(tmp_path)
    assert sorted(g.rounds) == [3]                # the torn line: its stop never ran
    for bad in ('{"round": true, "problems": []}\n', "[[[[\n", '{"round": 1}\n', "\u0000garbage\n" + "{}\n"):
        j.write_text(bad)
        with pytest.raises(UserError, match="iq_attacks.jsonl"):
            IqGuard(2).persist(tmp_path)
    j.unlink()
    j.mkdir()
    with pytest.raises(UserError, match="iq_attacks.jsonl"):
        IqGuard(2).persist(tmp_path)


def test_an_unrecordable_attack_stops_the_run(tmp_path):
    g = IqGuard(5)
    g.persist(tmp_path / "gone")                 # its folder does not exist: the journal cannot be written
    stop = g.judge(1, 0, _attacked(), [])
    assert stop.startswith(ATTACKED) and "cannot be recorded" in stop


def test_link_names_used_in_the_journal():
    assert link_name("client-0", "channel") == "client-0>channel"


def _why_stopped(out, stderr: str) -> str:
    """A failed run's stopped reason, rows and server log tail (the exit code alone says only 'stopped')."""
    summary = out / "summary.json"
    reason = json.loads(summary.read_text()).get("stopped_reason") if summary.exists() else "(no summary)"
    log = out / "testbed" / "server.log"
    return (f"stopped: {reason}; rows: {[(r['round'], r['lost_reason']) for r in _rows(out)]}\n"
            f"{stderr[-1500:]}\n{log.read_text(errors='replace')[-3000:] if log.exists() else ''}")
