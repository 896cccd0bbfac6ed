"""Two channels of one USRP as two radios (issue 13, item 2): the ``channel=N`` key of a device address,
and the rules for transmitters that share a device, checked against UHD's simulated E320 (real discovery,
real UHD objects). What the simulator cannot carry (two TX streams and two RX streams at once: it serves
one stream endpoint) is in firmware_notes/uhd_simulator.md."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from otafl_sdr.errors import ConfigError
from otafl_sdr.radio.uhd_air import find_usrps
from otafl_sdr.radio.uhd_channels import split_channel
from otafl_sdr.radio.uhd_simulator import DEVICE_ARGS, UhdSimulator

ROOT = Path(__file__).resolve().parent.parent
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"


@pytest.fixture
def uhd_sim(tmp_path):
    """A fresh simulator for the test, gone before the next (as in test_uhd_simulator.py)."""
    deadline = time.monotonic() + 15
    while find_usrps(DEVICE_ARGS) and time.monotonic() < deadline:
        time.sleep(0.3)
    sim = UhdSimulator(log_path=tmp_path / "simulator.log")
    sim.start()
    try:
        yield sim
    finally:
        sim.close()
        deadline = time.monotonic() + 15
        while find_usrps(DEVICE_ARGS) and time.monotonic() < deadline:
            time.sleep(0.3)


def test_the_channel_key_is_ours_and_checked():
    assert split_channel("serial=31A0B1C,channel=1", "k") == ("serial=31A0B1C", 1)
    assert split_channel("addr=192.168.10.2", "k") == ("addr=192.168.10.2", 0)
    for bad, why in (("serial=A,channel=x", "integer"), ("serial=A,channel=16", r"\[0, 15\]"),
                     ("serial=A,channel=0,channel=1", "2 times")):
        with pytest.raises(ConfigError, match=why):
            split_channel(bad, "uhd.tx_args[0]")


def _run(tmp_path, *sets) -> subprocess.CompletedProcess:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "otafl_sdr.cli", "run", "--quiet", "--config", str(PRESET), "--out", str(out),
           "--set", "run.rounds=1", "--set", "data.clients=2", *[a for s in sets for a in ("--set", s)]]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240,
                          env={**__import__("os").environ, "UHD_LOG_CONSOLE_LEVEL": "fatal"})


def _one_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("otafl-sdr: error:")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_two_clients_on_one_channel_of_one_usrp_are_refused(uhd_sim, tmp_path):
    r = _run(tmp_path, "uhd.tx_args=['addr=127.0.0.1', 'addr=127.0.0.1,channel=0']")
    line = _one_line(r)
    assert "client 1 and client 0 use the same USRP" in line and "channel 0" in line
    assert not (tmp_path / "run").exists()


def test_both_tx_channels_of_the_e320_with_its_one_rx_channel_are_refused_at_start(uhd_sim, tmp_path):
    """The simulated E320 as discovery reports it: two clients on TX channels 0 and 1 pass the channel
    rule, and the E3xx rule (1x1 or 2x2, never 2 TX x 1 RX) refuses the run before anything is
    accounted, where UHD would have failed the streams mid-run."""
    r = _run(tmp_path, "uhd.tx_args=['addr=127.0.0.1,channel=0', 'addr=127.0.0.1,channel=1']")
    line = _one_line(r)
    assert "both TX channels" in line and "2 TX x 1 RX" in line and "uhd.tx_args[1]" in line
    assert not (tmp_path / "run").exists()
