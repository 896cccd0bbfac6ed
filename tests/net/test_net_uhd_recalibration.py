"""Calibration epochs and link health on the uhd testbed (issue 25, items 1-2), on a lab of UHD simulators
(real libuhd, gr-uhd, zmq; one node process per radio, as tests/net/test_net_uhd_nodes.py).

One run: the receiver node is killed and started again after round 2 (its radio is opened again: a new
tuning epoch), and later the client's path is given a 1 rad phase step through the simulator's cable
(SimulatedLab.set_cable). The server must invalidate the calibration and recalibrate (channels and jammer)
before the next round in both cases, with the event in rounds.jsonl and its log; the drift is seen in the
round's link-health columns; the rounds after each recalibration are coherent (NMSE at its theory with
diagnostics: within 25 % per round, 10 % on average) and their link health is back within its limits; the ledger is rechecked with dp-accounting."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.privacy.ledger import read_chain
from dp_reference import independent_pld_epsilon
from test_net_uhd_nodes import NO_FIGURES

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"
ENV = dict(os.environ, UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1")
ROUNDS = 8
CLAIM_EXPIRY_S = 7.0
PHASE_STEP = 1.0          # rad, injected on the client's path (lab radio 1) after round 5


def _cli(*args, log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=ENV, start_new_session=True)


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _wait_rows(server, rounds: Path, n: int, logs: Path) -> None:
    end = time.monotonic() + 300
    while len(_rows(rounds)) < n:
        assert server.poll() is None, (logs / "server.log").read_text()[-4000:]
        assert time.monotonic() < end, f"fewer than {n} rows after 300 s"
        time.sleep(0.2)


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_restarted_receiver_and_a_drifting_cable_are_recalibrated_and_the_rounds_stay_coherent(uhd_lab, tmp_path):
    out = tmp_path / "run"
    ep_file = tmp_path / "endpoint"
    server = _cli("node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                  "--endpoint-file", str(ep_file), "--set", f"run.rounds={ROUNDS}", "--set", "privacy.eps=50",
                  "--set", "net.diagnostics=true", "--set", "air.recalibrate_every=0", "--set", NO_FIGURES,
                  log=tmp_path / "server.log")
    end = time.monotonic() + 120
    while not ep_file.exists():
        assert server.poll() is None and time.monotonic() < end, (tmp_path / "server.log").read_text()
        time.sleep(0.2)
    ep = ep_file.read_text().strip()

    def receiver():
        return _cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log")
    nodes = [receiver(),
             _cli("node", "client", "--server", ep, "--id", "0", "--air", "uhd", log=tmp_path / "client-0.log"),
             _cli("node", "jammer", "--server", ep, "--air", "uhd", log=tmp_path / "jammer.log")]
    rounds = out / "rounds.jsonl"
    try:
        _wait_rows(server, rounds, 2, tmp_path)
        os.killpg(nodes[0].pid, signal.SIGKILL)          # the receiver's host reboots: its radio is tuned anew
        nodes[0].wait()
        time.sleep(CLAIM_EXPIRY_S)                       # the dead node's claim on its USRP expires (MPM: 5 s)
        nodes.append(receiver())
        _wait_rows(server, rounds, 5, tmp_path)
        uhd_lab.set_cable(1, phase_rad=PHASE_STEP)        # the client's path turns by 1 rad (lab radio 1)
        rc = server.wait(420)
    finally:
        _stop([server] + nodes)
    log = (tmp_path / "server.log").read_text()
    rows = _rows(rounds)
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 0 and summary["stopped_reason"] == "", log[-4000:]
    # a round lost to the receiver's restart (killed mid-exchange) runs again at the run's end (net/rejoin.py)
    assert len(rows) == ROUNDS + summary.get("extended_by", 0) and "Traceback" not in log
    assert sum(not r["lost"] for r in rows) >= ROUNDS, [(r["round"], r["lost_reason"]) for r in rows]
    table = [(r["round"], r["lost"], r.get("recalibration"), r["link_health"],
              r["aggregate_nmse"], r["aggregate_nmse_theory"]) for r in rows]

    # 1. the receiver's new tuning epoch: recalibrated before a round after the restart, logged and in the row
    recal = [r for r in rows if r.get("recalibration")]
    restart = [r for r in recal if r["recalibration"].startswith("tuning epoch changed: receiver")]
    assert restart and 3 <= restart[0]["round"] <= 5, table
    assert "recalibrating before the next round: tuning epoch changed: receiver" in log

    # 2. the phase step: seen in the link-health columns, beyond air.drift_phase_rad, then recalibrated
    stepped = [r for r in rows if r["link_health"] and abs(r["link_health"]["phase_rad"]) > 0.35]
    assert stepped, table
    first = stepped[0]
    assert abs(abs(first["link_health"]["phase_rad"]) - PHASE_STEP) < 0.1, table
    drifted = [r for r in recal if r["recalibration"].startswith("link drift: reference phase")]
    assert drifted and drifted[0]["round"] == first["round"] + 1, table
    assert "link drift beyond its limits: reference phase" in log

    # coherent rounds: every demodulated round's reference at its calibration outside the drifted one, and
    # the aggregate's error at its theory (5 %, mean over the rounds after the first recalibration)
    for r in rows:
        if r is first or r["lost"]:
            continue
        h = r["link_health"]
        assert abs(h["gain_db"]) < 1.0 and abs(h["phase_rad"]) < 0.35 and h["timing_offset"] == 0, table
    # (one round's NMSE / theory scatters by sqrt(2 / d) = 5.5 % at d = 650: over the 3-5 rounds here the mean's
    # standard error is ~3 %, and rounds sharing a calibration share a bias of several per cent: why 5 % is not
    # asserted yet, firmware_notes/second_week.md, "the 5 % NMSE question")
    after = [r for r in rows if r["round"] >= restart[0]["round"] and not r["lost"]]
    assert len(after) >= 3, table
    for r in after:
        assert r["aggregate_nmse"] == pytest.approx(r["aggregate_nmse_theory"], rel=0.25), table
    ratio = np.mean([r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in after])
    assert ratio == pytest.approx(1.0, abs=0.10), table
    # the calibration file is the latest one (channels and jammer measured again)
    cal = json.loads((out / "calibration.json").read_text())
    assert abs(np.angle(complex(*cal["clients"][0]["h"])) - PHASE_STEP) < 0.1
    assert cal["jammer_noise"]

    # every release the receiver echoed was booked; eps rechecked independently
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn
    echoed = [ln.rsplit(" ", 1)[-1] for ln in log.splitlines() if "received the capture of release" in ln]
    booked = {e.get("release") for e in entries}
    assert echoed and set(echoed) <= booked
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(entries, 1e-5), rel=1e-3)
