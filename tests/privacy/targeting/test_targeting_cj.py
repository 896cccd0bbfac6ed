"""privacy.targeting = "target": paper 000's mechanism (cj_adaptive) is calibrated before round 1 so that
the run spends privacy.eps within 1 % and never above it. Checked on real runs (sim air, digits) by an
INDEPENDENT composition of the run's privacy_ledger.jsonl with dp-accounting's PLDAccountant (not the
project's accountants); unreachable targets are refused at start (exit 2, one line); "paper" keeps the
paper's rules."""
import json

import pytest
from dp_reference import independent_pld_epsilon

from otafl_sdr.cli.main import main

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

BASE = ["data.dataset=digits", "data.clients=4", "model.hidden=8", "run.rounds=3", "air.name=sim",
        "run.progress=false", "train.local_epochs=1", "privacy.eps=1", "privacy.delta=1e-5",
        "privacy.accountant=pld", "power.jammer_max_snr_db=120"]


def _run(tmp_path, name, extra, capsys=None):
    args = ["run", "--out", str(tmp_path / name), "--quiet"]
    for s in BASE + list(extra):
        args += ["--set", s]
    return main(args)


def _ledger(path):
    return [json.loads(line) for line in (path / "privacy_ledger.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.experiment
@pytest.mark.parametrize("jammer,algorithm,unit,knob", [
    (True, "upcycled_fl", "client", "jammer factor"),   # client-level DP: the jammer carries the target
    (False, "fedavg", "sample", "alpha_u"),             # no jammer: alpha_u carries it
    (True, "fedavg", "sample", "alpha_u"),              # channel noise alone is more: jammer silent, alpha_u
    (True, "fedprox", "client", "jammer factor"),       # FedProx: the same mechanism, its own payload bound
])
def test_a_calibrated_run_spends_its_target(tmp_path, jammer, algorithm, unit, knob):
    assert _run(tmp_path, "t", [f"power.jammer={str(jammer).lower()}", f"algorithm.name={algorithm}",
                                f"privacy.unit={unit}", "algorithm.lambda_schedule=[[3, 0.4]]"]) == 0
    recs = _ledger(tmp_path / "t")
    data = [r for r in recs if r["uses_data"]]
    assert len(data) == 3 and len(recs) == (6 if algorithm == "upcycled_fl" else 3)   # free iterations: cost 0
    eps = independent_pld_epsilon(recs, 1e-5)
    assert 0.97 <= eps <= 1.0, eps
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert s["calibration"] == "target (pld)" and s["calibrated_knob"] == knob and s["calibrated_rounds"] == 3
    assert 0.99 <= s["eps_planned"] <= 1.0 and s["eps_pld"] <= s["eps_planned"] * (1 + 1e-9)
    rows = [json.loads(x) for x in (tmp_path / "t" / "rounds.jsonl").read_text().splitlines()]
    if knob == "jammer factor":   # the jammer, knowing its channel, gives every round the same mechanism
        z = [r["sigma_eff"] / r["sensitivity"] for r in data]
        assert max(z) == pytest.approx(min(z), rel=1e-9)
        assert all(r["cj_active"] and not r["cj_capped"] for r in rows if r["uses_clients"])
    else:
        assert not any(r["cj_active"] for r in rows)


@pytest.mark.experiment
def test_an_unreachable_target_is_refused_before_round_1(tmp_path, capsys):
    assert _run(tmp_path, "u", ["power.jammer=true", "power.jammer_max_snr_db=20", "privacy.eps=0.1",
                                "privacy.unit=client"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "privacy.eps = 0.1 needs a jammer peak power of" in err and "power.jammer_max_snr_db = 20" in err
    assert not (tmp_path / "u" / "rounds.jsonl").exists()
    assert not (tmp_path / "u" / "privacy_ledger.jsonl").exists() or not _ledger(tmp_path / "u")
    # a looser cap on the same run is accepted: the refusal is the cap's, not the config's
    assert _run(tmp_path, "ok", ["power.jammer=true", "privacy.eps=0.1", "privacy.unit=client", "run.rounds=1"]) == 0
    # a target above what the clients' power limit can spend without a jammer
    assert _run(tmp_path, "c", ["power.jammer=false", "privacy.eps=1000", "power.max_snr_db=-20"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "clients' power" in err and "power.max_snr_db = -20" in err, err


def test_an_enforcing_accountant_looser_than_the_calibration_is_refused_at_start(tmp_path, capsys):
    # paper 000's closed form bounds the calibrated mechanism above the target: the run would stop mid-way
    assert _run(tmp_path, "p", ["privacy.accountant=paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "privacy.accountant = 'paper'" in err


@pytest.mark.experiment
def test_paper_rule_keeps_todays_mechanism(tmp_path):
    """targeting = "paper": the default experiment's ledger as before this option existed (values of the
    previous release, 6 client rounds on sim), and Theorem 2 at jammer_multiple = 1 spends exactly the
    target by the paper's own closed form."""
    out = tmp_path / "d"
    args = ["run", "--out", str(out), "--quiet"]
    for s in ["run.rounds=6", "algorithm.lambda_schedule=[[2, 0.15], [3, 0.4], [5, 0.9], [6, 1.9]]",
              "air.name=sim", "run.progress=false", "privacy.targeting=paper"]:
        args += ["--set", s]
    assert main(args) == 0
    data = [r for r in _ledger(out) if r["uses_data"]]
    assert [r["round"] for r in data[:2]] == [1, 3]
    for r in data[:2]:
        assert r["sensitivity"] == pytest.approx(0.0005, rel=1e-12)
        assert r["sigma_eff"] == pytest.approx(0.006001929809749197, rel=1e-9)
    s = json.loads((out / "summary.json").read_text())
    assert s["calibration"] == "paper rule" and s["eps_paper"] == pytest.approx(1.0, rel=1e-9)
    assert "eps_planned" not in s


def test_config_rejects_bad_calibrate_values(tmp_path, capsys):
    assert _run(tmp_path, "b", ["privacy.targeting=exact"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "privacy.targeting" in err and "target, paper" in err
    assert _run(tmp_path, "a", ["power.jammer=false", "power.alpha_u=3"]) == 2
    assert "power.alpha_u" in capsys.readouterr().err
    # with a jammer, a hand-set alpha_u is the rule's; but when the channel noise alone is more than the
    # target needs (this run: see test_a_calibrated_run_spends_its_target) alpha_u becomes the knob: refused
    assert _run(tmp_path, "j", ["power.jammer=true", "privacy.unit=sample", "power.alpha_u=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "power.alpha_u = 3 is set by hand" in err, err
    assert not (tmp_path / "j").exists()
