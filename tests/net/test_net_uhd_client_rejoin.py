"""A restarted client node rejoins (issue 25, item 1), on a lab of UHD simulators (real libuhd, gr-uhd, zmq; one
node process per radio).

The run's only client node is SIGKILLed twice:

1. after round 2, started again at once: its radio is still claimed by the dead process (MPM: ~5 s), so the new
   node retries opening it (bounded, net/uhd_port.REOPEN_S) and reports the tries; it registers again (never
   declared dead) with a new tuning epoch;
2. after round 8, started again only once the server declared it dead (no heartbeat, no ack): the server, with
   no client for that round, waits for the restart and takes it back (net/rejoin.py: never dead for good).

Each time the calibration is redone (channels and jammer) before the client sends on it (the reason in the row
and the log); an attempt planned on the old calibration is not sent (its round lost, booked once: the booking
is proven unsent); every other round is coherent: NMSE at its theory within 25 % per round and 10 % on the mean
over the 11 or so rounds after the first restart.

Why not 5 % (issue 25 asks for it; open, firmware_notes/second_week.md): one round's NMSE / theory scatters by
sqrt(2 / d) = 5.5 % (d = 650, chi-square), so 11 rounds alone would make 5 % a 3-sigma test, but the rounds
that share a calibration share a bias: per-calibration means 0.99, 1.10, 1.03 in one run (1.01, 1.01 in another,
0.97-1.02 in others), i.e. each calibration's estimation error moves its rounds' NMSE by several per cent. The
mean over three calibrations is then good to ~4 %: 10 % is what this run can assert without failing by chance."""
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

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"
ROUNDS = 16
SECOND_KILL = 8
RECEIVED = "received the capture of release"


