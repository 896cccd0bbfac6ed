"""The uhd testbed's schedule clock (issue 25, item 5), on a lab of UHD simulators (real libuhd, gr-uhd, zmq; one
node process per radio): t_tx is chosen after the handshake in which every radio reports its device time
(net/uhd_clock.py), and a server whose clock is off a node's device time beyond uhd.clock_tolerance_s refuses to
schedule, in one line naming the node and the offset, before anything goes on the air. The server's clock is
skewed by fault injection (OTAFL_NET_CLOCK_SKEW_S; the simulator's device time is its host's clock).

1. Round 1's first handshake skewed by +2 s: that attempt is refused (nothing sent), its booking withdrawn from
   the sent-journal and carried by the retry, which goes out: round 1 is booked ONCE (no charge for the refused
   attempt), every release the receiver echoed is booked, eps rechecked with dp-accounting.
2. Every handshake of round 1 skewed by -2 s: every attempt refused, the run stops with the line (exit 3), and
   the round's single booking is proven unsent by the journal."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otafl_sdr.net.uhd_clock import SKEW_ENV, clock_refusal
from otafl_sdr.privacy.ledger import read_chain
from dp_reference import independent_pld_epsilon
from node_procs import stop_nodes
from test_net_uhd_nodes import NO_FIGURES

ROOT = Path(__file__).resolve().parents[2]
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"
RECEIVED = "received the capture of release"


def test_only_a_proven_offset_is_refused():
    # device read between sent=100.0 and got=100.4 (server clock): anything within the round trip is not proof
    assert clock_refusal({"client-0": (100.3, 100.4)}, 100.0, 0.05) == ""
    assert clock_refusal({"client-0": (None, 100.4)}, 100.0, 0.05) == ""
    line = clock_refusal({"client-0": (100.2, 100.4), "jammer": (102.6, 100.4)}, 100.0, 0.05)
    assert "\n" not in line and "jammer's device time" in line and "2.400 s behind" in line
    assert "at least 2.200 s" in line and "uhd.clock_tolerance_s = 0.05" in line
    assert "ahead of receiver's" in clock_refusal({"receiver": (97.0, 100.1)}, 100.0, 0.05)


def _cli(args, log: Path, env_extra=None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("OTAFL_NET_DIE_AT", SKEW_ENV)}
    env.update(UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1", **(env_extra or {}))
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)


def _run(tmp_path: Path, out: Path, skew: str) -> tuple[int, str]:
    """One server run (2 rounds) with fresh nodes and the server's clock skewed as ``skew`` says."""
    ep_file = tmp_path / "endpoint"
    ep_file.unlink(missing_ok=True)
    log = tmp_path / f"server-{out.name}.log"
    server = _cli(["node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                   "--endpoint-file", str(ep_file), "--set", "privacy.eps=50", "--set", "air.retries=1",
                   "--set", NO_FIGURES],
                  log, {SKEW_ENV: skew})
    end = time.monotonic() + 120
    while not ep_file.exists():
        assert server.poll() is None and time.monotonic() < end, log.read_text()[-3000:]
        time.sleep(0.2)
    ep = ep_file.read_text().strip()
    nodes = [_cli(["node", role, "--server", ep, "--air", "uhd", *extra], tmp_path / f"{role}-{out.name}.log")
             for role, extra in (("receiver", []), ("client", ["--id", "0"]), ("jammer", []))]
    try:
        rc = server.wait(420)
    finally:
        stop_nodes([server] + nodes)
    return rc, log.read_text(errors="replace")


def _journal(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "privacy_ledger.sent").read_text().splitlines() if ln.strip()]


@pytest.mark.gnuradio
@pytest.mark.uhd_sim
@pytest.mark.net
@pytest.mark.slow
def test_a_server_clock_off_the_devices_is_refused_and_a_refused_attempt_is_not_charged(uhd_lab, tmp_path):
    # 1. one refused handshake, then the retry goes out under the same booking
    out = tmp_path / "once"
    rc, log = _run(tmp_path, out, "2.0@1x1")
    assert rc == 0, log[-4000:]
    refusals = [ln for ln in log.splitlines() if "not scheduled: the server's clock is" in ln]
    assert len(refusals) == 1 and "ahead of" in refusals[0] and "device time (at least" in refusals[0], refusals
    assert any(n in refusals[0] for n in ("client-0's", "jammer's", "receiver's")), refusals
    offset = float(refusals[0].split("the server's clock is ", 1)[1].split()[0])
    assert offset == pytest.approx(2.0, abs=0.2), refusals
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines() if ln.strip()]
    assert [(r["round"], r["lost"], r["attempts"]) for r in rows] == [(1, False, 2), (2, False, 1)], rows
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn
    entries = [e for e in entries if "jammer_shortfall" not in e["extra"]]     # bookings (privacy/jammer_shortfall.py)
    assert [(e["round"], e["extra"].get("attempt", 0)) for e in entries] == [(1, 0), (2, 0)], entries
    journal = _journal(out)
    r1 = entries[0]["release"]
    assert [j.get("withdrawn", False) for j in journal if j["release"] == r1] == [False, True, False], journal
    echoed = [ln.rsplit(" ", 1)[-1] for ln in log.splitlines() if RECEIVED in ln]
    assert sorted(echoed) == sorted(e["release"] for e in entries)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(entries, 1e-5), rel=1e-3)
    assert any("never went on the air; retried under its booking" in n for n in summary["notes"]), summary["notes"]
    # 2. (the first run's nodes closed their radios at its end: opened again at once) every handshake of round 1 refused: the run stops with the line, nothing went out
    out = tmp_path / "always"
    rc, log = _run(tmp_path, out, "-2.0@1x99")
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 3 and "not scheduled: the server's clock is" in summary["stopped_reason"], log[-4000:]
    assert "behind" in summary["stopped_reason"] and "\n" not in summary["stopped_reason"]
    assert "Traceback" not in log and RECEIVED not in log
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn and [(e["round"], e["extra"].get("attempt", 0)) for e in entries] == [(1, 0)]
    assert _journal(out)[-1] == dict(_journal(out)[-1], release=entries[0]["release"], withdrawn=True)
