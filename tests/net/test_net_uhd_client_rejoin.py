"""A restarted client node rejoins (issue 25, item 1), on a lab of UHD simulators (real libuhd, gr-uhd, zmq; one
node process per radio).

The run's only client node is SIGKILLed twice:

1. after round 2, started again at once: its radio is still claimed by the dead process (MPM: ~5 s), so the new
   node retries opening it (bounded, net/uhd_port.REOPEN_S) and reports the tries; it registers again (never
   declared dead) with a new tuning epoch;
2. when round 7 starts (it kills itself on receiving round_start: net/faults.py, a known moment), started again
   only once the server declared it dead (no ack): the server, with no client for that round, waits for the
   restart and takes it back (net/rejoin.py: never dead for good).

Each time the calibration is redone (channels and jammer) before the client sends on it (the reason in the row
and the log); an attempt planned on the old calibration is not sent (its round lost, booked once: the booking
is proven unsent), one the killed client was transmitting is lost as booked, and each lost round is run once
more at the end; every other round is coherent: NMSE at its theory within 5 % on the mean of each calibration
epoch (issue 25's bar), the jammer on (privacy.eps = 20 over the run: its noise is 98 % of the aggregate's; at
eps 2 or 10 this model's jammer would pass the DAC's full scale).

The statistics: one round's NMSE / theory is a chi-square ratio with d degrees of freedom, spread sqrt(2 / d); the
model is an MLP (hidden 128: d = 9610, 1.4 % a round) so that an epoch's mean over its n >= 2 rounds has a
standard error of at most 1.02 % and 5 % is a bound of 4.9 standard errors or more (checked below from d and n;
about 1e-6 a run to fail by chance). With d = 650 (logreg) the spread was 5.5 % a round and 5 % could not be
asserted on an epoch. The per-calibration bias once seen here (epoch means 0.99 / 1.10 / 1.03 in one run, eps 200
and no jammer) did not recur in the runs that measured it; what did move whole rounds was the jammer's burst
missing the simulator's capture (radio/uhd_radio.sim_hold): NMSE / theory 0.005 in 3 of 10 rounds with the jammer
on, before the fix. A round that lost the jammer's noise would be 98 % under its theory here: each round is also
held within 15 % (10 sigma)."""
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
from node_procs import stop_nodes
from test_net_uhd_nodes import NO_FIGURES

from otafl_sdr.net.faults import ENV as DIE_ENV

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"
ROUNDS = 12
SECOND_KILL = 6
RECEIVED = "received the capture of release"
HIDDEN = 128
D = 64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10      # the MLP's parameters on digits (8 x 8 -> 128 -> 10): 9610


