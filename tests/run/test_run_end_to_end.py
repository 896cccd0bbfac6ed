"""End-to-end: the CLI run writes the results contract; Upcycled-FL's even step uses no client data;
bad input exits 2 with one line and writes nothing; the budget stop keeps a checkpoint."""
import json
import subprocess
import sys

import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.results.files import ROUND_FIELDS, SUMMARY_FIELDS

pytestmark = [pytest.mark.gnuradio, pytest.mark.net, pytest.mark.slow]

TINY = ["run.rounds=3", "data.dataset=digits", "data.clients=5", "model.hidden=16", "train.local_epochs=1",
        "run.torch_threads=1"]


def _sets(extra=()):
    out = []
    for s in list(TINY) + list(extra):
        out += ["--set", s]
    return out


def test_cli_run_writes_the_contract(tmp_path, capsys):
    out = tmp_path / "r"
    rc = main(["run", "--config", "sim_loopback/default.toml", "--out", str(out), "--quiet"] + _sets())
    assert rc == 0
    text = capsys.readouterr().out
    assert "final test accuracy" in text and "epsilon (rdp)" in text
    for f in ("config.toml", "rounds.jsonl", "summary.json", "privacy_ledger.jsonl", "checkpoint.pt",
              "accuracy.png", "loss.png", "epsilon.png"):
        assert (out / f).is_file(), f
    rows = [json.loads(l) for l in (out / "rounds.jsonl").read_text().splitlines()]
    assert len(rows) == 6  # default algorithm is upcycled_fl: 2 iterations per client round
    for row in rows:
        for k in ROUND_FIELDS:
            assert k in row, k
    summary = json.loads((out / "summary.json").read_text())
    for k in SUMMARY_FIELDS:
        assert k in summary, k
    assert summary["air"] == "loopback" and summary["rounds"] == 6 and summary["clients"] == 5
    # epsilon grows only on client rounds, and the summary equals the ledger's last word
    eps = [r["eps_rdp"] for r in rows]
    assert all(b >= a for a, b in zip(eps, eps[1:]))
    assert summary["eps_rdp"] == pytest.approx(eps[-1])
    # the resolved config reproduces the run's settings
    from otafl_sdr.configure.load import load_config
    cfg = load_config(out / "config.toml")
    assert cfg.run.rounds == 3 and cfg.data.clients == 5


def test_upcycled_even_step_touches_no_client_data(tmp_path, small_cfg):
    small_cfg.algorithm.name = "upcycled_fl"
    small_cfg.run.rounds = 3
    exp = Experiment(small_cfg, tmp_path / "u", progress=False)
    exp._build_orig = exp.build
    calls = []

    def build():
        exp._build_orig()
        orig = exp.trainer.train_round

        def spy(w, it, *a, **k):
            calls.append(it)
            return orig(w, it, *a, **k)
        exp.trainer.train_round = spy
    exp.build = build
    outcome = exp.run()
    assert calls == [1, 3, 5]                         # clients train only on odd iterations
    rows = [json.loads(l) for l in (tmp_path / "u" / "rounds.jsonl").read_text().splitlines()]
    even = [r for r in rows if r["round"] % 2 == 0]
    assert even and all(r["sensitivity"] == 0 and not r["uses_clients"] for r in even)
    for r_even in even:                                # and no privacy was spent on them
        prev = next(r for r in rows if r["round"] == r_even["round"] - 1)
        assert r_even["eps_rdp"] == prev["eps_rdp"]
    assert outcome.summary["client_rounds"] == 3


@pytest.mark.parametrize("args,needle,as_process", [
    (["--set", "privacy.eps=0"], "privacy.eps", True),
    (["--set", "privacy.delta=1.5"], "privacy.delta", False),
    (["--set", "data.clients=0"], "data.clients", False),
    (["--set", "train.tau=-1"], "train.tau", False),
    (["--set", "power.max_snr_db=nan"], "power.max_snr_db", False),
    (["--set", "algorithm.name=nope"], "algorithm.name", False),
    (["--set", "data.dataset=femnist", "--set", "data.path=/no/such/dir"], "data.path", False),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, args, needle, as_process):
    """Exit 2, one line naming the key, no folder, an existing one untouched. The first case as a process (the
    status a shell sees); the others through the CLI's main in this process (the same parser and validation,
    without an interpreter start each)."""
    out = tmp_path / "existing"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    argv = ["run", "--config", "sim_loopback/default.toml", "--out", str(tmp_path / "new")] + args
    if as_process:
        proc = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", *argv], capture_output=True, text=True)
        status, err = proc.returncode, proc.stderr
    else:
        capsys.readouterr()
        status = main(argv)
        err = capsys.readouterr().err
    assert status == 2
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err
    assert not (tmp_path / "new").exists()
    assert (out / "keep.txt").read_text() == "precious"


def test_existing_results_folder_is_never_overwritten(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "rounds.jsonl").write_text("{}\n")
    proc = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--config", "sim_loopback/default.toml",
                           "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert (out / "rounds.jsonl").read_text() == "{}\n"


def test_malformed_toml_exits_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\n")
    proc = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--config", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr and "Traceback" not in proc.stderr


def test_budget_stop_keeps_checkpoint_and_ledger(tmp_path, small_cfg):
    """Without the jammer and with a tiny budget the enforcing accountant refuses a round: the run stops
    cleanly, the ledger holds only what was transmitted, and the checkpoint is there."""
    small_cfg.algorithm.name = "fedavg"
    small_cfg.run.rounds = 6
    small_cfg.power.jammer = False
    small_cfg.power.alpha_u = 300.0
    small_cfg.privacy.eps = 2.0
    small_cfg.privacy.unit = "sample_paper"     # the budget-stop mechanics at a small sensitivity
    small_cfg.privacy.targeting = "paper"          # a design rule that overspends: the enforcing stop
    exp = Experiment(small_cfg, tmp_path / "b", progress=False)
    outcome = exp.run()
    assert outcome.stopped_reason
    rows = [json.loads(l) for l in (tmp_path / "b" / "rounds.jsonl").read_text().splitlines()]
    ledger = [json.loads(l) for l in (tmp_path / "b" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert 1 <= len(rows) == len(ledger) < 6
    assert all(r["eps_rdp"] <= 2.0 for r in rows)
    assert "budget" in outcome.summary["stopped_reason"]
    assert (tmp_path / "b" / "checkpoint.pt").is_file()
    import torch
    assert torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["iteration"] == len(rows)
