"""Stopping the node processes a testbed test started (shared by the tests/net uhd tests)."""
from __future__ import annotations

import os
import signal
import subprocess


def stop_nodes(procs, wait_s: float = 20.0) -> None:
    """SIGTERM each still-running process's group (every process here is started with ``start_new_session``:
    a node's own children go with it), wait up to ``wait_s`` for each, then SIGKILL the group of any that is
    still running."""
    for p in procs:
        if p.poll() is None:
            _signal_group(p, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:          # gone meanwhile
        pass


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """The CLI's ``main(args)`` in this process (where its answer, not the process boundary, is under test: no
    interpreter start-up, no torch import): its exit status and what it printed, as ``subprocess.run`` gives."""
    import contextlib
    import io
    from otafl_sdr.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())
