"""No row lost, and a refused resume changes nothing (issue 28, item 4): `run --resume` runs every check
`verify` runs (workload/ledger_checks.py) before it writes anything; rows in rounds.jsonl are checked against the
checkpoint's count, so a torn or missing counted row stops the resume (exit 2, one line, a repair hint)
and `verify` fails too; every refusal leaves each file byte-identical."""
import json

import pytest

from ledger_helpers import digest, interrupted_run
from otafl_sdr.cli.main import main


def _resume(out, capsys):
    rc = main(["run", "--resume", str(out), "--quiet"])
    cap = capsys.readouterr()
    return rc, cap.err.strip()


def _verify(out, capsys):
    rc = main(["verify", str(out)])
    return rc, capsys.readouterr().out.strip()


def _damage(out, how):
    rows = out / "rounds.jsonl"
    led = out / "privacy_ledger.jsonl"
    if how == "last row torn":
        text = rows.read_text()
        rows.write_text(text[:len(text) - 25])
    elif how == "rounds.jsonl deleted":
        rows.unlink()
    elif how == "rounds.jsonl emptied":
        rows.write_text("")
    elif how == "counted ledger line torn":
        lines = led.read_text().splitlines(keepends=True)
        led.write_text("".join(lines[:-1]) + lines[-1][:60])
    elif how == "ledger deleted":
        led.unlink()
    elif how == "ledger line edited":
        lines = led.read_text().splitlines(keepends=True)
        rec = json.loads(lines[2])
        rec["sigma_eff"] *= 10
        led.write_text("".join(lines[:2] + [json.dumps(rec) + "\n"] + lines[3:]))
    elif how == "config changed":
        cfg = out / "config.toml"
        cfg.write_text(cfg.read_text().replace("eps = 1.0", "eps = 10.0"))
    elif how == "a middle row replaced by a copy of another":
        lines = rows.read_text().splitlines(keepends=True)
        rows.write_text("".join(lines[:2] + [lines[1]] + lines[3:]))
    elif how == "rounds.jsonl a folder":
        rows.unlink()
        rows.mkdir()


ROW_DAMAGE = ["last row torn", "rounds.jsonl deleted", "rounds.jsonl emptied"]
ALL_DAMAGE = ROW_DAMAGE + ["a middle row replaced by a copy of another", "counted ledger line torn", "ledger deleted", "ledger line edited", "config changed",
                           "rounds.jsonl a folder"]


@pytest.mark.parametrize("how", ROW_DAMAGE)
def test_a_missing_or_torn_counted_row_stops_the_resume(tmp_path, capsys, how):
    out = interrupted_run(tmp_path)
    _damage(out, how)
    rc, err = _resume(out, capsys)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "rounds.jsonl" in err and "checkpoint counts 6 rows" in err and "restore" in err, err
    rc, line = _verify(out, capsys)
    assert rc == 1 and "checkpoint counts 6 rows" in line, line


@pytest.mark.parametrize("how", ALL_DAMAGE)
def test_a_refused_resume_leaves_every_file_byte_identical(tmp_path, capsys, how):
    out = interrupted_run(tmp_path)
    _damage(out, how)
    before = digest(out)
    rc, err = _resume(out, capsys)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert digest(out) == before, how
    rc = main(["run", "--dry-run", "--resume", str(out)])    # the plan of a damaged folder: refused alike (issue 35)
    cap = capsys.readouterr()
    assert rc == 2 and "cannot resume" in cap.err and len(cap.err.strip().splitlines()) == 1, cap.err
    assert "Traceback" not in cap.out + cap.err and digest(out) == before, how


@pytest.mark.experiment
def test_the_torn_counted_ledger_line_is_named(tmp_path, capsys):
    out = interrupted_run(tmp_path)
    _damage(out, "counted ledger line torn")
    lines_before = (out / "privacy_ledger.jsonl").read_text().count("\n")
    rc, err = _resume(out, capsys)
    assert rc == 2 and "entry 6, which the checkpoint counts, is torn" in err, err
    assert (out / "privacy_ledger.jsonl").read_text().count("\n") == lines_before


@pytest.mark.experiment
def test_an_intact_folder_resumes_and_verifies(tmp_path, capsys):
    out = interrupted_run(tmp_path)
    rc, err = _resume(out, capsys)
    assert rc == 0, err
    rc, line = _verify(out, capsys)
    assert rc == 0 and "12 rows" in line and "12 entries' booked figures re-derived" in line, line
