"""Smaller defects of issue 27, item 8: too many clients for a data set names data.clients and the data
set's size; the top-level help lists exit status 4; a finished run leaves no .lock, and the lock still
refuses a second writer while one holds it."""
import fcntl
import os

import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.results.files import lock_out_dir, unlock_out_dir


def test_too_many_clients_names_data_clients_and_the_data_sets_size(tmp_path, capsys):
    rc = main(["run", "--air", "sim", "--set", "data.clients=100000", "--set", "run.rounds=1", "--quiet",
               "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "'data.clients'" in err and "100000" in err and "'mnist5k' has 5000 samples" in err
    assert "synthetic_samples" not in err
    assert not (tmp_path / "r").exists()
    rc = main(["run", "--air", "sim", "--set", "data.dataset=synthetic", "--set", "data.clients=5000",
               "--set", "run.rounds=1", "--quiet", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert rc == 2 and "'data.clients'" in err and "data.synthetic_samples = 4000" in err


def test_top_level_help_lists_every_exit_status(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for status in ("0 done", "1 failure", "2 bad input", "3 stopped at the privacy budget", "4 a radio failed",
                   "130 interrupted"):
        assert status in text, status
    import otafl_sdr.cli.main
    assert "4 a radio failed" in " ".join(otafl_sdr.cli.main.__doc__.split())


def test_the_lock_goes_with_its_writer_and_still_refuses_a_second(tmp_path):
    from otafl_sdr.errors import UserError
    d = tmp_path / "r"
    d.mkdir()
    lock_out_dir(d)
    assert (d / ".lock").read_text() == str(os.getpid())
    with open(d / ".lock") as f:                                        # another process's view: it is held
        with pytest.raises(BlockingIOError):
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    unlock_out_dir(d)
    assert not (d / ".lock").exists()
    # a writer that opened the old file just before it was removed locks the path afresh, not the orphan
    stale = open(d / ".lock", "a+")
    os.unlink(d / ".lock")
    fcntl.flock(stale.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)          # an orphan inode, locked by nobody useful
    stale.close()
    lock_out_dir(d)
    try:
        import subprocess
        import sys
        probe = subprocess.run([sys.executable, "-c", (
            "import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)"),
            str(d / ".lock")], capture_output=True, text=True)
        assert probe.returncode != 0 and "BlockingIOError" in probe.stderr   # the path's file is held
        with pytest.raises(UserError, match="in use by another otafl-sdr process"):
            import otafl_sdr.results.files as r
            saved = r._LOCKS.pop(str(d.resolve()))                      # this process as a second writer
            try:
                lock_out_dir(d)
            finally:
                r._LOCKS[str(d.resolve())] = saved
    finally:
        unlock_out_dir(d)
    assert not (d / ".lock").exists()


def test_a_writer_refused_in_the_holders_first_moments_still_names_its_pid(tmp_path):
    """The holder locks the file, then writes its PID: a second writer refused between the two waits for the
    PID (CI once printed 'PID ?', two sweeps started at once)."""
    import threading

    from otafl_sdr.errors import UserError
    d = tmp_path / "r"
    d.mkdir()
    holder = open(d / ".lock", "a+")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)          # locked, its PID not yet written
    late = threading.Timer(0.2, lambda: (holder.write("4242"), holder.flush()))
    late.start()
    try:
        with pytest.raises(UserError, match=r"in use by another otafl-sdr process \(PID 4242\)"):
            lock_out_dir(d)
    finally:
        late.join()
        holder.close()
