"""OFDM on the uhd testbed's node processes (issue 26 item 2): `otafl-sdr node server` with phy.waveform =
"ofdm" on the lab of three UHD simulators (receiver, one client, the jammer; net/uhd_ofdm_round.py), each
node driving its own simulated E320 through real libuhd / gr-uhd and the zmq control plane. The session
calibration over the nodes runs the per-subcarrier channel step (calibration/ofdm_channel.py); the client
builds its OFDM burst from its own alpha_ik and the server's reference, the jammer its noise from its
host's entropy, the server demodulates the receiver node's capture with phy/ofdm.demodulate; with
air.coherence = "measure" the client's burst carries its part of the per-client sounding after the jammer's
slot and the server reads its gain (the one client is its own composite: phase and offset 0)."""
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


JAMMER_TAPS = [0.7, 0.0, 0.5]     # the jammer radio's cable: an echo 2 samples late, |H_cj,k| 0.2 .. 1.2


def test_two_ofdm_rounds_on_the_uhd_node_lab(uhd_lab, tmp_path):
    """Two OFDM rounds, one node per radio, the jammer's cable a two-path channel (a 15 dB notch in band):
    the calibration file holds the client's H_ik (the cable: |H| ~ 1) and the jammer's H_cj,k, which follows
    its cable's response; the booking counts the jammer per subcarrier (the notch's share, far below its flat
    share); every round carried with its per-subcarrier factors in rounds.jsonl, its link_health the calm
    cable's, its jammer-only slot read per subcarrier with the calibrated profile holding and its scale 1
    within 4 standard errors; NMSE / theory within its statistics (the theory's jammer per subcarrier)
    (||z||^2 / (d sigma^2) ~ chi2_d / d: 5 sqrt(2/d), plus the floor's booked 2 s.e. and the calibration's
    gain error (3 rel s.e.)^2 / theory); the ledger's epsilon as dp-accounting computes it; `verify` OK;
    one SigMF annotation per OFDM symbol in the server's recording of the receiver's capture."""
    out = tmp_path / "run"
    ep_file = tmp_path / "endpoint"
    uhd_lab.set_cable(2, taps=JAMMER_TAPS)                # the jammer's radio (jammer_args addr=127.0.0.3)
    server = _cli("node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                  "--endpoint-file", str(ep_file), "--set", "phy.waveform=ofdm", "--set", "air.record_iq=true",
                  "--set", "air.coherence=measure",
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
    from otafl_sdr.phy.ofdm import OfdmLayout, subcarrier_response
    jam = sec["jammer"]
    Hj, Hj_std = np.abs(np.array([complex(*v) for v in jam["H"]])), np.asarray(jam["H_std"])
    shape = np.abs(subcarrier_response(np.asarray(JAMMER_TAPS, complex)[None, :], OfdmLayout())[0])
    scale = float(np.sum(Hj * shape) / np.sum(shape ** 2))          # the jammer radio's gain, whatever it is
    z = (Hj - scale * shape) / np.maximum(Hj_std, 1e-12)
    print(f"jammer |H| {Hj.min():.3f} .. {Hj.max():.3f}, cable shape x {scale:.3f}: max |z| {np.max(np.abs(z)):.2f}; "
          f"noise efficiency {jam['noise_efficiency']:.4f} +- {jam['noise_efficiency_std']:.4f}")
    assert np.max(np.abs(z)) < 5 and Hj.max() / Hj.min() > 4               # the notch, as the cable makes it
    assert abs(jam["noise_efficiency"] - 1) < 0.05 and jam["noise_efficiency_std"] < 0.02
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
        (me,) = row["link_health"]["clients"]                 # the node's sounding, read by the server
        print(f"  client 0's sounding: gain {me['gain_db']:+.3f} +- {me['gain_db_std']:.3f} dB")
        assert me["client"] == 0 and abs(me["gain_db"]) < 5 * me["gain_db_std"] + 0.3 and abs(me["phase_rad"]) < 1e-9, me
        c, c_se = row["jammer_delivered_ratio"], row["jammer_delivered_ratio_std"]
        print(f"  jammer slot: profile {row['jammer_profile']} (P {row['jammer_profile_p']:.3g}), scale {c:.4f} "
              f"+- {c_se:.4f}, charged {row['jammer_charged_bound'] is not None}")
        ref_se = math.hypot(c_se, jam["noise_efficiency_std"])      # the slot's and the calibration's errors
        assert row["jammer_profile"] == "scale" and abs(c - 1) < 4 * ref_se and c_se < 0.02, row
        assert not row.get("recalibration"), row               # a calm link asks for none
    ledger = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    booked = [x for x in ledger if x["uses_data"] and not x["extra"].get("fault")]
    charges = [x for x in ledger if x["extra"].get("fault")]
    assert all(x["extra"]["jammer_shortfall"]["per_subcarrier"] for x in charges)   # a calm jammer: at most a top-up
    assert len(booked) == 2 and all(x["extra"]["waveform"] == "ofdm" for x in booked)
    for x in booked:                     # the jammer per subcarrier: its weakest far below its flat share
        js = x["extra"]["jammer_subcarriers"]
        assert js["lower_db"][0] < -8 and js["share_min"] < 0.2 * js["flat_share"], js
    eps = independent_pld_epsilon(ledger, 1e-5)
    print(f"eps: ledger {summary['eps_pld']:.4f}, dp-accounting {eps:.4f}")
    assert eps == pytest.approx(summary["eps_pld"], rel=2e-3)
    v = cli_in_process("verify", out)
    assert v.returncode == 0 and "OK" in v.stdout, v.stdout + v.stderr
    meta = json.loads((out / "iq" / "round_0001.sigmf-meta").read_text())
    notes = [a for a in meta["annotations"] if a["core:label"].startswith("ofdm")]
    n_ofdm = meta["global"]["otafl:extra"]["ofdm"]["n_ofdm"]
    assert len(notes) == 4 + n_ofdm and meta["global"]["otafl:extra"]["devices"][0]["node"] == "client-0"
