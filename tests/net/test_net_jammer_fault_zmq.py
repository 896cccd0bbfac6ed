"""A faulted jammer gets no credit on the zmq testbed (issue 24, item 4): `otafl-sdr run --air zmq` (server,
3 clients, jammer, receiver, channel emulator as processes on 127.0.0.1); the jammer SIGKILLs itself when
round 2's ``jam`` arrives (``OTAFL_NET_DIE_AT=jammer@jam:2``), after the clients were told to transmit, so
the emulator sums their bursts with its channel noise only and pushes that on towards the server. The
release rule charges the attempt at channel noise only (an appended, hash-chained ledger line), the
attempt is not used (the round is re-sent once the supervisor restarted the jammer, booked afresh), and
`otafl-sdr verify` and dp-accounting (one GaussianDpEvent per ledger line) agree with the printed eps."""
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from otafl_sdr.privacy import ledger_keys
from otafl_sdr.privacy.ledger import read_chain
from dp_reference import independent_pld_epsilon
from node_procs import cli_in_process

pytestmark = [pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SETS = ["run.seed=5", "run.rounds=3", "run.progress=false", "run.torch_threads=1", "data.dataset=digits",
        "data.clients=3", "model.hidden=16", "train.local_epochs=1", "algorithm.name=fedavg",
        "privacy.eps=0.3", "privacy.targeting=paper", "privacy.enforce=false", "net.timeout_s=40",
        "net.heartbeat_s=0.5"]


def _run(out: Path, env_extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg")
    env.update(env_extra)
    args = ["--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out)]
    for s in SETS:
        args += ["--set", s]
    proc = subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--quiet"] + args, env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=600)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        pids = out / "testbed" / "pids.json"
        for p in (json.loads(pids.read_text())["processes"] if pids.exists() else []):
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _chain(out: Path):
    """The run's ledger, its HMAC chain checked under the run's own key (privacy/ledger_keys.py)."""
    from otafl_sdr.configure.load import load_config
    key = ledger_keys.load(ledger_keys.read_run_id(out), load_config(out / "config.toml"))
    return read_chain(out / "privacy_ledger.jsonl", key=key)


def test_a_killed_jammer_is_charged_at_channel_noise_on_the_zmq_testbed(tmp_path):
    out = tmp_path / "run"
    r = _run(out, {"OTAFL_NET_DIE_AT": "jammer@jam:2"})
    assert r.returncode == 0, r.stderr[-3000:] + (out / "testbed" / "server.log").read_text()[-3000:]
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    assert [x["round"] for x in rows] == [1, 2, 3] and not any(x["lost"] for x in rows)
    assert rows[1]["attempts"] == 2                          # the faulted attempt was not used
    entries, torn = _chain(out)
    assert not torn
    assert [(e["round"], e["attempt"], bool(e["extra"].get("fault"))) for e in entries] == \
        [(1, 0, False), (2, 0, False), (2, 0, True), (2, 1, False), (3, 0, False)]
    planned, charged = entries[1], entries[2]
    assert charged["extra"]["fault"].startswith("jammer ")
    assert charged["extra"]["charged"] == "channel noise only"
    # channel noise only: sigma_c2 = 1 (channel.sigma_c2 of the config, the emulator's noise) over alpha_u
    assert charged["sigma_eff"] == pytest.approx(math.sqrt(1.0) / rows[1]["alpha_u"], rel=1e-9)
    assert charged["sensitivity"] == planned["sensitivity"] and charged["sigma_eff"] < planned["sigma_eff"]
    summary = json.loads((out / "summary.json").read_text())
    eps_all = independent_pld_epsilon(entries, 1e-5)
    assert summary["eps_pld"] == pytest.approx(eps_all, rel=1e-3)
    assert eps_all > 1.2 * independent_pld_epsilon([e for e in entries if not e["extra"].get("fault")], 1e-5)
    assert any("charged" in n and "jammer" in n for n in summary["notes"]), summary["notes"]
    v = cli_in_process("verify", out)
    assert v.returncode == 0 and f"{len(entries)} ledger entries" in v.stdout + v.stderr, v.stdout + v.stderr
    print(f"\nplanned sigma_eff {planned['sigma_eff']:.6g}, charged {charged['sigma_eff']:.6g}; eps_pld without "
          f"the charge {independent_pld_epsilon([e for e in entries if not e['extra'].get('fault')], 1e-5):.6g}, "
          f"with it {eps_all:.6g}")
