"""A node whose radio hangs keeps heartbeating; the run stops with 'radio failure' naming it (issue 25,
item 4). The lab of UHD simulators (one simulated E320 per node) runs docs/lab.md's multi-host preset; after
round 1 client-0's USRP is frozen with SIGSTOP (alive but silent: a wedged USB or network link). Its next
gr-uhd call times out inside UHD; before the fix the node then destroyed its radio's blocks, whose
destructors talk to the frozen device with the GIL held (18.8 s measured), its heartbeats stopped and the
server declared it dead. Now the failed radio's objects are parked (radio/uhd_watchdog.py), the node keeps
heartbeating and reports the radio fault. Real libuhd, gr-uhd, zmq and GNU Radio; nothing mocked."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from otafl_sdr.privacy.ledger import read_chain
from test_net_uhd_nodes import NODES_PRESET, _cli, _start_server, _stop

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]


def test_a_node_whose_radio_hangs_keeps_heartbeating_and_the_run_stops_with_radio_failure(uhd_lab, tmp_path):
    from otafl_sdr.cli.main import main as cli_main
    out = tmp_path / "run"
    server, ep = _start_server(tmp_path, out, ["run.rounds=8", "privacy.eps=8"], config=NODES_PRESET)
    nodes = [_cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log"),
             _cli("node", "client", "--server", ep, "--id", "0", "--air", "uhd", log=tmp_path / "client-0.log"),
             _cli("node", "jammer", "--server", ep, "--air", "uhd", log=tmp_path / "jammer.log")]
    rounds = out / "rounds.jsonl"
    frozen = uhd_lab.simulators[1]                        # client-0's USRP
    stopped = False
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and server.poll() is None:
            if rounds.exists() and len(rounds.read_text().splitlines()) >= 1:
                break
            time.sleep(0.2)
        assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
        os.killpg(frozen.proc.pid, signal.SIGSTOP)       # the radio hangs: every call to it blocks
        stopped = True
        t_freeze = time.monotonic()
        rc = server.wait(300)
        stop_s = time.monotonic() - t_freeze
    finally:
        if stopped:
            os.killpg(frozen.proc.pid, signal.SIGCONT)
        _stop([server] + nodes)
    log = (tmp_path / "server.log").read_text()
    summary = json.loads((out / "summary.json").read_text())
    reason = summary["stopped_reason"]
    # the radio fault, naming the node, never a dead node: its heartbeats went on while its radio hung
    assert rc == 4 and reason.startswith("radio failure: client-0's USRP failed"), (reason, log[-3000:])
    assert "stopped answering" in reason and "--resume" in reason
    assert "client-0 dead" not in log and summary.get("dead_clients", []) == [], log[-3000:]
    assert stop_s < 60, stop_s
    done = len(rounds.read_text().splitlines())
    assert done >= 1 and (out / "checkpoint.pt").exists()
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn and len({e["round"] for e in entries}) >= done
    assert cli_main(["verify", str(out)]) == 0
    client_log = (tmp_path / "client-0.log").read_text()
    assert "Traceback" not in client_log
    assert "heartbeat" not in client_log, client_log[-2000:]      # net/node.py logs a heartbeat late by > 3 periods
