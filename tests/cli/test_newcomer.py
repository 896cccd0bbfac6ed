"""A newcomer's first hour: the default experiment is the built-in default, the CLI's conventions (version,
exit statuses 0 / 2 / 3 / 130), `report` into DIR/report, `account --target-eps` checked against
dp-accounting, the Python API, and JSON null for infinite values."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant

import otafl_sdr
from otafl_sdr.cli.main import main
from otafl_sdr.config.schema import DEFAULT_EXPERIMENT, to_dict
from otafl_sdr.configure.load import default_experiment, load_config
from otafl_sdr.errors import ConfigError

pytestmark = [pytest.mark.net, pytest.mark.slow]

FAST = ["run.rounds=6", "algorithm.lambda_schedule=[[2, 0.15], [3, 0.4], [5, 0.9], [6, 1.9]]", "air.name=sim",
        "run.progress=false"]


def _sets(extra=()):
    out = []
    for s in list(FAST) + list(extra):
        out += ["--set", s]
    return out


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    """`otafl-sdr run` without --config (the default experiment, reduced to 6 rounds on the sim air), run once
    for the module: test_the_default_experiment_... reads it, test_report_... reports a copy of it."""
    out = tmp_path_factory.mktemp("default") / "d"
    assert main(["run", "--out", str(out), "--quiet"] + _sets()) == 0
    return out


@pytest.mark.xdist_group("newcomer-default-run")     # the tests that read default_run: one worker, one run
def test_the_default_experiment_is_the_builtin_default_and_learns(default_run, capsys):
    assert to_dict(load_config(DEFAULT_EXPERIMENT)) == to_dict(load_config("sim_loopback/default.toml"))
    assert main(["config"]) == 0
    assert tomllib.loads(capsys.readouterr().out) == to_dict(default_experiment())   # with each key's meaning
    # `otafl-sdr run` without --config runs it (default_run)
    s = json.loads((default_run / "summary.json").read_text())
    assert s["power_policy"] == "cj_adaptive" and s["algorithm"] == "upcycled_fl" and s["privacy_unit"] == "sample"
    assert s["final_accuracy"] > 0.4 and s["eps_pld"] <= 1.0 and not s["stopped_reason"]


def test_version_and_exit_statuses(tmp_path, capsys, figures_not_drawn):
    """(The in-process budget run draws no figures: nothing here reads them.)"""
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and otafl_sdr.__version__ in capsys.readouterr().out
    assert main(["run", "--set", "privacy.eps=-1", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "privacy.eps" in err
    # budget: the target cannot carry the first round -> 3, with its checkpoint-less folder kept
    assert main(["run", "--out", str(tmp_path / "b"), "--quiet"] + _sets(["privacy.unit=client",
                                                                         "power.jammer=false",
                                                                         "privacy.targeting=paper"])) == 3
    # Ctrl-C -> 130 (a real SIGINT to a real run)
    out = tmp_path / "i"
    p = subprocess.Popen([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--out", str(out), "--quiet",
                          "--set", "run.rounds=200", "--set", "air.name=sim"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()},
                         # a test runner started in the background ignores SIGINT and its children inherit that
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t_end = time.monotonic() + 120
    while time.monotonic() < t_end and not ((out / "rounds.jsonl").exists() and (out / "rounds.jsonl").stat().st_size):
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err.decode()[-2000:]


@pytest.mark.xdist_group("newcomer-default-run")
def test_report_writes_its_own_folder(default_run, tmp_path, capsys):
    run = tmp_path / "r"
    shutil.copytree(default_run, run, symlinks=True)       # the run's own figures, as the run left them
    own = {p.name: p.stat().st_mtime_ns for p in run.glob("*.png")}
    assert {"accuracy.png", "loss.png", "epsilon.png", "nmse.png"} <= set(own)
    assert main(["report", str(run)]) == 0
    assert "epsilon (pld)" in capsys.readouterr().out
    assert {p.name for p in (run / "report").glob("*.png")} == {"accuracy.png", "loss.png", "epsilon.png", "nmse.png"}
    assert {p.name: p.stat().st_mtime_ns for p in run.glob("*.png")} == own
    assert main(["report", str(run), "--out", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "epsilon.png").is_file()


def test_account_target_eps_against_dp_accounting(capsys):
    assert main(["account", "--target-eps", "1", "--rounds", "50", "--delta", "1e-5"]) == 0
    out = capsys.readouterr().out
    z = float(out.split("pld")[1].split("noise multiplier")[1].split()[0])
    acc = PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(z), 50)
    assert 0.99 <= acc.get_epsilon(1e-5) <= 1.0 + 1e-3
    assert main(["account", "--sigma", "2", "--rounds", "10", "--sampling", "0.5"]) == 0
    assert "n/a (paper 000's closed form does not cover client sampling" in capsys.readouterr().out
    assert main(["account", "--sigma", "nan"]) == 2
    assert main(["account"]) == 2


def test_python_api(tmp_path, figures_not_drawn):
    """The API's run: a frame of every iteration in order, the callback once per iteration (two client rounds of
    Upcycled-FL, four iterations: what the count checks is the same at any length; default_run learns). (The
    API's runs draw no figures: nothing here reads them; the CLI run's figures are test_report_...'s.)"""
    seen = []
    res = otafl_sdr.run({"run": {"rounds": 2, "progress": False}, "air.name": "sim",
                         "algorithm": {"lambda_schedule": [[1, 0.15], [2, 0.4]]}},
                        out=tmp_path / "api", on_round=seen.append)
    assert len(res.rounds) == len(seen) == 4 and list(res.rounds["round"]) == list(range(1, 5))
    assert res.summary["final_accuracy"] == pytest.approx(res.rounds["test_accuracy"].iloc[-1])
    with pytest.raises(ConfigError, match="privacy.eps"):
        otafl_sdr.run({"privacy": {"eps": -1}}, out=tmp_path / "bad")
    cfg = default_experiment()
    cfg.privacy.eps = -1.0
    with pytest.raises(ConfigError, match="privacy.eps"):
        otafl_sdr.run(cfg, out=tmp_path / "bad2")
    cfg = default_experiment(["run.rounds=2", "air.name=sim", "run.progress=false",
                              "algorithm.lambda_schedule=[[2, 1.0]]"])
    res2 = otafl_sdr.run(cfg)                        # no out: a fresh temporary folder
    assert res2.out.is_dir() and (res2.out / "summary.json").is_file()


def test_infinite_values_are_json_null(tmp_path):
    from otafl_sdr.results.files import write_summary
    write_summary(tmp_path, {"eps_pld": float("inf"), "x": [1.0, float("-inf")]})
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s == {"eps_pld": None, "x": [1.0, None]}


def test_a_testbed_node_error_reaches_the_console_and_the_failed_start_leaves_no_folder(tmp_path):
    out = tmp_path / "tb"
    r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--air", "zmq", "--out", str(out), "--quiet",
                        "--set", "data.dataset=digits", "--set", "data.clients=3", "--set", "model.hidden=8",
                        "--set", "power.policy=cdpb_noisy", "--set", "power.options={gamma_bar = 1e-9}",
                        "--set", "privacy.targeting=paper"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()})
    err = [line for line in r.stderr.strip().splitlines() if line.startswith("otafl-sdr:")]
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(err) == 1 and "power.options" in err[0] and "server node" in err[0], r.stderr[-2000:]
    assert not out.exists()


def test_unwritable_results_folders_are_one_line_errors(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    for out in (f / "sub", Path("/proc/otafl-sdr-cannot-write-here")):
        assert main(["run", "--out", str(out), "--quiet"] + _sets()) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
