"""Plan before you run (issue 27, item 7): `run --dry-run` prints the plan the run then books (the same knob,
the same planned eps per accountant, the same first mechanism) and writes nothing; `--resume DIR --extend N`
continues a finished run for N more client rounds: its ledger equals that of one longer run with the same
seed, under the same budget rules (a target-calibrated run spent its budget: `--extend` alone is refused, it
takes `--eps E`, tests/run/test_extend_eps.py); `--resume` of a finished run
says it is complete and changes nothing; a clean exit leaves no stale .lock (issue 27, item 8)."""
import contextlib
import io
import json
import re

import pytest

import shared_runs
from dp_reference import independent_pld_epsilon
from otafl_sdr.cli.main import main

SMALL = ["--air", "sim", "--set", "data.dataset=digits", "--set", "data.clients=5", "--set", "model.hidden=16",
         "--set", "train.batch_size=32", "--set", "run.torch_threads=1"]


def _sets(*extra):
    out = list(SMALL)
    for s in extra:
        out += ["--set", s]
    return out


def _ledger(out, drop=("prev", "hash", "time", "release")):
    return [{k: v for k, v in json.loads(x).items() if k not in drop}
            for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]


def _files(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def _printed(text, name):
    m = re.search(rf"^\s*{re.escape(name)}\s+(\S+)", text, re.M)
    assert m, f"{name} not printed:\n{text}"
    return m.group(1)


@pytest.mark.experiment
@pytest.mark.parametrize("extra", [("algorithm.name=fedavg",), ("algorithm.name=upcycled_fl", "privacy.accountant=pld")])
def test_dry_run_prints_the_plan_the_run_books(tmp_path, capsys, monkeypatch, extra):
    monkeypatch.chdir(tmp_path)
    args = _sets("run.rounds=3", *extra)
    assert main(["run", "--dry-run", *args]) == 0
    plan = capsys.readouterr().out
    assert not (tmp_path / "results").exists()                   # nothing written, nothing booked
    assert "nothing was trained, sent or booked" in plan and "estimated wall time" in plan
    assert re.search(r"jammer power P_cj/\(d sigma_c2\): \S+ \.\. \S+ dB", plan)
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--quiet", *args]) == 0
    capsys.readouterr()
    s = json.loads((out / "summary.json").read_text())
    # the same knob, found by the same solver
    for key in ("eps_planned", "calibrated_noise_multiplier", "calibrated_alpha_u", "calibrated_peak_jammer_power"):
        assert float(_printed(plan, key)) == pytest.approx(s[key], rel=1e-5), key
    assert f"privacy knob: {s['calibration']}" in plan
    # the planned eps of every accountant is what the run spent (the mechanism is planned, not data-dependent)
    for acc in ("pld", "rdp", "paper"):
        assert float(_printed(plan, f"eps_{acc}")) == pytest.approx(s[f"eps_{acc}"], rel=1e-5), acc
    led = _ledger(out)
    first = next(r for r in led if r["uses_data"])
    m = re.search(r"first data round: sensitivity (\S+), sigma_eff (\S+),", plan)
    assert float(m.group(1)) == pytest.approx(first["sensitivity"], rel=1e-5)
    assert float(m.group(2)) == pytest.approx(first["sigma_eff"], rel=1e-5)
    # rechecked with dp-accounting directly
    assert float(_printed(plan, "eps_pld")) == pytest.approx(independent_pld_epsilon(led, s["delta"]), rel=2e-3)


@pytest.mark.experiment
def test_extend_equals_one_longer_run(tmp_path, capsys):
    # a mechanism whose noise does not depend on run.rounds (the channel's noise at the paper's alpha_u rule;
    # Theorem 2's jammer and a target calibration are planned for run.rounds), so 2 + 2 client rounds are 4
    common = ("algorithm.name=upcycled_fl", "privacy.targeting=paper", "power.jammer=false", "privacy.enforce=false")
    long_, short = tmp_path / "long", tmp_path / "short"
    assert main(["run", "--out", str(long_), "--quiet", *_sets("run.rounds=4", *common)]) == 0
    assert main(["run", "--out", str(short), "--quiet", *_sets("run.rounds=2", *common)]) == 0
    capsys.readouterr()
    assert main(["run", "--resume", str(short), "--extend", "2", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "client rounds         4" in printed and "iterations            8 (4 with clients, 4 server-only)" in printed
    assert len(_ledger(short)) == 8 and _ledger(short) == _ledger(long_)
    rows = lambda d: [{k: v for k, v in json.loads(x).items() if k not in ("wall_s", "air_s")}     # noqa: E731
                      for x in (d / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows(short)] == list(range(1, 9))
    assert [r["eps_pld"] for r in rows(short)] == [r["eps_pld"] for r in rows(long_)]
    s = json.loads((short / "summary.json").read_text())
    assert s["client_rounds"] == 4 and s["client_rounds_planned"] == 4 and s["extended_by"] == 2
    assert json.loads((long_ / "summary.json").read_text())["eps_pld"] == s["eps_pld"]
    assert main(["verify", str(short)]) == 0 and "OK" in capsys.readouterr().out
    # a second plain --resume: complete again
    assert main(["run", "--resume", str(short), "--quiet"]) == 0
    assert "already complete (4 client rounds" in capsys.readouterr().out


@pytest.mark.experiment
def test_extend_keeps_the_budget_rules(tmp_path, capsys):
    """A target-calibrated run spent its eps (by design): the dry run plans the extra rounds over the target, and
    `--extend` without `--eps` is refused in one line (exit 2) before anything is written (issue 37 item 6; a
    raised budget: tests/run/test_extend_eps.py)."""
    out = tmp_path / "r"
    assert main(["run", "--out", str(out), "--quiet", *_sets("run.rounds=2", "algorithm.name=fedavg")]) == 0
    before = _ledger(out)
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--extend", "3", "--dry-run"]) == 0       # planned first
    plan = capsys.readouterr().out
    assert "5 client rounds" in plan and "OVER the target: the run would stop" in plan
    assert _ledger(out) == before
    files = _files(out)
    assert main(["run", "--resume", str(out), "--extend", "3", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--eps E" in err and len(err.splitlines()) == 1
    assert _ledger(out) == before and _files(out) == files         # refused before anything was written


def _finished_run(out) -> None:
    """A finished 2-round run (Upcycled-FL, the default algorithm): the session makes it once
    (tests/shared_runs.py); each test takes its own copy."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "--out", str(out), "--quiet", *_sets("run.rounds=2")]) == 0


@pytest.mark.xdist_group("dry-run-extend-finished-2")      # one worker: the shared run made once
@pytest.mark.experiment
def test_resume_of_a_finished_run_changes_nothing(tmp_path, capsys):
    out = shared_runs.copy_of("dry-run-extend-finished-2", _finished_run, tmp_path / "r")
    assert not (out / ".lock").exists()                             # a clean exit leaves no stale lock
    before = _files(out)
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "is already complete (2 client rounds, 4 iterations); nothing was run or changed" in printed
    assert "--extend N" in printed
    assert _files(out) == before                                    # summary.json (wall_s) untouched, no .lock


def test_extend_needs_resume_and_a_count(tmp_path, capsys):
    assert main(["run", "--extend", "2", *SMALL]) == 2
    assert "--extend N continues a run" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path), "--extend", "0"]) == 2
    assert "--extend must be" in capsys.readouterr().err


@pytest.mark.xdist_group("dry-run-extend-finished-2")      # one worker: the shared run made once
@pytest.mark.experiment
def test_a_finished_but_damaged_folder_is_refused_not_called_complete(tmp_path, capsys):
    out = shared_runs.copy_of("dry-run-extend-finished-2", _finished_run, tmp_path / "r")
    led = out / "privacy_ledger.jsonl"
    led.write_text("".join(led.read_text().splitlines(keepends=True)[:-1]))     # a booked release removed
    before = _files(out)
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("otafl-sdr: error: cannot resume:") and "already complete" not in err
    assert _files(out) == before


def test_dry_run_on_uhd_says_the_dac_headroom(tmp_path, capsys):
    """No radio is opened: the headroom is the planned symbol peaks against the fc32 full scale (the jammer's
    at 4.5 sigma, as the uhd air's preflight checks it)."""
    import math

    from otafl_sdr.config.schema import to_toml
    from otafl_sdr.experiment.dry_run import plan_run
    from otafl_sdr.configure.load import load_config
    sets = ["air.name=uhd", "run.rounds=2", "data.dataset=digits", "data.clients=3", "model.name=logreg",
            "run.torch_threads=1", "privacy.targeting=paper"]
    cfg = load_config(None, sets)                       # Theorem 2's jammer x 7 at sigma_c2 = 1: past the DAC
    (tmp_path / "c.toml").write_text(to_toml(cfg))
    assert main(["run", "--dry-run", "--config", str(tmp_path / "c.toml")]) == 0
    text = capsys.readouterr().out
    assert "uhd DAC headroom to the fc32 full scale 1.0" in text
    plan = plan_run(cfg, time_local=False)
    assert plan.dac["jammer"] < 0 and "the uhd air refuses the round" in text
    assert f"{plan.dac['jammer']:+.1f} dB" in text and f"{plan.dac['client']:+.1f} dB" in text
    assert math.isfinite(plan.dac["client"])
    (tmp_path / "s.toml").write_text(to_toml(load_config(None, ["air.name=sim", *sets[1:]])))
    assert main(["run", "--dry-run", "--config", str(tmp_path / "s.toml")]) == 0
    assert "DAC" not in capsys.readouterr().out
