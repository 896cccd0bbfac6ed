"""Issue 28: a full disk while a new run writes its lock or its config.toml leaves nothing behind (before, a
results folder holding only `.lock`, which neither `run --out` nor `--resume` accepts), says so in one line
without a traceback, and the same command runs once there is room. A full disk is a file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails with EFBIG), as in tests/cli/test_hostile_files.py."""
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.net]          # CLI subprocesses

OTAFL = str(Path(sys.executable).with_name("otafl-sdr"))
RUN = ["--air", "sim", "--set", "run.rounds=1", "--set", "data.clients=3", "--set", "data.max_samples=300",
       "--set", "model.name=logreg", "--set", "run.torch_threads=1", "--quiet"]


def _limit(nbytes: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return pre


def _run(out: Path, preexec=None):
    r = subprocess.run([OTAFL, "run", *RUN, "--out", str(out)], capture_output=True, text=True, timeout=180,
                       preexec_fn=preexec, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("nbytes, name", [(2, ".lock"), (200, "config.toml")])
def test_a_full_disk_at_the_start_leaves_nothing_and_the_same_command_runs_again(tmp_path, nbytes, name):
    out = tmp_path / "run"
    rc, so, err = _run(out, _limit(nbytes))     # the PID fits 200 bytes, config.toml does not
    assert rc in (1, 2), err
    assert "Traceback" not in err + so
    assert len(err.strip().splitlines()) == 1, err
    assert f"'{out / name}'" in err and "File too large" in err and "run the same command again" in err
    assert not out.exists()                      # nothing left: no folder holding only .lock
    rc, so, err = _run(out)
    assert rc == 0, err
    assert (out / "config.toml").is_file() and (out / "rounds.jsonl").is_file()


def test_write_new_config_keeps_what_it_did_not_write(tmp_path):
    """The testbed's server writes config.toml itself (net/testbed.py): a failure there removes only the
    run's own files; a folder holding anything else stays as it was."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code = ("import sys; from pathlib import Path; from otafl_sdr.errors import UserError\n"
            "from otafl_sdr.results.run_folder import write_new_config\n"
            "try:\n    write_new_config(Path(sys.argv[1]), 'x' * 10000)\n"
            "except UserError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60,
                       preexec_fn=_limit(100), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert "cannot write" in r.stdout and "config.toml" in r.stdout and "files were removed" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