def _cli(args, log: Path, env_extra=None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTAFL_")}
    env.update(UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1", **(env_extra or {}))
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)


def _rows(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def test_a_restarted_client_rejoins_is_recalibrated_and_the_rounds_after_are_at_theory(uhd_lab, tmp_path):
    out = tmp_path / "run"
    ep_file = tmp_path / "endpoint"
    server = _cli(["node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                   "--endpoint-file", str(ep_file), "--set", f"run.rounds={ROUNDS}", "--set", "privacy.eps=20",
                   "--set", "model.name=mlp", "--set", f"model.hidden={HIDDEN}", "--set", "net.diagnostics=true",
                   "--set", "air.recalibrate_every=0", "--set", NO_FIGURES], tmp_path / "server.log")
    end = time.monotonic() + 120
    while not ep_file.exists():
        assert server.poll() is None and time.monotonic() < end, (tmp_path / "server.log").read_text()[-3000:]
        time.sleep(0.2)
    ep = ep_file.read_text().strip()

    def client(env_extra=None):
        return _cli(["node", "client", "--server", ep, "--id", "0", "--air", "uhd"], tmp_path / "client-0.log",
                    env_extra)
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
        # 2. the new node kills itself when round SECOND_KILL + 1 starts (net/faults.py: a known moment, no ack
        # sent); it is started again only once the server declared it dead
        nodes.append(client({DIE_ENV: f"client-0@round_start:{SECOND_KILL + 1}"}))
        while nodes[-1].poll() is None:
            assert server.poll() is None and time.monotonic() < end + 300, (tmp_path / "server.log").read_text()[-4000:]
            time.sleep(0.2)
        seen = len((tmp_path / "server.log").read_text(errors="replace").splitlines())
        while not any("client-0 dead" in ln for ln in
                      (tmp_path / "server.log").read_text(errors="replace").splitlines()[seen:]):
            assert server.poll() is None and time.monotonic() < end + 500, (tmp_path / "server.log").read_text()[-4000:]
            time.sleep(0.2)
        nodes.append(client())
        rc = server.wait(600)
    finally:
        stop_nodes([server] + nodes)
    log = (tmp_path / "server.log").read_text(errors="replace")
    client_log = (tmp_path / "client-0.log").read_text(errors="replace")
    rows = _rows(rounds)
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 0 and summary["stopped_reason"] == "" and "Traceback" not in log, log[-4000:]
    table = [(r["round"], r["lost"], r.get("recalibration"), r["aggregate_nmse"], r["aggregate_nmse_theory"])
             for r in rows]
    lost = [r for r in rows if r["lost"]]
    assert len(rows) == ROUNDS + len(lost), table         # each round lost to a restart is run once more at the end

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
    # a round lost to a restart (planned on the old calibration: not sent, its booking proven unsent; or the
    # client killed while it transmitted: booked as it went out), booked once, next to a recalibration
    stale = {r["round"] for r in lost if "calibration is stale" in r["lost_reason"]}
    # the first kill may land in the handshake, after the ack and before the client was told: not sent either
    untold = {r["round"] for r in lost if "before it was told to transmit" in r["lost_reason"]}
    assert all(r["round"] in stale | untold or "no_burst_report" in r["lost_reason"] for r in lost), table
    assert len(lost) <= 2, table
    assert len(stale | untold) == len(lost) or "client-0 died or restarted during the exchange" in log
    assert all(any(0 < c["round"] - r["round"] <= 1 for c in recal) for r in lost), table
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    lines, entries = entries, [e for e in entries if "jammer_shortfall" not in e["extra"]]   # bookings (jammer_shortfall.py)
    assert not torn and [e["round"] for e in entries] == list(range(1, len(rows) + 1)), entries
    echoed = [ln.rsplit(" ", 1)[-1] for ln in log.splitlines() if RECEIVED in ln]
    lost_rounds = {r["round"] for r in lost}
    assert {e["release"] for e in entries if e["round"] not in lost_rounds} <= set(echoed)
    assert not {e["release"] for e in entries if e["round"] in stale} & set(echoed)
    journal = [json.loads(ln) for ln in (out / "privacy_ledger.sent").read_text().splitlines() if ln.strip()]
    for e in entries:
        if e["round"] in stale | untold:                # withdrawn: provably never on the air
            assert [j.get("withdrawn", False) for j in journal if j["release"] == e["release"]][-1], journal
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(lines, 1e-5), rel=1e-3)

    # coherent: every round at its theory; each calibration epoch's mean within 5 % (4.9 standard errors or more)
    used = [r for r in rows if not r["lost"]]
    assert all(r.get("cj_active") for r in used), table           # the jammer's noise is in every round's theory
    ratios = np.array([r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in used])
    assert np.all(np.abs(ratios - 1) < 0.15), table
    bounds = [1, recal[0]["round"], recal[1]["round"], len(rows) + 1]
    epochs = [np.array([r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in used if lo <= r["round"] < hi])
              for lo, hi in zip(bounds, bounds[1:])]
    assert all(len(e) >= 2 for e in epochs), table
    assert all(0.05 >= 4.8 * np.sqrt(2 / D / len(e)) for e in epochs)   # the bound's margin, from the statistics
    means = [float(np.mean(e)) for e in epochs]
    assert all(abs(m - 1) <= 0.05 for m in means), (means, table)
    print(f"\nNMSE / theory: per-calibration means {[round(m, 4) for m in means]} over {[len(e) for e in epochs]} "
          f"rounds (standard errors {[round(float(np.sqrt(2 / D / len(e))), 4) for e in epochs]}), per-round std "
          f"{np.std(ratios, ddof=1):.4f} (chi-square sqrt(2/{D}) = {np.sqrt(2 / D):.4f}); lost {sorted(lost_rounds)}, "
          f"recalibrated before {[r['round'] for r in recal]}, declared dead in round {dead_round}, "
          f"reopen retried: {reopened}")
