"""The testbed with air uhd (issue 13, item 4): one node process per USRP, each driving its own radio, on a
lab of UHD simulators (one simulated E320 per 127.0.0.N, their transmissions joined by one cable into the
receiver's radio): `otafl-sdr node server` plus `otafl-sdr node client|jammer|receiver --air uhd`, exactly
as a lab starts them on separate hosts. The run calibrates in session through the nodes, the jammer's
noise comes from its own host's entropy, the server demodulates the receiver's capture; the privacy
ledger is rechecked with dp-accounting directly. The coherence check before round 1 runs over the nodes'
radios (net/uhd_check_rounds.py) and passes; on a calibration file older than a turn of the client's cable
it stops the run, the client named. No stand-ins: real libuhd, gr-uhd, zmq, GNU Radio."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otafl_sdr.privacy.ledger import read_chain
from otafl_sdr.radio.uhd_sim_device import NOISE_RMS
from otafl_sdr.radio.uhd_sim_lab import lab_address
from dp_reference import independent_pld_epsilon
from node_procs import stop_nodes

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"      # docs/lab.md's multi-host example
ENV = dict(os.environ, UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1")
# the server draws no figures at the run's end (4 figures x PNG, PDF, SVG: about 4.7 s of CPU a run, read by no
# test here; tests/run/test_run_plots.py checks them)
NO_FIGURES = "run.figures=false"
CABLE_TURN_RAD = 0.5      # a client's path turned since its calibration: 5x what the coherence check must see


def _cli(*args, log: Path) -> subprocess.Popen:
    f = open(log, "wb")
    try:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=ENV, start_new_session=True)
    finally:
        f.close()


def _start_server(tmp_path, out: Path, sets: list[str], config: Path = PRESET) -> tuple[subprocess.Popen, str]:
    ep_file = tmp_path / "endpoint"
    argv = ["node", "server", "--config", str(config), "--out", str(out), "--port", "0", "--quiet",
            "--endpoint-file", str(ep_file)]
    for s in [*sets, NO_FIGURES]:
        argv += ["--set", s]
    server = _cli(*argv, log=tmp_path / "server.log")
    end = time.monotonic() + 120
    while not ep_file.exists():
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        assert time.monotonic() < end, "the server never listened"
        time.sleep(0.2)
    return server, ep_file.read_text().strip()


def _stop(procs) -> None:
    stop_nodes(procs)


def test_a_uhd_run_with_one_node_per_radio(uhd_lab, tmp_path):
    from otafl_sdr.configure.load import load_config
    u = load_config(NODES_PRESET).uhd
    # the preset's radios are the lab's: the receiver on the hub (its receive streams hear every radio)
    assert [u.rx_args, u.tx_args[0], u.jammer_args] == uhd_lab.device_args[:3]
    out = tmp_path / "run"
    server, ep = _start_server(tmp_path, out, ["air.record_iq=true", "net.diagnostics=true"], config=NODES_PRESET)
    nodes = [_cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log"),
             _cli("node", "client", "--server", ep, "--id", "0", "--air", "uhd", log=tmp_path / "client-0.log"),
             _cli("node", "jammer", "--server", ep, "--air", "uhd", log=tmp_path / "jammer.log")]
    try:
        rc = server.wait(420)
    finally:
        _stop([server] + nodes)
    logs = {p.name: p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("*.log")}
    assert rc == 0, logs
    # the run's own calibration, measured by the nodes' radios through the control plane
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["noise"]["sigma_c2"] == pytest.approx(NOISE_RMS ** 2, rel=0.1)
    assert abs(complex(*cal["clients"][0]["h"])) == pytest.approx(1.0, rel=0.05)     # the unity cable
    assert max(cal["jammer_noise"]["phase_gains"]) == pytest.approx(1.0, rel=0.05)
    assert len(set(cal["setup"]["serials"]["clients"] + [cal["setup"]["serials"]["jammer"],
                                                          cal["setup"]["serials"]["receiver"]])) == 3
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines()]
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    # each round's booking (a round whose jammer measured below it also has its shortfall's charge line,
    # privacy/jammer_shortfall.py; the eps below composes every line)
    booked = [e for e in entries if "jammer_shortfall" not in e["extra"]]
    assert not torn and len(booked) == len(rows) == 2
    for row, e in zip(rows, booked):
        assert row["cj_active"] and not row["lost"], row
        # the bursts went client / jammer radio -> cable -> receiver radio and through the modem: the
        # aggregate's error is what the plan's noise (channel + jammer) predicts
        assert row["aggregate_nmse"] == pytest.approx(row["aggregate_nmse_theory"], rel=0.25)
        booked = e["extra"]["jammer_noise"]                 # the measured jammer noise, not the plan's
        assert booked["source"] in ("measured", "planned") and booked["booked"] <= booked["planned"]
        assert e["extra"]["csi_gain_margin"] >= 1.0          # estimated CSI: the ledger's margin applies
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == "" and summary["lost_rounds"] == 0
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(entries, 1e-5), rel=1e-3)
    radios = summary["devices"]["radios"]
    assert [r["node"] for r in radios] == ["client-0", "jammer", "receiver"]
    assert all(r["rate"] == pytest.approx(1e6) for r in radios) and summary["devices"]["nodes"] is True
    # the recording is the receiver node's capture as the server demodulated it
    meta = json.loads((out / "iq" / "round_0001.sigmf-meta").read_text())
    assert meta["global"]["otafl:extra"]["devices"][0]["node"] == "client-0"

    # the coherence check before round 1 (experiment/coherence_gate.py) over the nodes' radios
    # (net/uhd_check_rounds.py): public payloads at 20 dB, client-0's residual phase read from its sounding;
    # nothing of it booked (the ledger's lines are the two rounds') nor logged as a release
    checks = [json.loads(ln) for ln in (out / "coherence-checks.jsonl").read_text().splitlines()]
    v = checks[0]["verdict"]
    assert len(checks) == 1 and checks[0]["before_round"] == 1, checks
    assert v["passed"] and v["sensitive"] and v["received"] == 3 and not v["tracked"], v
    assert v["ratio"] == pytest.approx(1.0, abs=v["tolerance"]), v
    assert [c["client"] for c in v["clients"]] == [0] and abs(v["clients"][0]["phase_rad"]) < 0.05, v
    assert summary["coherence_check"]["passed"] is True
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "round -1001 attempt 1: on the air" in log
    assert not [ln for ln in log.splitlines() if "received the capture of release" in ln and "round -10" in ln]

    # the lab since that calibration: client-0's cable turned (a connector re-seated). A run on the old
    # calibration file stops at the check before anything is released, client-0 named (exit 4)
    uhd_lab.set_cable(1, phase_rad=CABLE_TURN_RAD)
    stale = tmp_path / "stale"
    stale.mkdir()
    server, ep = _start_server(stale, stale / "run", ["calibration.session=false",
                                                      f"calibration.file={out / 'calibration.json'}"], config=NODES_PRESET)
    nodes = [_cli("node", role, "--server", ep, *extra, "--air", "uhd", log=stale / f"{role}.log")
             for role, extra in [("receiver", ()), ("client", ("--id", "0")), ("jammer", ())]]
    try:
        rc = server.wait(300)
    finally:
        _stop([server] + nodes)
    text = (stale / "server.log").read_text(errors="replace")
    stopped = json.loads((stale / "run" / "summary.json").read_text())["stopped_reason"]
    assert rc == 4 and "the coherence check before round 1 failed: client-0: residual phase" in stopped, text[-3000:]
    v = json.loads((stale / "run" / "coherence-checks.jsonl").read_text().splitlines()[0])["verdict"]
    assert abs(abs(v["clients"][0]["phase_rad"]) - CABLE_TURN_RAD) < 0.1, v
    assert not (stale / "run" / "rounds.jsonl").exists() or not (stale / "run" / "rounds.jsonl").read_text().strip()
    ledger = stale / "run" / "privacy_ledger.jsonl"
    assert not (ledger.exists() and read_chain(ledger)[0]) and "Traceback" not in text


def test_a_node_started_with_another_air_is_refused_in_one_line(tmp_path):
    """The refusal comes with the server's welcome, before the node would open a radio, and the server opens
    none itself (its nodes do): no simulator is started for it (a lab's three cost about 5 s of CPU)."""
    out = tmp_path / "run"
    server, ep = _start_server(tmp_path, out, ["air.allow_unsynced=true", f"uhd.tx_args=['addr={lab_address(1)}']",
                                               f"uhd.rx_args=addr={lab_address(0)}", "net.timeout_s=30"])
    client = _cli("node", "client", "--server", ep, "--id", "0", "--air", "zmq", log=tmp_path / "client.log")
    try:
        rc = client.wait(120)
    finally:
        _stop([server, client])
    text = (tmp_path / "client.log").read_text()
    assert rc != 0 and "this run's air is 'uhd'" in text and "--air uhd" in text
    assert "Traceback" not in text


def test_a_uhd_node_without_a_shared_reference_is_refused_unless_allowed(uhd_lab, tmp_path):
    """Radios on separate hosts with no shared 10 MHz / PPS would not line up: the node refuses in setup
    with the config key to change, the server reports it and stops before any round."""
    out = tmp_path / "run"
    server, ep = _start_server(tmp_path, out, [f"uhd.tx_args=['{uhd_lab.device_args[1]}']",
                                               f"uhd.rx_args={uhd_lab.device_args[0]}", "net.timeout_s=30"])
    node = _cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log")
    try:
        node_rc = node.wait(120)
        server_rc = server.wait(240)
    finally:
        _stop([server, node])
    text = (tmp_path / "receiver.log").read_text()
    assert node_rc == 2 and "air.allow_unsynced" in text and "no shared 10 MHz and PPS" in text
    assert server_rc != 0 and "air.allow_unsynced" in (tmp_path / "server.log").read_text()
    assert not (out / "rounds.jsonl").exists() or not (out / "rounds.jsonl").read_text().strip()


def test_a_usrp_disappearing_mid_run_stops_the_run_cleanly_with_its_checkpoint_and_ledger(uhd_lab, tmp_path):
    """The client's USRP loses power after a round: the run stops cleanly, in one line naming client-0, with
    its checkpoint and an intact, verifiable ledger, whichever the server sees first: the node's report
    that its radio stopped answering (exit 4, 'radio failure', as the in-process air), or the node falling
    silent while UHD blocks in its call to the dead radio (exit 3, the client declared dead)."""
    from otafl_sdr.cli.main import main as cli_main
    out = tmp_path / "run"
    # net.timeout_s 20 (60): where the server sees the client fall silent first it waits that long for it to
    # restart before it stops (exit 3), 60 s of the test's 90 s
    server, ep = _start_server(tmp_path, out, ["run.rounds=8", "privacy.eps=8", "net.timeout_s=20"], config=NODES_PRESET)
    nodes = [_cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log"),
             _cli("node", "client", "--server", ep, "--id", "0", "--air", "uhd", log=tmp_path / "client-0.log"),
             _cli("node", "jammer", "--server", ep, "--air", "uhd", log=tmp_path / "jammer.log")]
    rounds = out / "rounds.jsonl"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and server.poll() is None:
            if rounds.exists() and len(rounds.read_text().splitlines()) >= 1:
                break
            time.sleep(0.2)
        assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
        uhd_lab.simulators[1].kill()                          # client-0's USRP loses power
        rc = server.wait(300)
    finally:
        _stop([server] + nodes)
    log = (tmp_path / "server.log").read_text()
    summary = json.loads((out / "summary.json").read_text())
    reason = summary["stopped_reason"]
    assert "Traceback" not in log and "--resume" in reason, log[-3000:]
    assert ((rc == 4 and reason.startswith("radio failure: client-0's USRP failed"))
            or (rc == 3 and reason.startswith("no client node is alive (client-0 dead since round"))), reason
    done = len(rounds.read_text().splitlines())
    assert done >= 1 and (out / "checkpoint.pt").exists()
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert not torn and len({e["round"] for e in entries}) >= done
    assert cli_main(["verify", str(out)]) == 0
    for name in ("client-0", "receiver", "jammer"):
        assert "Traceback" not in (tmp_path / f"{name}.log").read_text()
