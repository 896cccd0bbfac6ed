"""OFDM on the uhd testbed's node processes (issue 26 item 2): `otafl-sdr node server` with phy.waveform =
"ofdm" on the lab of three UHD simulators (receiver, one client, the jammer; net/uhd_ofdm_round.py), each
node driving its own simulated E320 through real libuhd / gr-uhd and the zmq control plane. The session
calibration over the nodes runs the per-subcarrier channel step (calibration/ofdm_channel.py); the client
builds its OFDM burst from its own alpha_ik and the server's reference, the jammer its noise from its
host's entropy, the server demodulates the receiver node's capture with phy/ofdm.demodulate."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dp_reference import independent_pld_epsilon
from node_procs import cli_in_process
from test_net_uhd_nodes import NO_FIGURES
from uhd_sim_helpers import assert_calm_ofdm_link

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"
ENV = dict(os.environ, UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1")


def _cli(*args, log: Path) -> subprocess.Popen:
    f = open(log, "wb")
    try:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=ENV, start_new_session=True)
    finally:
        f.close()


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_two_ofdm_rounds_on_the_uhd_node_lab(uhd_lab, tmp_path):
    """Two OFDM rounds, one node per radio: the calibration file holds the client's H_ik (the cable: |H| ~ 1);
    every round carried with its per-subcarrier factors in rounds.jsonl, its link_health the calm cable's;
    NMSE / theory within its statistics
    (||z||^2 / (d sigma^2) ~ chi2_d / d: 5 sqrt(2/d), plus the floor's booked 2 s.e. and the calibration's
    gain error (3 rel s.e.)^2 / theory); the ledger's epsilon as dp-accounting computes it; `verify` OK;
    one SigMF annotation per OFDM symbol in the server's recording of the receiver's capture."""
    out = tmp_path / "run"
    ep_file = tmp_path / "endpoint"
    server = _cli("node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                  "--endpoint-file", str(ep_file), "--set", "phy.waveform=ofdm", "--set", "air.record_iq=true",
                  "--set", "net.diagnostics=true", "--set", NO_FIGURES,
                  log=tmp_path / "server.log")
    nodes = []
    try:
        end = time.monotonic() + 120
        while not ep_file.exists():
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            assert time.monotonic() < end, "the server never listened"
            time.sleep(0.2)
        ep = ep_file.read_text().strip()
        nodes = [_cli("node", "receiver", "--server", ep, "--air", "uhd", log=tmp_path / "receiver.log"),
                 _cli("node", "client", "--server", ep, "--id", "0", "--air", "uhd", log=tmp_path / "client-0.log"),
                 _cli("node", "jammer", "--server", ep, "--air", "uhd", log=tmp_path / "jammer.log")]
        rc = server.wait(300)
    finally:
        _stop([server] + nodes)
    logs = {p.name: p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("*.log")}
    assert rc == 0, logs
    cal = json.loads((out / "calibration.json").read_text())
    sec = cal["ofdm"]                                     # the per-subcarrier step ran over the nodes
    assert [c["id"] for c in sec["clients"]] == ["client 0"] and sec["used"] == 52
    H = np.array([complex(*v) for v in sec["clients"][0]["H"]])
    assert np.all(np.abs(np.abs(H) - 1.0) < 0.05), np.abs(H)
    rel = float(np.max(np.asarray(sec["clients"][0]["H_std"]) / np.abs(H)))
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    summary = json.loads((out / "summary.json").read_text())
    d = summary["model_dim"]
    floor = 2 * cal["noise"]["sigma_c2_std"] / cal["noise"]["sigma_c2"]
    assert len(rows) == 2
    for row in rows:
        assert not row["lost"] and row["transmitting"] == 1 and row["cj_active"], row
        assert row["ofdm_data_carriers"] == 48 and len(row["ofdm_alpha"]) == 1 and row["ofdm_alpha"][0][0] > 0
        t = row["aggregate_nmse_theory"]
        ratio = row["aggregate_nmse"] / t
        print(f"round {row['round']}: NMSE {row['aggregate_nmse']:.4g} theory {t:.4g} ratio {ratio:.4f}")
        band = 5 * math.sqrt(2 / d)
        assert 1 - band <= ratio <= 1 + band + floor + (3 * rel) ** 2 / t, ratio
        assert_calm_ofdm_link(row["link_health"])             # the server's reading of the receiver's capture
        assert not row.get("recalibration"), row               # a calm link asks for none
    ledger = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    booked = [x for x in ledger if x["uses_data"]]
    assert len(booked) == 2 and all(x["extra"]["waveform"] == "ofdm" for x in booked)
    eps = independent_pld_epsilon(ledger, 1e-5)
    print(f"eps: ledger {summary['eps_pld']:.4f}, dp-accounting {eps:.4f}")
    assert eps == pytest.approx(summary["eps_pld"], rel=2e-3)
    v = cli_in_process("verify", out)
    assert v.returncode == 0 and "OK" in v.stdout, v.stdout + v.stderr
    meta = json.loads((out / "iq" / "round_0001.sigmf-meta").read_text())
    notes = [a for a in meta["annotations"] if a["core:label"].startswith("ofdm")]
    n_ofdm = meta["global"]["otafl:extra"]["ofdm"]["n_ofdm"]
    assert len(notes) == 4 + n_ofdm and meta["global"]["otafl:extra"]["devices"][0]["node"] == "client-0"
