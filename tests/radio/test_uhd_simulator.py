"""The `uhd` air and `calibrate --air uhd` against UHD 4.3's own device simulator (a simulated E320 run by
the MPM daemon, started by otafl_sdr.radio.uhd_simulator): real libuhd, real gr-uhd blocks, real CHDR
streaming; the simulator's TX->RX cable with receiver noise in place of RF. Nothing here is a stand-in:
a missing simulator (``make setup`` builds .venv-uhdsim) fails these tests, it never skips them.

What the simulator cannot show (device time, burst acks, async messages, RF) is listed in
firmware_notes/uhd_simulator.md."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.cli.main import main as cli_main
from otafl_sdr.privacy.ledger import read_chain
from otafl_sdr.radio.uhd_device import find_usrps, is_simulator
from otafl_sdr.radio.uhd_sim_device import DEVICE_ARGS, NOISE_RMS

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"


def _calibrate(tmp_path, what="all") -> Path:
    cal = tmp_path / "cal.json"
    rc = cli_main(["calibrate", what, "--config", str(PRESET), "--out", str(cal), "--air", "uhd"])
    assert rc == 0
    return cal


def test_the_simulator_is_a_uhd_device_and_calibrate_measures_its_cable(uhd_sim, tmp_path):
    """UHD finds the simulator as one simulated E320; `calibrate` (noise and channel) on it measures its cable
    (one simulator start for both: the discovery changes nothing on the device)."""
    found = find_usrps(DEVICE_ARGS)
    assert len(found) == 1 and is_simulator(found[0])
    assert found[0]["product"] == "e320"
    cal = json.loads(_calibrate(tmp_path).read_text())
    sigma_c2 = cal["noise"]["sigma_c2"]
    # the cable adds N(0, NOISE_RMS^2) per real coordinate; the estimate must find it (to 10 %)
    assert sigma_c2 == pytest.approx(NOISE_RMS ** 2, rel=0.1)
    (link,) = cal["clients"]
    # the cable is unity gain, sample-aligned, with no carrier offset (within 4 standard errors: the
    # simulator's 2-sample stream offset and the spurious offset it caused are gone, uhd_sim_daemon.py)
    assert abs(complex(*link["h"])) == pytest.approx(1.0, abs=0.02)
    assert link["delay"] == pytest.approx(0.0, abs=0.1)
    assert abs(link["cfo"]) < 4 * link["cfo_std"]
    assert cal["air"] == "uhd"


def test_one_uhd_round_end_to_end_with_a_calibration_from_the_same_session(uhd_sim, tmp_path):
    out = tmp_path / "run"
    rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out), "--set", "run.rounds=3",
                   "--set", "air.recalibrate_every=2", "--set", "air.record_iq=true"])
    assert rc == 0
    cal = json.loads((out / "calibration.json").read_text())       # taken by the run, with its own radios
    assert cal["noise"]["sigma_c2"] == pytest.approx(NOISE_RMS ** 2, rel=0.1)
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and not any(r["lost"] for r in rows)
    for r in rows:
        # the demodulated aggregate's error matches what the plan's noise predicts: the burst really
        # went TX -> simulator -> RX and through the modem
        assert r["aggregate_nmse"] == pytest.approx(r["aggregate_nmse_theory"], rel=0.25)
        assert r["dac_clip_level"] == 1.0                   # the clients' fixed, planned clip level (DAC full scale)
        assert 0 <= r["jammer_dac_peak"] <= 1.0              # the jammer's planned 4.5-sigma peak / full scale
        assert "dac_peak" not in r                           # no peak of a client's own payload in the results
        # the preset measures (air.coherence = "measure"): the client's own sounding after its frame, every row
        (c,) = r["link_health"]["clients"]
        assert c["client"] == 0 and abs(c["phase_rad"]) < 5 * c["phase_std"] + 0.02 and abs(c["gain_db"]) < 0.5
        assert c["phase_std"] > 0 and c["cfo_std_hz"] > 0 and c["gain_db_std"] > 0 and abs(c["cfo_hz"]) < 5 * c["cfo_std_hz"] + 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == "" and summary["lost_rounds"] == 0
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    assert len(entries) == 3 and not torn
    devices = summary["devices"]
    assert devices["simulator"] is True and devices["radios"][0]["rate"] == pytest.approx(1e6)
    # the SigMF recording of a round carries the radios' actual settings, alpha_i and the CSI used, and
    # replays offline to a good demodulation
    meta = json.loads((out / "iq" / "round_0001.sigmf-meta").read_text())
    g = meta["global"]
    assert g["otafl:extra"]["devices"][0]["gain"] == pytest.approx(40.0) and len(g["otafl:alpha"]) == 1
    assert len(g["otafl:csi"]) == 1
    assert cli_main(["replay", str(out / "iq" / "round_0001.sigmf-meta")]) == 0
    # annotations: the preamble annotated where it arrived (the cable's delay, 0, pre-compensated by the
    # client from the session's calibration, so within a sample or two of the pulse centre)
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.phy.modem import Modem
    from otafl_sdr.radio.recording import read_recording
    x, _ = read_recording(out / "iq" / "round_0001.sigmf-meta")
    mod = Modem(load_config(out / "config.toml").phy)
    t = mod.preamble_template()
    pre = next(a for a in meta["annotations"] if a["core:label"] == "preamble")
    lo = max(pre["core:sample_start"] - 64, 0)
    peak = lo + int(np.argmax(np.abs(np.correlate(x[lo:lo + 3 * len(t)], t, mode="valid"))))
    assert abs(peak + (mod.ntaps - 1) // 2 - pre["core:sample_start"]) <= 3
    assert any(a["core:label"] == "client 0" for a in meta["annotations"])                                 # every round accounted, before release


def test_a_usrp_disappearing_mid_run_gives_a_clear_error_a_checkpoint_and_an_intact_ledger(uhd_sim, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "otafl_sdr.cli.main", "run", "--quiet", "--config", str(PRESET), "--out", str(out),
           "--set", "run.rounds=40"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, UHD_LOG_CONSOLE_LEVEL="fatal"))
    rounds = out / "rounds.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if rounds.exists() and len(rounds.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    uhd_sim.kill()                                           # the USRP loses power
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 4, stderr                      # radio failure: not an abort (134), not a traceback
    assert "Traceback" not in stderr
    assert "radio failure" in stderr and "resume" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"].startswith("radio failure")
    done = len(rounds.read_text().splitlines())
    assert done >= 2 and (out / "checkpoint.pt").exists()
    entries, torn = read_chain(out / "privacy_ledger.jsonl")           # hash chain intact
    assert len({e["round"] for e in entries}) >= done          # every released round was accounted
    assert cli_main(["verify", str(out)]) == 0


def test_a_radio_that_does_not_acknowledge_the_primer_burst_is_refused_before_any_round(uhd_sim, tmp_path, capsys):
    """The end-of-burst primer (UhdAir._prime): driven as real hardware (uhd.simulator = false), the
    simulator sends no burst_ack, exactly what a radio that lost its end-of-burst looks like; the run is
    refused at start with one line, and no folder (no ledger, nothing accounted) is left."""
    out = tmp_path / "run"
    capsys.readouterr()
    rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out),      # in this process: the answer
                   "--set", "run.rounds=1", "--set", "uhd.simulator=false", "--set", "uhd.lo_offset=0"])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("otafl-sdr: error:")]
    assert len(lines) == 1 and "no burst_ack for the primer burst from client 0" in lines[0], err
    assert "Traceback" not in err and not out.exists()
