"""Planned, booked and re-derived are one computation (issue 33, item 1: workload/round_plan.plan_round).

A round is planned in one place: the run's pipeline, `run --dry-run`, privacy targeting and `verify`'s
re-derivation all call ``plan_round``. So the dry run's planned mechanism of every round is the one the
run's ledger books, its epsilon the run's, targeting's ``eps_planned`` the same (a bisected knob), and
`verify` re-derives every entry: on a flat channel and on single-carrier multipath (TDL-C, 4 samples RMS on
the sim air), where targeting used to book one stretch for all rounds and the run each round's own (h_min,
3 rounds: targeting planned 1.989 while the run booked 1.875; cj_adaptive at 2 samples, 1 round: the run
would spend 2.037 for eps 2 and was refused before round 1)."""
import math
import re
from pathlib import Path

import pytest

import otafl_sdr
from ledger_helpers import ledger
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import default_experiment
from otafl_sdr.experiment.dry_run import plan_run
from otafl_sdr.experiment.orchestrator import Experiment

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

BASE = ["run.progress=false", "run.torch_threads=1", "data.dataset=digits", "model.hidden=8", "air.name=sim",
        "privacy.targeting=target", "privacy.report=['pld', 'rdp']"]
MULTIPATH = ["channel.multipath=tdl-c", "privacy.eps=2", "power.jammer=false", "data.clients=8"]
CASES = {       # (overrides, RMS delay spread in samples)
    # paper 000's default family (Upcycled-FL's server-only iterations booked too), closed-form knob
    "flat_cj_adaptive": (["data.clients=3", "run.rounds=2"], 0),
    # a bisected knob (h_min's power scale) on multipath: each round its own reference senders' stretch
    "multipath_h_min": (MULTIPATH + ["power.policy=h_min", "algorithm.name=fedavg", "run.rounds=3"], 4),
    # a closed-form knob on multipath: one stretch for all rounds, raised until it bounds each round's
    "multipath_cj_adaptive": (MULTIPATH + ["algorithm.name=fedavg", "run.rounds=1", "run.seed=3"], 2),
}


def _config(case: str):
    sets, spread = CASES[case]
    if spread:                                          # samples at uhd.rate -> ns (validated with the config)
        sets = sets + [f"channel.delay_spread_ns={spread * 1e9 / default_experiment(BASE).uhd.rate!r}"]
    return default_experiment(BASE + sets)


def test_one_place_plans_a_round():
    """Outside the policies themselves (power/), only workload/round_plan.py calls a policy's plan."""
    root = Path(otafl_sdr.__file__).parent
    callers = sorted(str(f.relative_to(root)) for f in root.rglob("*.py")
                     if f.parent.name != "power" and re.search(r"\.plan\(", f.read_text()))
    assert callers == ["workload/round_plan.py"]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_planned_booked_and_rederived_agree(case, tmp_path, capsys):
    planned = plan_run(_config(case), time_local=False)
    cfg = _config(case)
    summary = Experiment(cfg, tmp_path / "run").run().summary
    booked = ledger(tmp_path / "run")
    data = [r for r in booked if r["uses_data"]]
    assert len(data) == len(planned.mechanisms) == planned.data_iterations
    assert len(booked) == planned.iterations
    for rec, m in zip(data, planned.mechanisms):
        assert rec["round"] == m.round
        assert math.isclose(rec["sensitivity"], m.sensitivity, rel_tol=1e-12), (rec["round"], rec, m)
        assert math.isclose(rec["sigma_eff"], m.sigma_eff, rel_tol=1e-12), (rec["round"], rec, m)
        assert rec["extra"].get("multipath_gain") == m.extra.get("multipath_gain")
    if cfg.channel.multipath != "flat":
        assert all(m.extra["multipath_gain"] > 1.5 for m in planned.mechanisms)   # the stretch is booked
    for name, eps in planned.eps.items():
        assert math.isclose(summary[f"eps_{name}"], eps, rel_tol=1e-9), (name, summary[f"eps_{name}"], eps)
    acc = cfg.privacy.accountant
    assert planned.eps[acc] <= cfg.privacy.eps * (1 + 1e-9)              # targeting never overshoots
    if "calibrated_knob" in summary and summary["calibrated_knob"].startswith("power.options"):
        assert math.isclose(summary["eps_planned"], planned.eps[acc], rel_tol=1e-9)   # a bisected knob: exact
    assert main(["verify", str(tmp_path / "run")]) == 0
    line = capsys.readouterr().out.strip()
    assert f"{len(booked)} entries' booked figures re-derived" in line, line
