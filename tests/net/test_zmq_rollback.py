"""The zmq testbed's folder is keyed and anchored (issue 35, item 1): `run --air zmq` makes the run's ledger
key and anchor before its server resumes the prepared folder, and the issue's rollback (the last 1, 2 or 5
ledger entries, their rows and sent-journal lines dropped, summary.json deleted, the checkpoint's counters
rewritten; tests/rollback_helpers.py), a sent-journal line dropped alone (a resume would think the last
booking never went out and re-send it under that booking) and a forged withdrawal are refused by `verify`
(exit 1) and `run --resume` (exit 2, one line, before the testbed starts), the folder byte-identical.

One zmq testbed run (a CLI subprocess: the testbed's own process tree) is shared by the module; the checks on
it call the CLI's ``main`` in this process (their answer is under test, not a process boundary), each on a
private copy."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ledger_helpers import digest
from rollback_helpers import roll_back

pytestmark = [pytest.mark.net, pytest.mark.slow]

TINY = ["run.seed=5", "run.rounds=6", "run.progress=false", "run.torch_threads=1", "data.dataset=digits",
        "data.clients=3", "model.hidden=16", "train.local_epochs=1", "algorithm.name=fedavg",
        "privacy.eps=0.3", "net.timeout_s=40", "net.heartbeat_s=0.5"]


def _cli(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, start_new_session=True)


@pytest.fixture(scope="module")
def zmq_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("zmq-rollback") / "run"
    sets = [a for s in TINY for a in ("--set", s)]
    r = _cli("run", "--quiet", "--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out), *sets)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return out


def _main(capsys, *args) -> subprocess.CompletedProcess:
    """The CLI's ``main`` in this process: its exit status and what it printed."""
    from otafl_sdr.cli.main import main
    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out, err)


def test_a_zmq_run_is_keyed_and_anchored(zmq_run, capsys):
    assert (zmq_run / "ledger.id").is_file()
    r = _main(capsys, "verify", str(zmq_run))
    assert r.returncode == 0 and "keyed: HMAC-SHA256" in r.stdout and "at its anchor" in r.stdout, r.stdout
    assert len((zmq_run / "privacy_ledger.sent").read_text().splitlines()) == 6


def _drop_last_sent_line(out):
    sent = out / "privacy_ledger.sent"
    sent.write_text("".join(x + "\n" for x in sent.read_text().splitlines()[:-1]))


def _forge_withdrawal(out):
    last = json.loads((out / "privacy_ledger.sent").read_text().splitlines()[-1])
    with open(out / "privacy_ledger.sent", "a") as f:
        f.write(json.dumps({**last, "withdrawn": True}) + "\n")


ATTACKS = {"rollback of 1 entry": lambda out: roll_back(out, 1), "rollback of 2 entries": lambda out: roll_back(out, 2),
           "rollback of 5 entries": lambda out: roll_back(out, 5), "last sent line dropped": _drop_last_sent_line,
           "a forged withdrawal": _forge_withdrawal}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_attack_is_refused_and_nothing_changes(zmq_run, tmp_path, attack, capsys):
    out = tmp_path / "run"
    shutil.copytree(zmq_run, out)
    ATTACKS[attack](out)
    before = digest(out)
    r = _main(capsys, "verify", str(out))
    assert r.returncode == 1 and "anchor outside the folder" in r.stdout and len(r.stdout.splitlines()) == 1, r.stdout
    r = _main(capsys, "run", "--resume", str(out), "--quiet")
    err = r.stderr.strip()
    assert r.returncode == 2 and "cannot resume" in err and "anchor outside the folder" in err, r.stdout + err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert digest(out) == before
