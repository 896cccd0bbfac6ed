"""Carrier-offset pre-compensation with its phase referenced to device time (issue 25, item 2), on a lab of UHD
simulators (real libuhd, gr-uhd, zmq; one node process per radio).

The client's simulated radio is given a 1 Hz LO offset (1e-6 cycles/sample at 1 MS/s, OTAFL_SIM_TX_CFO: a
rotation continuous in device time, as a real radio's). The in-session calibration measures it, refers the
repeats' gains to one device instant and fits the offset over their span (calibration/phase_ref.py); each round
the client pre-compensates with its rotation continued from that instant (precompensate(t_ref=...)). Rounds are
seconds apart, so a rotation restarting at phase 0 each burst would leave the sum at a random phase 2 pi x 1 Hz x
(seconds since the calibration) every round (seen in the link-health phase, beyond air.drift_phase_rad); with the
phase referenced every round's reference arrives at its calibrated phase, no drift recalibration is asked for,
and the aggregate's error stays at its theory. With air.coherence = "measure" the client's burst carries its
per-client sounding after the frame (net/uhd_sounding.py), through the same pre-compensation: every round the
server reads the client's own residual phase and offset, both calm."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.radio.uhd_radio import SIM_CFO_ENV
from node_procs import stop_nodes
from test_net_uhd_nodes import NO_FIGURES

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES_PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim_nodes.toml"
CFO = 1e-6               # cycles/sample: 1 Hz at uhd.rate = 1 MS/s
ROUNDS = 5


def _cli(args, log: Path, env_extra=None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("OTAFL_NET_DIE_AT", SIM_CFO_ENV)}
    env.update(UHD_LOG_CONSOLE_LEVEL="fatal", PYTHONUNBUFFERED="1", **(env_extra or {}))
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)


def test_a_client_lo_offset_is_precompensated_with_its_phase_continuous_across_rounds(uhd_lab, tmp_path):
    out = tmp_path / "run"
    ep_file = tmp_path / "endpoint"
    server = _cli(["node", "server", "--config", str(NODES_PRESET), "--out", str(out), "--port", "0", "--quiet",
                   "--endpoint-file", str(ep_file), "--set", f"run.rounds={ROUNDS}", "--set", "privacy.eps=50",
                   "--set", "net.diagnostics=true", "--set", "air.recalibrate_every=0", "--set", NO_FIGURES,
                   "--set", "air.coherence=measure"],
                  tmp_path / "server.log")
    end = time.monotonic() + 120
    while not ep_file.exists():
        assert server.poll() is None and time.monotonic() < end, (tmp_path / "server.log").read_text()[-3000:]
        time.sleep(0.2)
    ep = ep_file.read_text().strip()
    nodes = [_cli(["node", "receiver", "--server", ep, "--air", "uhd"], tmp_path / "receiver.log"),
             _cli(["node", "client", "--server", ep, "--id", "0", "--air", "uhd"], tmp_path / "client-0.log",
                  {SIM_CFO_ENV: repr(CFO)}),
             _cli(["node", "jammer", "--server", ep, "--air", "uhd"], tmp_path / "jammer.log")]
    try:
        rc = server.wait(480)
    finally:
        stop_nodes([server] + nodes)
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert rc == 0 and "Traceback" not in log, log[-4000:]
    cal = json.loads((out / "calibration.json").read_text())
    client = cal["clients"][0]
    # measured over the repeats' span: the offset to 0.1 % and its phase referred to a device instant
    assert client["cfo"] == pytest.approx(CFO, rel=1e-3), client
    assert client["cfo_std"] < 1e-3 * CFO and client["t_ref"] > 1e9, client
    assert "t_ref" not in cal["jammer"]                 # the jammer has no offset: combined as before
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines() if ln.strip()]
    table = [(r["round"], r["lost"], r.get("recalibration"), r["link_health"], r["aggregate_nmse"],
              r["aggregate_nmse_theory"]) for r in rows]
    assert len(rows) == ROUNDS and not any(r["lost"] for r in rows), table
    # seconds apart at 1 Hz: a per-burst phase would be uniform over 2 pi; referenced, it stays calibrated
    phases = [r["link_health"]["phase_rad"] for r in rows]
    assert max(abs(p) for p in phases) < 0.1, table
    assert not any(r.get("recalibration") for r in rows), table
    assert "link drift" not in log
    # the round's own offset estimate (a short preamble: +-4e-6 of noise on this lab) within air.drift_cfo
    assert all(abs(r["link_health"]["cfo"]) < 1e-5 for r in rows), table
    # the client's own sounding after each frame (net/uhd_sounding.py), through the same pre-compensation: its
    # residual phase and offset against its calibration, every round, none beyond its standard error's reach
    for r in rows:
        (me,) = r["link_health"]["clients"]
        print(f"round {r['round']}: client 0 phase {me['phase_rad']:+.4f} +- {me['phase_std']:.4f} rad, offset "
              f"{me['cfo_hz']:+.3f} +- {me['cfo_std_hz']:.3f} Hz, gain {me['gain_db']:+.3f} dB, event {me['event']}")
        assert me["client"] == 0 and abs(me["phase_rad"]) < 0.1 and me["phase_std"] < 0.01, me
        assert abs(me["cfo_hz"]) < 5 * me["cfo_std_hz"] + 0.05 and abs(me["gain_db"]) < 0.5, me
    ratio = np.mean([r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in rows])
    assert ratio == pytest.approx(1.0, abs=0.10), table
    print(f"\ncfo measured {client['cfo']:.6g} (+- {client['cfo_std']:.2g}), link-health phases {np.round(phases, 4)}, "
          f"NMSE / theory {ratio:.3f}")
