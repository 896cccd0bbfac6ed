"""Results that cannot lie: a damaged results folder is refused on --resume (exit 2, one line) and never
under-counts epsilon; a torn line written after the checkpoint is repaired; a crafted pickle checkpoint is
refused without running; a garbled middle row loses nothing; a second writer is refused; `verify` gives a
one-line verdict."""
import hashlib
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shared_runs
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.orchestrator import Experiment

pytestmark = [pytest.mark.net, pytest.mark.usefixtures("figures_not_drawn")]

SETS = ["run.progress=false", "data.dataset=digits", "data.clients=3", "model.hidden=8", "train.local_epochs=1",
        "air.name=sim", "algorithm.name=fedavg", "privacy.unit=client", "power.jammer_multiple=1",
        "privacy.eps=4.5", "run.rounds=12"]


def _interrupted_run(tmp_path, after=6, extra=()) -> Path:
    """A run stopped after ``after`` rounds (as by a kill between rounds), its checkpoint at that round: a
    private copy (tmp_path/run) of the one run the session makes for these arguments (tests/shared_runs.py)."""
    name = f"tamper-{after}-{hashlib.sha256(repr(tuple(extra)).encode()).hexdigest()[:12]}"
    return shared_runs.copy_of(name, lambda out: _interrupt(out, after, extra), tmp_path / "run")


def _interrupt(out, after, extra) -> None:
    exp = Experiment(load_config(None, SETS + list(extra)), out)

    def stop(row):
        if row["round"] == after:
            raise KeyboardInterrupt
    exp.on_round = stop
    outcome = exp.run()
    assert outcome.stopped_reason.startswith("interrupted")


def _resume(out, capsys):
    rc = main(["run", "--resume", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    return rc, err


def _ledger_lines(out):
    return (out / "privacy_ledger.jsonl").read_text().splitlines(keepends=True)


@pytest.mark.parametrize("damage", ["deleted", "emptied", "middle line deleted", "released line torn",
                                    "line edited", "config changed"])
def test_a_damaged_folder_is_refused(tmp_path, capsys, damage):
    out = _interrupted_run(tmp_path)
    led = out / "privacy_ledger.jsonl"
    lines = _ledger_lines(out)
    if damage == "deleted":
        led.unlink()
    elif damage == "emptied":
        led.write_text("")
    elif damage == "middle line deleted":
        led.write_text("".join(lines[:2] + lines[3:]))
    elif damage == "released line torn":
        led.write_text("".join(lines[:-1]) + lines[-1][:40])
    elif damage == "line edited":
        rec = json.loads(lines[1])
        rec["sigma_eff"] *= 10                                   # claim more noise than was sent
        led.write_text("".join([lines[0], json.dumps(rec) + "\n"] + lines[2:]))
    elif damage == "config changed":
        cfg = (out / "config.toml").read_text().replace("eps = 4.5", "eps = 40.0")
        (out / "config.toml").write_text(cfg)
    rc, err = _resume(out, capsys)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert main(["verify", str(out)]) == 1 or damage in ("deleted", "emptied")


def test_budget_bypass_sequence_ends_in_exit_2_and_the_intact_run_stops_at_its_budget(tmp_path, capsys):
    tight = ["power.jammer=false", "power.alpha_u=0.8",          # channel noise only: the budget ends the run
             "privacy.targeting=paper"]                        # (a target calibration would spend it exactly)
    out = _interrupted_run(tmp_path, after=3, extra=tight)
    (out / "privacy_ledger.jsonl").unlink()
    rc, err = _resume(out, capsys)
    assert rc == 2 and "missing" in err
    # the same run, intact, stops at its budget with exit 3 and never passes it
    intact = _interrupted_run(tmp_path / "b", after=3, extra=tight)
    rc, _ = _resume(intact, capsys)
    s = json.loads((intact / "summary.json").read_text())
    assert rc == 3 and s["eps_rdp"] <= 4.5 and "budget" in s["stopped_reason"]


def test_torn_line_after_the_checkpoint_is_repaired(tmp_path, capsys):
    out = _interrupted_run(tmp_path)
    with open(out / "privacy_ledger.jsonl", "a") as f:
        f.write('{"round": 7, "attempt": 0, "sensit')             # a write interrupted by a crash
    rc, err = _resume(out, capsys)
    assert rc in (0, 3), err
    assert main(["verify", str(out)]) == 0
    assert "OK" in capsys.readouterr().out


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_Evil.marker}",))


def test_a_crafted_pickle_checkpoint_is_refused_without_running(tmp_path, capsys):
    out = _interrupted_run(tmp_path)
    _Evil.marker = str(tmp_path / "pwned")
    import torch
    torch.save({"iteration": 1, "w": torch.zeros(2), "w_prev": _Evil()}, out / "checkpoint.pt",
               pickle_protocol=pickle.HIGHEST_PROTOCOL)
    rc, err = _resume(out, capsys)
    assert rc == 2 and "refusing to load it" in err
    assert not (tmp_path / "pwned").exists()


def test_a_garbled_middle_row_is_refused_and_nothing_is_lost(tmp_path, capsys):
    out = _interrupted_run(tmp_path)
    rows = (out / "rounds.jsonl").read_text().splitlines(keepends=True)
    garbled = "".join(rows[:3] + ["{not json\n"] + rows[4:])
    (out / "rounds.jsonl").write_text(garbled)
    rc, err = _resume(out, capsys)
    assert rc == 2 and "line 4 is corrupt" in err
    assert (out / "rounds.jsonl").read_text() == garbled


def test_a_second_writer_is_refused_naming_the_holder(tmp_path, capsys):
    out = _interrupted_run(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
        "f.seek(0); f.truncate(); f.write(str(os.getpid())); f.flush(); print('locked', flush=True); "
        "time.sleep(60)"), str(out / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        rc, err = _resume(out, capsys)
        assert rc == 2 and f"PID {holder.pid}" in err
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    rc, _ = _resume(out, capsys)                                  # once it is gone, the resume goes on
    assert rc in (0, 3)


def test_verify_ok_on_an_intact_folder(tmp_path, capsys):
    out = _interrupted_run(tmp_path)
    assert main(["verify", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"verify {out}: OK") and "chain intact" in line and len(line.splitlines()) == 1
    assert main(["verify", str(tmp_path / "nothing")]) == 2
