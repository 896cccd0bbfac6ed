"""A client node that dies at the coherence check (issue 34, item 4) under ``net.dead_client_policy = "drop"``:
the check measures the clients still there and the run goes on without the dead one, as its rounds would
(net/uhd_check_rounds.TestbedCheckAir.gone_clients); before, the check planned every client, lost its rounds
to the dead node and stopped the run. On a lab of UHD simulators (real libuhd, gr-uhd, zmq; one node process
per radio): the receiver and two clients, no jammer; client-1 SIGKILLs itself (fault injection) when the
first check round's decision reaches it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from otafl_sdr.net.uhd_check_rounds import check_round
from otafl_sdr.privacy.ledger import read_chain
from dp_reference import independent_pld_epsilon
from test_net_uhd_nodes import ENV, NODES_PRESET, ROOT, _cli, _start_server, _stop

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]


def _client(ep: str, i: int, log: Path, env: dict) -> subprocess.Popen:
    """Client node ``i`` with its own environment (the fault injection's variable for one node only)."""
    with open(log, "wb") as f:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", "node", "client", "--server", ep,
                                 "--id", str(i), "--air", "uhd"], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)


def test_a_client_dead_at_the_check_is_dropped_and_the_check_measures_the_others(uhd_lab, tmp_path):
    out = tmp_path / "run"
    rx, c0, c1 = uhd_lab.device_args[:3]
    server, ep = _start_server(tmp_path, out, [
        "data.clients=2", "power.jammer=false", "uhd.jammer_args=", f"uhd.rx_args={rx}",
        f"uhd.tx_args=['{c0}', '{c1}']", "net.dead_client_policy=drop", "run.rounds=1",
        "privacy.eps=10"], config=NODES_PRESET)
    nodes = [_cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log"),
             _client(ep, 0, tmp_path / "client-0.log", ENV),
             _client(ep, 1, tmp_path / "client-1.log", dict(ENV, OTAFL_NET_DIE_AT=f"client-1@check:{check_round(1)}"))]
    try:
        rc = server.wait(300)
    finally:
        _stop([server] + nodes)
    logs = {p.name: p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("*.log")}
    assert rc == 0, logs
    assert "dies (SIGKILL) at check" in logs["client-1.log"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == "" and summary["dead_clients"] == ["client-1"], summary
    # the check: client-1's first round lost (it died holding its decision), then left silent; client-0 measured
    v = json.loads((out / "coherence-checks.jsonl").read_text().splitlines()[0])["verdict"]
    assert v["passed"] and v["sensitive"] and v["received"] >= 2 and [c["client"] for c in v["clients"]] == [0], v
    assert summary["coherence_check"]["passed"] is True
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and not rows[0]["lost"] and rows[0]["dead_clients"] == ["client-1"]
    assert "round 1: client-1 dead (gone at the coherence check); dropped (net.dead_client_policy = drop)" \
        in summary["notes"], summary["notes"]
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn and len(entries) == 1                  # the check booked nothing; round 1 once
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(entries, 1e-5), rel=1e-3)
