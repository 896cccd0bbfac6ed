"""A radio failure inside the in-process uhd air after the bursts were handed to the radios (issue 24, item 4;
issue 25): the jammer's noise may not have gone out while the client's data did, so the AirError that stops
the run names every transmitter whose burst was not confirmed (``err.undelivered``) and the release rule
charges the attempt at channel noise only (rounds/accounting.fault_charge, the same rule as the testbed's).
On UHD's simulated E320: the client on TX channel 0, the jammer on TX channel 1, a calibration from the same
radios; the simulator is frozen (SIGSTOP) the moment the radios take the round's first samples (a long burst,
so its capture cannot be complete by then)."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.errors import AirError
from otafl_sdr.rounds.accounting import fault_charge
from otafl_sdr.transmission import Mechanism, RoundPlan

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"
SETS = ["power.jammer=true", "uhd.tx_args=['addr=127.0.0.1,channel=0']", "uhd.jammer_args=addr=127.0.0.1,channel=1",
        "calibration.session=false"]


def _plan(sigma_c2: float, dim: int = 100_000) -> RoundPlan:
    rng = np.random.default_rng(3)
    alpha_u, alpha_cj = 4.0, 0.05
    payload = rng.standard_normal((1, dim)) / np.sqrt(dim)
    h = np.array([1.0 + 0j])
    sigma_eff = math.sqrt((sigma_c2 + alpha_cj ** 2) / alpha_u ** 2)    # channel + jammer (|h_cj| = 1)
    return RoundPlan(round=1, payload=payload, alpha=np.array([alpha_u * 0.2 + 0j]), h=h, target_gain=np.array([0.2]),
                     alpha_u=alpha_u, alpha_cj=alpha_cj, h_cj=1.0 + 0j, sigma_c2=sigma_c2, mode=["update"],
                     mechanism=Mechanism(round=1, sensitivity=1.0, sigma_eff=sigma_eff))


def _child(cfg_sets: list, sim_pgid: int) -> None:
    """In its own process (a failed radio's objects are kept for the life of the process, radio/uhd_watchdog.park:
    they must not outlive this scenario): start the air, freeze the simulator the moment the radios take the
    round's first samples, transmit; print what the air raised as JSON."""
    from otafl_sdr.radio.uhd_air import UhdAir
    from otafl_sdr.configure.load import load_config

    air = UhdAir(load_config(PRESET, cfg_sets))
    air.start()
    jammer = air._jammer                              # the radios' TX block (channel 1: the jammer's port)
    first = jammer.block.nitems_read(jammer.port)
    frozen = threading.Event()

    def freeze():
        end = time.monotonic() + 60
        while time.monotonic() < end and jammer.block.nitems_read(jammer.port) == first:
            time.sleep(0.0005)
        os.killpg(sim_pgid, signal.SIGSTOP)
        frozen.set()

    t = threading.Thread(target=freeze, daemon=True)
    t.start()
    out = {"raised": False}
    try:
        air.transmit(_plan(sigma_c2=1e-4), np.random.default_rng(0))
    except AirError as e:
        out = {"raised": True, "message": str(e), "undelivered": getattr(e, "undelivered", None)}
    t.join(65)
    out["frozen"] = frozen.is_set()
    print("RESULT " + json.dumps(out), flush=True)
    os._exit(0)


def test_a_radio_failure_after_the_bursts_charges_the_round_at_channel_noise(uhd_sim, tmp_path):
    from otafl_sdr.cli.main import main as cli_main
    cal = tmp_path / "cal.json"
    env = dict(os.environ, UHD_LOG_CONSOLE_LEVEL="fatal")
    argv = ["calibrate", "all", "--config", str(PRESET), "--out", str(cal)]
    for s in SETS:
        argv += ["--set", s]
    assert cli_main(argv) == 0                # the calibration in this process; the failure in a child (_child)
    sets = SETS + [f"calibration.file={cal}"]
    code = (f"import sys; sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT / 'tests' / 'radio')!r}]; "
            f"from test_uhd_radio_fault_charge import _child; _child({sets!r}, {uhd_sim.proc.pid})")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=240, env=env)
    finally:
        os.killpg(uhd_sim.proc.pid, signal.SIGCONT)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, r.stdout[-2000:] + r.stderr[-2000:]
    got = json.loads(lines[0][7:])
    assert got["frozen"] and got["raised"], got
    assert "a radio failed during the exchange" in got["message"]
    undelivered = got["undelivered"]
    assert set(undelivered) == {"client-0", "jammer"} and "radio failure" in undelivered["jammer"]
    plan = _plan(sigma_c2=1e-4)
    charged = fault_charge(plan, 0, undelivered)
    # the jammer's share is gone: channel noise only, sigma_c2 / alpha_u^2 per real coordinate
    assert charged.sigma_eff == pytest.approx(math.sqrt(plan.sigma_c2) / plan.alpha_u)
    assert charged.extra["charged"] == "channel noise only" and "jammer" in charged.extra["fault"]
    assert charged.sigma_eff < plan.mechanism.sigma_eff
