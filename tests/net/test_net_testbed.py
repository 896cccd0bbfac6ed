"""The zmq testbed as separate processes (server, 3 clients, jammer, receiver, channel emulator) on
127.0.0.1, with injected faults. Each test starts `otafl-sdr run` in a subprocess and cleans up every
process it started (the supervisor's session and every pid it recorded), whatever happens.

Faults (``OTAFL_NET_DIE_AT``: a node SIGKILLs itself at a named protocol point, so "mid-round" is a
known moment): a client killed while training, the receiver killed when its capture starts, the
server killed right after the ledger recorded a round (before the model is released), and Ctrl-C to
the supervisor."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from node_procs import cli_in_process

pytestmark = [pytest.mark.net, pytest.mark.slow]

TINY = ["run.seed=5", "run.rounds=3", "run.progress=false", "run.torch_threads=1", "data.dataset=digits",
        "data.clients=3", "model.hidden=16", "train.local_epochs=1", "algorithm.name=fedavg",
        "privacy.eps=0.3", "net.timeout_s=40", "net.heartbeat_s=0.5", "net.diagnostics=true"]
RUN_TIMEOUT_S = 600


def _sets(extra=()):
    out = []
    for s in list(TINY) + list(extra):
        out += ["--set", s]
    return out


def _pids(out: Path) -> list[int]:
    f = out / "testbed" / "pids.json"
    if not f.exists():
        return []
    return [p["pid"] for p in json.loads(f.read_text())["processes"]]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"       # a zombie is dead
    except FileNotFoundError:
        return False


def _cleanup(proc: subprocess.Popen | None, out: Path) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for pid in _pids(out):
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _start(args, env_extra=None) -> subprocess.Popen:
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("OTAFL_NET_DIE_AT", None)
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--quiet"] + args, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def run_cli(args, out: Path, env_extra=None) -> subprocess.CompletedProcess:
    proc = _start(args, env_extra)
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        _cleanup(proc, out)


def _rows(out: Path) -> list[dict]:
    return [json.loads(l) for l in (out / "rounds.jsonl").read_text().splitlines() if l.strip()]


def _ledger(out: Path) -> list[dict]:
    rec = [json.loads(l) for l in (out / "privacy_ledger.jsonl").read_text().splitlines() if l.strip()]
    for r in rec:
        for k in ("time", "prev", "hash"):     # the hash chain covers the wall-clock time and the config
            r.pop(k)
        r.pop("release", None)                 # a random id per release where the noise is secret (zmq)
    return rec


def _assert_no_orphans(out: Path) -> None:
    pids = _pids(out)
    assert len(pids) >= 7
    end = time.time() + 10
    while time.time() < end and any(_alive(p) for p in pids):
        time.sleep(0.2)
    assert not [p for p in pids if _alive(p)], "testbed processes outlived the run"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """An uninterrupted testbed run of the tiny config."""
    out = tmp_path_factory.mktemp("tb") / "base"
    r = run_cli(["--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out)] + _sets(), out)
    assert r.returncode == 0, r.stderr[-3000:] + (out / "testbed" / "server.log").read_text()[-3000:]
    return out


def test_testbed_run_writes_the_contract_and_matches_in_process(baseline, tmp_path):
    from otafl_sdr.results.files import ROUND_FIELDS, SUMMARY_FIELDS
    rows = _rows(baseline)
    summary = json.loads((baseline / "summary.json").read_text())
    assert summary["air"] == "zmq" and summary["rounds"] == 3 and not summary["stopped_reason"]
    for k in SUMMARY_FIELDS:
        assert k in summary
    for f in ("config.toml", "rounds.jsonl", "summary.json", "privacy_ledger.jsonl", "checkpoint.pt"):
        assert (baseline / f).is_file()
    for row in rows:
        for k in ROUND_FIELDS:
            assert k in row
        assert not row["lost"] and row["transmitting"] == 3 and row["cj_active"]
        assert row["aggregate_nmse"] is not None and row["aggregate_nmse_theory"] is not None
    assert summary["dead_clients"] == [] and summary["control_plane"]["diagnostic_payloads"]
    assert summary["private"].startswith("not private (diagnostics)")
    _assert_no_orphans(baseline)
    # the same config in process on the loopback air spends exactly the same privacy (same seeded
    # channels, power decisions and jammer), and its aggregate error is of the same size
    # (in this process: the loopback air is one flowgraph here, no process boundary is under test)
    ref = tmp_path / "loopback"
    r = cli_in_process("run", "--quiet", "--config", "sim_loopback/default.toml", "--air", "loopback", "--out", ref,
                       *_sets())
    assert r.returncode == 0, r.stderr[-2000:]
    strip = [{k: v for k, v in rec.items() if k != "eps"} for rec in _ledger(ref)]
    assert strip == [{k: v for k, v in rec.items() if k != "eps"} for rec in _ledger(baseline)]
    assert [rec["eps"] for rec in _ledger(ref)] == [rec["eps"] for rec in _ledger(baseline)]
    # round 1 starts from the same model; later rounds differ by design: the zmq nodes' noise comes from
    # OS entropy (the server cannot regenerate it), so the two runs' models part after the first round
    assert rows[0]["aggregate_nmse_theory"] == pytest.approx(_rows(ref)[0]["aggregate_nmse_theory"], rel=0.05)


def test_server_killed_then_resume_equals_the_uninterrupted_run(baseline, tmp_path):
    out = tmp_path / "killed"
    r = run_cli(["--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out)] + _sets(), out,
                env_extra={"OTAFL_NET_DIE_AT": "server@recorded:2"})
    assert r.returncode == 5, r.stderr[-3000:]
    assert "resume" in r.stderr.lower()
    _assert_no_orphans(out)
    # round 2 was recorded in the ledger but never released: the checkpoint is round 1's
    assert [x["round"] for x in _rows(out)] == [1]
    assert [x["round"] for x in _ledger(out)] == [1, 2]
    r2 = run_cli(["--resume", str(out)], out)
    assert r2.returncode == 0, r2.stderr[-3000:] + (out / "testbed" / "server.log").read_text()[-3000:]
    base_rows, rows = _rows(baseline), _rows(out)
    assert [x["round"] for x in rows] == [1, 2, 3]
    for a, b in zip(base_rows, rows):
        # the privacy spend is identical; the models are not (node-entropy noise differs run to run)
        for k in ("eps_rdp", "eps_pld", "eps_paper", "sigma_eff", "sensitivity", "alpha_u", "cj_power"):
            assert a[k] == b[k], (k, a["round"], a[k], b[k])
        assert 0 <= b["test_accuracy"] <= 1
    assert _ledger(out) == _ledger(baseline)            # spend never forgotten, never counted twice
    _assert_no_orphans(out)


def test_dead_client_and_receiver_with_curve_keys(tmp_path):
    """client-1 dies while training round 2 (dropped, run goes on, named in the summary); the receiver
    dies as round 3's capture starts (restarted by the supervisor, the round retried once it is back).
    The control plane runs with CURVE keys (forced on by net.keys_dir, though on loopback)."""
    from otafl_sdr.cli.main import main
    keys = tmp_path / "keys"
    assert main(["keys", str(keys), "--clients", "3"]) == 0
    out = tmp_path / "faults"
    r = run_cli(["--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out)]
                + _sets([f"net.keys_dir={json.dumps(str(keys))}", "net.diagnostics=false",
                           "privacy.targeting=paper"]), out,   # paper rule: room for the retried round
                env_extra={"OTAFL_NET_DIE_AT": "client-1@round_start:2,receiver@receive:3"})
    assert r.returncode == 0, r.stderr[-3000:] + (out / "testbed" / "server.log").read_text()[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    rows = _rows(out)
    assert [x["round"] for x in rows] == [1, 2, 3] and not summary["stopped_reason"]
    assert summary["dead_clients"] == ["client-1"]
    assert any("client-1 dead" in n and "dropped" in n for n in summary["notes"])
    assert rows[0]["transmitting"] == 3 and rows[1]["transmitting"] == 2 and rows[2]["transmitting"] == 2
    assert rows[2]["attempts"] == 2 and not rows[2]["lost"]
    assert any("receiver" in n and "retried" in n for n in summary["notes"])
    assert summary["control_plane"]["curve"] and not summary["control_plane"]["diagnostic_payloads"]
    assert rows[0]["aggregate_nmse"] is None                       # nothing data-dependent leaves a client
    assert rows[0]["clipped_fraction"] is None and "private" not in summary
    attempts = [(x["round"], x["attempt"]) for x in _ledger(out)]
    assert attempts == [(1, 0), (2, 0), (3, 0), (3, 1)]             # the retransmission is spent too
    assert "restarting it" in r.stderr
    _assert_no_orphans(out)


def test_ctrl_c_tears_the_testbed_down_with_a_checkpoint(tmp_path):
    out = tmp_path / "ctrlc"
    proc = _start(["--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out)]
                  + _sets(["run.rounds=50"]))
    try:
        end = time.time() + RUN_TIMEOUT_S
        while time.time() < end and proc.poll() is None:
            if (out / "rounds.jsonl").exists() and _rows(out):
                break
            time.sleep(0.3)
        assert proc.poll() is None and _rows(out), "the run did not get going"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr[-2000:]
    finally:
        _cleanup(proc, out)
    _assert_no_orphans(out)
    summary = json.loads((out / "summary.json").read_text())
    assert "interrupted" in summary["stopped_reason"]
    assert (out / "checkpoint.pt").is_file() and summary["rounds"] >= 1