def _cli(args, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTAFL_")}
    env.update(UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1")
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)


def _rows(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def test_a_restarted_client_rejoins_is_recalibrated_and_the_rounds_after_are_at_theory(uhd_lab, tmp_path):
    out = tmp_path / "run"
    ep_file = tmp_path / "endpoint"
    server = _cli(["node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                   "--endpoint-file", str(ep_file), "--set", f"run.rounds={ROUNDS}", "--set", "privacy.eps=200",
                   "--set", "net.diagnostics=true", "--set", "air.recalibrate_every=0"], tmp_path / "server.log")
    end = time.monotonic() + 120
    while not ep_file.exists():
        assert server.poll() is None and time.monotonic() < end, (tmp_path / "server.log").read_text()[-3000:]
        time.sleep(0.2)
    ep = ep_file.read_text().strip()

    def client():
        return _cli(["node", "client", "--server", ep, "--id", "0", "--air", "uhd"], tmp_path / "client-0.log")
    nodes = [_cli(["node", "receiver", "--server", ep, "--air", "uhd"], tmp_path / "receiver.log"), client(),
             _cli(["node", "jammer", "--server", ep, "--air", "uhd"], tmp_path / "jammer.log")]
    rounds = out / "rounds.jsonl"
    try:
        end = time.monotonic() + 300
        while len(_rows(rounds)) < 2:
            assert server.poll() is None and time.monotonic() < end, (tmp_path / "server.log").read_text()[-4000:]
            time.sleep(0.2)
        os.killpg(nodes[1].pid, signal.SIGKILL)          # 1. the client's node killed, started again at once
        nodes[1].wait()
        nodes.append(client())
        while len(_rows(rounds)) < SECOND_KILL:
            assert server.poll() is None and time.monotonic() < end + 300, (tmp_path / "server.log").read_text()[-4000:]
            time.sleep(0.2)
        seen = (tmp_path / "server.log").read_text(errors="replace").count("client-0 dead")
        os.killpg(nodes[-1].pid, signal.SIGKILL)         # 2. killed again, started once the server declared it dead
        nodes[-1].wait()
        while (tmp_path / "server.log").read_text(errors="replace").count("client-0 dead") <= seen:
            assert server.poll() is None and time.monotonic() < end + 500, (tmp_path / "server.log").read_text()[-4000:]
            time.sleep(0.2)
        nodes.append(client())
        rc = server.wait(600)
    finally:
        for p in [server] + nodes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in [server] + nodes:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    log = (tmp_path / "server.log").read_text(errors="replace")
    client_log = (tmp_path / "client-0.log").read_text(errors="replace")
    rows = _rows(rounds)
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 0 and summary["stopped_reason"] == "" and "Traceback" not in log, log[-4000:]
    table = [(r["round"], r["lost"], r.get("recalibration"), r["aggregate_nmse"], r["aggregate_nmse_theory"])
             for r in rows]
    assert len(rows) == ROUNDS, table

    # 1. the reopen: where the new node reached its radio while the dead process's claim held (timing: the claim
    # lasts ~5 s, the node's start-up as long), it retried, bounded, and both the node and the server said so
    reopened = "opening its radio failed (try 1" in client_log
    assert not reopened or ("claim" in client_log and "opened its radio after" in log), client_log[-3000:]
    # 2. never dead for good: declared dead, rejoined
    dead_round = int(log.rsplit("client-0 dead", 1)[0].rsplit("iteration ", 1)[1].split(":")[0])   # the 2nd kill
    assert dead_round > SECOND_KILL
    assert f"client-0 rejoined the run (restarted after it was declared dead in round {dead_round})" in log
    assert any("client-0 rejoined" in n for n in summary["notes"]), summary["notes"]
    # each restart: recalibrated (a new tuning epoch) before the client sent on the new tuning
    recal = [r for r in rows if r.get("recalibration")]
    assert len(recal) == 2 and all("tuning epoch changed: client-0" in r["recalibration"] for r in recal), table
    assert 3 <= recal[0]["round"] <= 5 and dead_round <= recal[1]["round"] <= dead_round + 1, table
    assert "recalibrating before the next round: tuning epoch changed: client-0" in log
    # a round planned on the old calibration is not sent: lost, booked once, its booking proven unsent
    lost = [r for r in rows if r["lost"]]
    assert all("calibration is stale" in r["lost_reason"] for r in lost) and len(lost) <= 2, table
    assert all(any(0 < c["round"] - r["round"] <= 1 for c in recal) for r in lost), table
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn and [e["round"] for e in entries] == list(range(1, ROUNDS + 1)), entries
    echoed = [ln.rsplit(" ", 1)[-1] for ln in log.splitlines() if RECEIVED in ln]
    lost_rounds = {r["round"] for r in lost}
    assert sorted(echoed) == sorted(e["release"] for e in entries if e["round"] not in lost_rounds)
    journal = [json.loads(ln) for ln in (out / "privacy_ledger.sent").read_text().splitlines() if ln.strip()]
    for e in entries:
        if e["round"] in lost_rounds:                   # withdrawn: provably never on the air
            assert [j.get("withdrawn", False) for j in journal if j["release"] == e["release"]][-1], journal
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(entries, 1e-5), rel=1e-3)

    # coherent after the first recalibration: NMSE at its theory (see the doc for why 10 %, not 5 %)
    after = [r for r in rows if r["round"] >= recal[0]["round"] and not r["lost"]]
    ratios = np.array([r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in after])
    assert len(ratios) >= ROUNDS - 6, table
    assert np.all(np.abs(ratios - 1) < 0.25), table
    assert float(np.mean(ratios)) == pytest.approx(1.0, abs=0.10), table
    epochs = [[r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in after if lo <= r["round"] < hi]
              for lo, hi in ((recal[0]["round"], recal[1]["round"]), (recal[1]["round"], ROUNDS + 1))]
    print(f"\nNMSE / theory after the first restart: mean {np.mean(ratios):.4f}, per-round std "
          f"{np.std(ratios, ddof=1):.4f} (chi-square spread sqrt(2/650) = {np.sqrt(2 / 650):.4f}), {len(ratios)} rounds "
          f"(standard error {np.std(ratios, ddof=1) / np.sqrt(len(ratios)):.4f}); lost {sorted(lost_rounds)}, "
          f"recalibrated before {[r['round'] for r in recal]}, declared dead in round {dead_round}, reopen retried: {reopened}; "
          f"per-calibration means {[round(float(np.mean(e)), 3) for e in epochs if e]}")
