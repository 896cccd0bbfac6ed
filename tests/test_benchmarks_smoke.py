"""Every benchmark runs at its smoke size (``--quick``) in `make test`, so none can rot unseen: it must exit
0 and print its figures (the figures of a smoke run mean nothing; `make bench` gives the real ones).

The scripts run one after another in one helper process (tests/bench_runner.py: each as ``__main__`` with
``--quick``, its exit status, stdout and stderr recorded), started once for the module: one interpreter start
(torch, GNU Radio: about 3 s of CPU) instead of one per script. The tests share an xdist group so that helper runs
once."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))
# what each benchmark's report must contain: its headline figure
EXPECT = {
    "bench_accountants.py": "ratio to reference",
    "bench_audit_false_alarm.py": "false alarms on an honest, tight mechanism",
    "bench_calibration_offsets.py": "calibration offset z-scores on a shared reference",
    "bench_channels.py": "ms/transmit",
    "bench_coherence_lab.py": "per-client coherence on the simulated lab",
    "bench_coherence_tolerance.py": "NMSE/theory vs per-client residual",
    "bench_control_plane.py": "control plane per round",
    "bench_csi_vs_perfect.py": "wrote",
    "bench_doppler.py": "NMSE/theory vs Doppler",
    "bench_local_training.py": "train loss",
    "bench_nmse_vs_snr.py": "wrote",
    "bench_ofdm_impairments.py": "NMSE/theory vs front-end impairment",
    "bench_paper_round.py": "the round outside training, the air and accounting",
    "bench_phy_round.py": "measured/theory NMSE",
    "bench_sync_residual.py": "wrote",
}

pytestmark = [pytest.mark.slow, pytest.mark.gnuradio]


def test_every_benchmark_has_an_expectation():
    assert set(BENCHES) == set(EXPECT)


# bench_control_plane starts node worker processes on a zmq hub (bench_coherence_lab and
# bench_calibration_offsets start no lab at --quick)
MARKS = {"bench_control_plane.py": [pytest.mark.net]}


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """script name -> {"rc", "stdout", "stderr"} of every benchmark at --quick (one helper process, a hang
    fails it: 20 minutes for all of them)."""
    where = tmp_path_factory.mktemp("bench")
    results = where / "results.jsonl"
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "bench_runner.py"), str(results), str(where),
                        *[str(ROOT / "benchmarks" / b) for b in BENCHES]], cwd=ROOT, capture_output=True, text=True,
                       timeout=1200)
    rows = {row["script"]: row for row in map(json.loads, results.read_text().splitlines())} \
        if results.exists() else {}
    return {"runner": (r.returncode, r.stdout[-2000:], r.stderr[-3000:]), **rows}


@pytest.mark.xdist_group("benchmarks")
@pytest.mark.parametrize("bench", [pytest.param(b, marks=MARKS.get(b, ())) for b in BENCHES])
def test_the_benchmark_runs_at_smoke_size(bench, ran):
    assert bench in ran, f"the helper process ended before {bench}: {ran['runner']}"
    r = ran[bench]
    assert r["rc"] == 0, r["stdout"][-2000:] + r["stderr"][-3000:]
    assert EXPECT[bench] in r["stdout"], r["stdout"][-2000:]
    assert "Traceback" not in r["stderr"]
