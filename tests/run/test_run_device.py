"""run.device (issue 17): local training on cpu, cuda or auto. This machine and CI have no GPU: "auto"
resolves to cpu and reproduces the cpu run exactly; "cuda" is refused at start in one line, leaving no
folder. The GPU figures (and cpu/cuda agreement) are benchmarks/bench_paper_round.py's, where a GPU is present."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from otafl_sdr.configure.load import default_experiment
from otafl_sdr.experiment.orchestrator import make_experiment

pytestmark = [pytest.mark.net]

ROOT = Path(__file__).resolve().parents[2]
TINY = ["run.rounds=2", "run.progress=false", "air.name=sim", "algorithm.name=fedavg", "data.dataset=digits",
        "data.clients=3", "data.classes_per_client=10", "model.hidden=16", "power.jammer=false"]


def _run(tmp_path, name, extra):
    out = tmp_path / name
    make_experiment(default_experiment(TINY + extra), out).run()
    return (json.loads((out / "summary.json").read_text()), (out / "privacy_ledger.jsonl").read_text(),
            torch.load(out / "checkpoint.pt", weights_only=True)["w"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto would pick the GPU here")
def test_auto_without_a_gpu_is_the_cpu_run_exactly(tmp_path):
    s_cpu, led_cpu, w_cpu = _run(tmp_path, "cpu", ["run.device=cpu"])
    s_auto, led_auto, w_auto = _run(tmp_path, "auto", ["run.device=auto"])
    assert s_cpu["device"] == s_auto["device"] == "cpu"
    assert s_auto["final_accuracy"] == s_cpu["final_accuracy"]
    assert torch.equal(w_cpu, w_auto)
    strip = lambda t: [{k: v for k, v in json.loads(ln).items() if k not in ("time", "hash", "prev")}
                       for ln in t.splitlines()]
    assert strip(led_auto) == strip(led_cpu)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_refused_in_one_line_and_leaves_no_folder(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--quiet", "--out", str(out), "--set",
                        "run.device=cuda", "--set", "run.rounds=1"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "run.device" in r.stderr and "no GPU" in r.stderr, r.stderr
    assert not out.exists()


def test_a_bad_device_name_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "config", "--set", "run.device=tpu"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "run.device" in r.stderr and "cpu, cuda, auto" in r.stderr
