"""A stop asked for while the checkpoint is written (results/files.atomic_torch_save): SIGTERM or Ctrl-C
arriving mid-write is held until the checkpoint is whole and renamed into place, then acted on (the run
stops as asked: Terminated / KeyboardInterrupt, exit 143 / 130), never reported as "cannot write checkpoint"
(a disk failure). Found by a SIGTERM test whose signal landed in torch.save: torch's zip writer, unwound by
the exception, raised "unexpected pos 1024 vs 918", and the stop read as a full disk (exit 2)."""
from __future__ import annotations

import os
import signal

import pytest
import torch

from otafl_sdr.errors import Terminated, raise_terminated
from otafl_sdr.results.files import atomic_torch_save


class SignalWhilePickled:
    """Sends ``signum`` to this process while torch.save pickles it: the stop lands inside the write."""

    def __init__(self, signum: int):
        self.signum = signum

    def __reduce__(self):
        os.kill(os.getpid(), self.signum)
        return (dict, ())


@pytest.mark.parametrize("signum,stop", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_stop_during_the_write_comes_after_a_whole_checkpoint(tmp_path, signum, stop):
    path = tmp_path / "checkpoint.pt"
    # as `otafl-sdr run` has them: Python's own Ctrl-C handler (a pytest-xdist worker starts with SIGINT
    # ignored) and SIGTERM raising Terminated (cli/main.signals_raise); the worker's own put back after
    sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    old = raise_terminated((signal.SIGTERM,))
    try:
        term = signal.getsignal(signal.SIGTERM)
        state = {"round": 7, "model": torch.arange(50_000.0), "poison": SignalWhilePickled(signum)}
        with pytest.raises(stop) as e:
            atomic_torch_save(state, path)
        assert type(e.value) is stop
        # the handlers held during the write are put back
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is term
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        signal.signal(signal.SIGINT, sigint)
    back = torch.load(path, weights_only=False)
    assert back["round"] == 7 and torch.equal(back["model"], torch.arange(50_000.0))
    assert not path.with_name(path.name + ".tmp").exists()


@pytest.mark.parametrize("signum,stop", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_stop_during_a_row_write_leaves_the_row_in_the_file_and_in_the_log(tmp_path, monkeypatch, signum, stop):
    """The round log (results/files.RoundLog.append): a stop that lands between the row reaching the file and
    the log's own list holding it would leave summary.json counting one round fewer than rounds.jsonl holds
    (CI saw ``rounds: 0`` beside a written row 1). Held until both hold the row, then acted on."""
    from otafl_sdr.results import files
    log = files.RoundLog(tmp_path / "rounds.jsonl")
    real_fsync = os.fsync

    def fsync_then_signal(fd):                      # the row is in the file; the stop arrives now
        real_fsync(fd)
        os.kill(os.getpid(), signum)
    monkeypatch.setattr(files.os, "fsync", fsync_then_signal)
    sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    old = raise_terminated((signal.SIGTERM,))
    try:
        with pytest.raises(stop):
            log.append({"round": 1, "test_accuracy": 0.5})
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        signal.signal(signal.SIGINT, sigint)
    assert [r["round"] for r in log.rows] == [1]
    assert [r["round"] for r in files.read_rounds(tmp_path / "rounds.jsonl")] == [1]
