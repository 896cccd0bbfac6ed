"""One writer per sweep and compare folder (issue 35, item 2): two `sweep` (or two `compare`) processes started
on one folder at once: one is refused in one line naming the holder's PID (exit 2, nothing written), the other
runs every cell, and every cell verifies (before, both ran the same cell and one of them failed `verify`).
A cell folder is cleared only under its own lock, as a run takes it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.errors import UserError
from otafl_sdr.results.files import lock_out_dir, unlock_out_dir
from otafl_sdr.sweeps.sweep_folder import clear_unstarted

SWEEP = """
[sweep]
name = "w"
out = "{out}"
seeds = [1]
set = ["run.rounds=2", "data.dataset=digits", "data.clients=3", "model.name=logreg", "train.local_epochs=1",
       "air.name=sim", "privacy.unit=client", "power.jammer=false", "run.torch_threads=1", "train.tau=0.5",
       "privacy.eps=50", "run.figures=false"]

[grid]
"train.lr" = [0.05, 0.1]
"""

COMPARE = SWEEP + """
[arms.pc]
set = ["power.policy=cj_adaptive"]

[arms.hmin]
set = ["power.policy=h_min"]

[[claims]]
source = "test"
more = "pc"
less = "hmin"
"""


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.slow
@pytest.mark.parametrize("command,text,cells", [("sweep", SWEEP, 2), ("compare", COMPARE, 4)])
def test_two_processes_on_one_folder_one_refused_every_cell_verifies(tmp_path, command, text, cells, capsys):
    """Both processes start at once; the winner holds the folder from its start to its report (a worker
    process to spawn, then its cells), so the other meets the lock however few cells there are. `verify` of
    the folder is the CLI's main in this process (its answer is what is checked)."""
    out = tmp_path / "out"
    spec = tmp_path / "spec.toml"
    spec.write_text(text.format(out=out))
    procs = [_cli(command, str(spec), "--workers", "1", "--quiet") for _ in range(2)]
    done = [(p, *p.communicate(timeout=600)) for p in procs]
    refused = [(p, err) for p, _, err in done if p.returncode == 2]
    ran = [p for p, _, _ in done if p.returncode == 0]
    assert len(refused) == 1 and len(ran) == 1, [(p.returncode, e[-500:]) for p, _, e in done]
    err = refused[0][1].strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"sweep folder '{out.resolve()}' is in use by another otafl-sdr process (PID {ran[0].pid})" in err, err
    capsys.readouterr()
    rc = main(["verify", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0 and f"{cells}/{cells} cells OK" in printed, printed
    assert not (out / ".lock").exists()


def test_a_cell_with_a_live_run_is_never_cleared(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "config.toml").write_text("# a run starting\n")
    lock_out_dir(cell)                      # the run's lock, as Experiment takes it
    try:
        child = subprocess.run([sys.executable, "-c", "from pathlib import Path; import sys; "
                                "from otafl_sdr.sweeps.sweep_folder import clear_unstarted; from otafl_sdr.errors "
                                "import UserError\ntry:\n    clear_unstarted(Path(sys.argv[1]))\nexcept UserError as e:"
                                "\n    print(e)", str(cell)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert f"is in use by another otafl-sdr process (PID {os.getpid()})" in child.stdout, child.stdout + child.stderr
        assert (cell / "config.toml").is_file()
    finally:
        unlock_out_dir(cell)
    clear_unstarted(cell)                   # no run holds it: a start that never reached round 1 is cleared
    assert not cell.exists()


def test_lock_sweep_is_reentrant_and_leaves_nothing_behind(tmp_path):
    """lock_sweep is this process's: taking it again is a no-op, releasing it removes .lock."""
    from otafl_sdr.sweeps.sweep_folder import lock_sweep, release_sweep
    out = tmp_path / "s"
    assert lock_sweep(out) is True and lock_sweep(out) is False
    assert (out / ".lock").read_text() == str(os.getpid())
    release_sweep(out)
    assert not out.exists()                 # left empty: removed
    with pytest.raises(UserError):
        lock_sweep(Path("/proc/forbidden/s"))
