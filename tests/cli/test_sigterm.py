"""SIGTERM (what `kill`, SLURM and systemd send) to a real `otafl-sdr run` mid-run stops it as Ctrl-C does
(issue 35, item 4): exit 143, one line on stderr, summary.json with the stop reason, every process of the run
gone within 5 s of the signal, and the folder resumes. On the seeded airs (sim, loopback) `run --resume`
completes and equals an uninterrupted run (rows and ledger, as tests/run/test_resume.py asserts for Ctrl-C); on
the zmq testbed (10 clients) every check of `--resume` and `verify` pass (a full 10-client resume, measured
once: rounds 1-3, the abandoned round booked again, verify OK; ~30 s more of node start-up, left out here).
A SIGTERM to `sweep` stops its running cell with its summary and starts no other: the folder resumes (its cells
resume as runs do; `sweep --dry-run` names their states)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main

TINY = ["run.seed=5", "run.progress=false", "run.torch_threads=1", "data.dataset=digits", "model.hidden=16",
        "train.local_epochs=1", "algorithm.name=fedavg", "privacy.eps=0.3",
        "run.figures=false"]         # no test here reads a run's figures (a SIGTERM'd run leaves them to `report`)
GONE_S = 5.0                 # every process of the run gone this long after the signal
START_S = 300.0              # the run's first booking or row (10 zmq nodes import torch and GNU Radio on 2 cores)
STOPPED = "terminated (SIGTERM); resume with --resume"
# rounds of the seeded run: the signal must land among them (a sim round takes ~20 ms and a loopback round
# ~25 ms once its flowgraph is built: 6 loopback rounds were all done before the signal once, exit 0)
SEEDED_ROUNDS = {"sim": 60, "loopback": 60}


def _sets(extra=()) -> list[str]:
    return [a for s in [*TINY, *extra] for a in ("--set", s)]


def _lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []


def _strip(rows, drop=("wall_s", "air_s", "time", "prev", "hash", "release")):   # wall-clock and random ids
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _start(args) -> subprocess.Popen:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.getcwd())
    env.pop("OTAFL_NET_DIE_AT", None)
    return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _terminate_when(proc: subprocess.Popen, ready, groups) -> tuple[str, float]:
    """SIGTERM ``proc`` once ``ready()``; returns its stderr and the seconds until every process of ``groups()``
    (the run's process groups) was gone. The process is reaped first: a zombie still counts for killpg."""
    end = time.monotonic() + START_S
    while time.monotonic() < end and proc.poll() is None and not ready():
        time.sleep(0.05)
    assert proc.poll() is None and ready(), f"the run did not get going: {proc.poll()} {proc.stderr.read()[-3000:]}"
    pgids = groups()
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    while time.monotonic() - t0 < 30 and any(_group_alive(g) for g in pgids):
        time.sleep(0.02)
    return err, time.monotonic() - t0


def _kill(proc: subprocess.Popen, groups) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _messages(err: str) -> list[str]:
    return [l for l in err.splitlines() if l.strip() and not l.startswith("otafl-sdr: warning:")]


def test_signals_raise_raises_once_then_ignores_and_restores_the_old_handler():
    import pickle

    import threading

    from otafl_sdr.errors import Terminated, signals_raise
    # handlers live in the main thread only (pytest and its xdist workers run tests there); elsewhere the signal
    # below would kill the test process, so say so instead of skipping
    assert threading.current_thread() is threading.main_thread(), "signal handlers need the main thread"
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as e:
        with signals_raise():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
            finally:
                os.kill(os.getpid(), signal.SIGTERM)      # while stopping: ignored, the summary gets written
                time.sleep(0.05)
    assert isinstance(e.value, KeyboardInterrupt) and e.value.signum == signal.SIGTERM and e.value.signame == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before
    again = pickle.loads(pickle.dumps(e.value))           # from a sweep's worker to the sweep
    assert isinstance(again, Terminated) and again.signum == signal.SIGTERM


@pytest.mark.experiment
@pytest.mark.parametrize("air", ["sim", pytest.param("loopback", marks=pytest.mark.gnuradio)])
def test_sigterm_stops_a_seeded_run_as_ctrl_c_and_the_resume_equals_the_uninterrupted_run(tmp_path, air, capsys):
    # enough rounds that the signal lands in them: a sim round takes ~20 ms, less than the poll below, and 6 of
    # them were sometimes all done (the run then stops in its summary: "terminated" without "run stopped")
    n = SEEDED_ROUNDS[air]
    sets = _sets([f"run.rounds={n}", "data.clients=3"])
    out = tmp_path / "cut"
    proc = _start(["run", "--config", "sim_loopback/default.toml", "--air", air, "--out", str(out), "--quiet", *sets])
    try:
        err, gone_s = _terminate_when(proc, lambda: bool(_lines(out / "rounds.jsonl")), lambda: [proc.pid])
    finally:
        _kill(proc, [proc.pid])
    assert proc.returncode == 143, err[-3000:]
    assert _messages(err) == [f"otafl-sdr: run stopped: {STOPPED}"], err[-3000:]
    assert gone_s < GONE_S, f"the run's processes outlived the signal by {gone_s:.1f} s"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == STOPPED and 1 <= summary["rounds"] < n
    assert summary["rounds"] == len(_lines(out / "rounds.jsonl"))     # the summary counts what the file holds
    assert any("otafl-sdr report" in note for note in summary["notes"])      # the figures are left to `report`
    assert not (out / ".lock").exists()
    assert main(["run", "--resume", str(out), "--quiet"]) == 0          # as a Ctrl-C'd run resumes
    ref = tmp_path / "ref"
    assert main(["run", "--config", "sim_loopback/default.toml", "--air", air, "--out", str(ref), "--quiet", *sets]) == 0
    capsys.readouterr()
    a, b = _strip(_lines(ref / "rounds.jsonl")), _strip(_lines(out / "rounds.jsonl"))
    assert [r["round"] for r in b] == list(range(1, n + 1))
    for ra, rb in zip(a, b):
        for k, v in ra.items():
            if isinstance(v, float):
                assert rb[k] == pytest.approx(v, rel=1e-6, abs=1e-9), (rb["round"], k)
            else:
                assert rb[k] == v, (rb["round"], k)
    # spend never forgotten, never counted twice (the round in flight at the signal was booked once)
    assert _strip(_lines(out / "privacy_ledger.jsonl")) == _strip(_lines(ref / "privacy_ledger.jsonl"))
    resumed = json.loads((out / "summary.json").read_text())
    assert not resumed["stopped_reason"]
    assert resumed["eps_pld"] == json.loads((ref / "summary.json").read_text())["eps_pld"]
    print(f"{air}: every process gone {gone_s:.2f} s after SIGTERM")      # (pytest -rP shows it)


@pytest.mark.net
@pytest.mark.slow
@pytest.mark.gnuradio
@pytest.mark.experiment
def test_sigterm_stops_a_10_client_zmq_testbed_within_5_s_and_it_resumes(tmp_path, capsys):
    """SIGTERM to the supervisor once round 2 is booked: the server abandons the round in flight (booked; a
    resume books it again unless the sent-journal proves it never went out), writes its summary and tells the
    nodes; the supervisor, the server and the 13 nodes are gone within 5 s."""
    out = tmp_path / "zmq"
    proc = _start(["run", "--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out), "--quiet",
                   *_sets(["run.rounds=3", "data.clients=10", "net.timeout_s=60", "net.heartbeat_s=0.5",
                           "privacy.targeting=paper"])])      # room to book the abandoned round again on resume

    def groups() -> list[int]:
        f = out / "testbed" / "pids.json"
        return [proc.pid] + ([json.loads(f.read_text())["pgid"]] if f.exists() else [])

    try:
        err, gone_s = _terminate_when(proc, lambda: len(_lines(out / "privacy_ledger.jsonl")) >= 2, groups)
        pids = [p["pid"] for p in json.loads((out / "testbed" / "pids.json").read_text())["processes"]]
    finally:
        _kill(proc, groups())
    assert proc.returncode == 143, err[-3000:]
    assert _messages(err) == [f"otafl-sdr: {STOPPED.split(';')[0]}; the testbed is down. Resume with: "
                              f"otafl-sdr run --resume {out}"], err[-3000:]
    assert len(pids) == 14                                # the server, 10 clients, jammer, receiver, channel
    assert gone_s < GONE_S, f"testbed processes outlived the signal by {gone_s:.1f} s"
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == STOPPED and summary["clients"] == 10
    booked = [e["round"] for e in _lines(out / "privacy_ledger.jsonl")]
    assert len(booked) >= 2 and len(_lines(out / "rounds.jsonl")) < 3
    # the folder resumes: every check `run --resume` makes (read-only, the booked figures re-derived), then the
    # resume itself as a testbed (the 14 processes again): every round, what was booked before kept as its prefix
    # (the noise is the nodes' OS entropy, so "identically" is the ledger's prefix and the rounds, not the bits)
    assert main(["run", "--resume", str(out), "--dry-run"]) == 0
    before = _lines(out / "privacy_ledger.jsonl")
    again = _start(["run", "--resume", str(out), "--quiet"])
    try:
        _, err2 = again.communicate(timeout=300)
    finally:
        _kill(again, [])
    assert again.returncode == 0, err2[-3000:]
    after = _lines(out / "privacy_ledger.jsonl")
    assert after[:len(before)] == before and len(after) >= 3
    assert [r["round"] for r in _lines(out / "rounds.jsonl")] == [1, 2, 3]
    assert not json.loads((out / "summary.json").read_text())["stopped_reason"]
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()
    print(f"zmq, 10 clients: supervisor, server and 13 nodes gone {gone_s:.2f} s after SIGTERM; resumed to 3 rounds")


@pytest.mark.experiment
def test_sigterm_to_a_sweep_stops_its_cells_and_the_folder_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""[sweep]
name = "t"
out = "{out}"
seeds = [1]
set = ["run.rounds=10", "data.dataset=digits", "data.clients=3", "model.hidden=8", "train.local_epochs=1",
       "air.name=sim", "privacy.unit=client", "privacy.eps=1000", "power.jammer=false", "run.torch_threads=1"]

[grid]
"train.lr" = [0.05, 0.1]
""")
    proc = _start(["sweep", str(spec), "--workers", "1", "--quiet"])
    try:
        err, gone_s = _terminate_when(proc, lambda: any(_lines(p) for p in out.glob("*/rounds.jsonl")),
                                      lambda: [proc.pid])
    finally:
        _kill(proc, [proc.pid])
    assert proc.returncode == 143 and _messages(err) == ["otafl-sdr: terminated (SIGTERM)"], err[-3000:]
    assert gone_s < 30                                   # the running cell stopped with its summary, the table written
    (cell,) = [p.parent for p in out.glob("*/summary.json")]
    assert json.loads((cell / "summary.json").read_text())["stopped_reason"] == STOPPED
    assert "terminated" in (out / "sweep.csv").read_text()
    assert main(["sweep", str(spec), "--dry-run"]) == 0       # the stopped cell resumes, the other starts
    states = sorted(l.split()[0] for l in capsys.readouterr().out.splitlines()[:-1])
    assert states == ["new", "resume"], states
    print(f"sweep: every process gone {gone_s:.2f} s after SIGTERM")
