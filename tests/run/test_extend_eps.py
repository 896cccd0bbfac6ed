"""Studies that grow (issue 37, item 6): `otafl-sdr run --resume DIR --extend N --eps E` raises a finished
targeted run's budget to E: N more client rounds, booked as further composition on the same ledger (the knob
solved again for the rounds left, so the whole run spends at most E), the raise a keyed ledger line that
`verify` re-derives. The epsilon is recomputed from the ledger's records by dp-accounting directly
(tests/dp_reference.py). A refused extension (no --eps on a targeted run, E not above the target, a bad N or
E, a target the knob cannot reach, a folder that does not verify) changes no byte of the folder nor of its
anchor; a raise forged without the key is refused by `verify`."""
import hashlib
import json
import math

import pytest

import shared_runs
from dp_reference import independent_pld_epsilon
from ledger_helpers import SETS, digest
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import default_experiment, load_config
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.privacy import ledger_keys

ROUNDS = 3        # client rounds of the finished run (Upcycled-FL: 6 iterations, 6 ledger lines)


def _finish(out):
    outcome = Experiment(default_experiment(SETS[:-2] + [f"run.rounds={ROUNDS}"]), out).run()
    assert not outcome.stopped_reason


def _finished(tmp_path):
    """A private copy (own run id, key and anchor) of the session's finished default-family run (eps 1)."""
    return shared_runs.copy_of("extend-eps-finished", _finish, tmp_path / "run")


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _anchor_bytes(out):
    cfg = load_config(out / "config.toml")
    return hashlib.sha256(ledger_keys.anchor(ledger_keys.read_run_id(out), cfg).path.read_bytes()).hexdigest()


def _refused(out, argv, capsys, words):
    """``argv`` exits 2 with one line naming ``words``, and no byte of the folder or its anchor changed."""
    before, anchor = digest(out), _anchor_bytes(out)
    names = sorted(p.name for p in out.iterdir())
    assert main(argv) == 2, argv
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert len(err.splitlines()) == 1 and words in err, (argv, err)
    assert "Traceback" not in cap.out + cap.err
    assert digest(out) == before and _anchor_bytes(out) == anchor, argv
    assert sorted(p.name for p in out.iterdir()) == names, argv      # no lock file, nothing added


def _extend(out, n, eps, capsys):
    assert main(["run", "--resume", str(out), "--extend", str(n), "--eps", str(eps), "--quiet"]) == 0
    capsys.readouterr()


@pytest.mark.experiment
def test_extend_with_eps_runs_n_more_client_rounds_within_the_new_target(tmp_path, capsys):
    out = _finished(tmp_path)
    rows0, led0 = _lines(out / "rounds.jsonl"), _lines(out / "privacy_ledger.jsonl")
    assert sum(r["uses_clients"] for r in rows0) == ROUNDS
    _extend(out, 2, 1.5, capsys)

    rows, led = _lines(out / "rounds.jsonl"), _lines(out / "privacy_ledger.jsonl")
    assert sum(r["uses_clients"] for r in rows) == ROUNDS + 2                   # N more client rounds
    assert [r["round"] for r in rows] == list(range(1, 2 * (ROUNDS + 2) + 1))
    assert led[:len(led0)] == led0                                              # the same ledger, continued
    raises = [r for r in led if r.get("kind") == "budget_raise"]
    assert len(raises) == 1 and led.index(raises[0]) == len(led0)               # raised before the new rounds
    r = raises[0]
    assert (r["eps_budget"], r["eps_budget_before"], r["from_round"], r["client_rounds"]) == (1.5, 1.0, 7, 2)
    assert r["prev"] == led0[-1]["hash"] and led[len(led0) + 1]["prev"] == r["hash"]   # chained like the others
    assert all(x["eps_budget"] == 1.5 for x in led[len(led0) + 1:])

    # the epsilon, recomputed from the ledger's records by dp-accounting directly: further composition
    delta = load_config(out / "config.toml").privacy.delta
    booked = [x for x in led if x.get("kind") != "budget_raise"]
    independent = independent_pld_epsilon(booked, delta)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eps_pld"] <= 1.5 and independent <= 1.5 + 1e-3
    assert math.isclose(summary["eps_pld"], independent, rel_tol=1e-3)
    assert summary["eps_pld"] > 0.99 * 1.5 * 0.99                               # the knob was solved for E
    assert independent_pld_epsilon(booked[:len(led0)], delta) <= 1.0 + 1e-3     # the first 3 rounds: as before
    assert summary["eps_target"] == 1.5 and summary["target_eps_config"] == 1.0
    assert summary["client_rounds"] == ROUNDS + 2 and summary["extended_by"] == 2
    assert (json.loads((out / "extension.json").read_text()))["client_rounds"] == 2

    assert main(["verify", str(out)]) == 0
    said = capsys.readouterr().out
    assert "OK" in said and "budget raised to eps 1.5 from iteration 7" in said, said

    # the raised run's own target is the one to pass now; a second raise composes on the first
    _refused(out, ["run", "--resume", str(out), "--extend", "1", "--eps", "1.5", "--quiet"], capsys, "above")
    _refused(out, ["run", "--resume", str(out), "--extend", "1", "--quiet"], capsys, "--eps")


@pytest.mark.experiment
def test_an_interrupted_extension_resumes_with_the_raised_knob(tmp_path, capsys):
    """Stopped (as by Ctrl-C) in the extension's first round: the resume solves the knob again from the
    ledger's raise line, finishes within E, and verifies."""
    out = _finished(tmp_path)
    exp = Experiment.resume(out, progress=False, extend=2, eps=1.4)

    def stop(row):
        if row["round"] == 2 * ROUNDS + 1:
            raise KeyboardInterrupt
    exp.on_round = stop
    assert exp.run().stopped_reason.startswith("interrupted")
    done = Experiment.resume(out, progress=False).run()
    assert not done.stopped_reason and done.summary["client_rounds"] == ROUNDS + 2
    led = [x for x in _lines(out / "privacy_ledger.jsonl") if x.get("kind") != "budget_raise"]
    eps = independent_pld_epsilon(led, done.summary["delta"])
    assert done.summary["eps_pld"] <= 1.4 and math.isclose(done.summary["eps_pld"], eps, rel_tol=1e-3)
    assert done.summary["eps_pld"] > 0.98 * 1.4
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("args, words", [
    (["--extend", "2"], "--eps E"),                              # a targeted run spent its target by design
    (["--extend", "2", "--eps", "1.0"], "above the run's current target eps 1"),
    (["--extend", "2", "--eps", "0.5"], "above the run's current target eps 1"),
    (["--extend", "2", "--eps", "1e6"], "cannot raise the budget"),   # more than the clients' power can spend
    (["--extend", "0", "--eps", "2"], "--extend must be"),
    (["--extend", "-3", "--eps", "2"], "--extend must be"),
    (["--extend", "2", "--eps", "nan"], "--eps must be"),
    (["--extend", "2", "--eps", "inf"], "--eps must be"),
    (["--extend", "2", "--eps", "-1"], "--eps must be"),
    (["--eps", "2"], "--resume DIR --extend N"),
    (["--extend", "2", "--eps", "2", "--dry-run"], "--dry-run"),
])
def test_a_refused_extension_changes_no_byte(tmp_path, capsys, args, words):
    out = _finished(tmp_path)
    _refused(out, ["run", "--resume", str(out), *args, "--quiet"], capsys, words)


def test_a_folder_that_does_not_verify_is_not_extended(tmp_path, capsys):
    out = _finished(tmp_path)
    led = out / "privacy_ledger.jsonl"
    lines = led.read_text().splitlines()
    rec = json.loads(lines[2])
    rec["sigma_eff"] *= 2                                        # an edited booking
    led.write_text("\n".join(lines[:2] + [json.dumps(rec)] + lines[3:]) + "\n")
    _refused(out, ["run", "--resume", str(out), "--extend", "2", "--eps", "2", "--quiet"], capsys, "cannot resume")


def _forge(out, edit):
    led = out / "privacy_ledger.jsonl"
    recs = _lines(led)
    edit(recs)
    led.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _appended_raise(recs):
    """A raise line appended by a forger without the key: linked to the head, hashed with SHA-256."""
    line = {**{k: v for k, v in recs[-1].items() if k not in ("hash", "release", "extra")},
            "kind": "budget_raise", "sensitivity": 0.0, "sigma_eff": 0.0, "eps_budget": 50.0,
            "eps_budget_before": 1.0, "from_round": 7, "client_rounds": 20, "client_rounds_total": 23,
            "prev": recs[-1]["hash"]}
    line["hash"] = hashlib.sha256(json.dumps(line, sort_keys=True).encode()).hexdigest()
    recs.append(line)


@pytest.mark.experiment
@pytest.mark.parametrize("forgery", ["edited target", "appended raise", "edited target, no key here"])
def test_a_forged_raise_is_refused_by_verify(tmp_path, capsys, forgery):
    out = _finished(tmp_path)
    if forgery.startswith("edited target"):        # the recorded target of an honest raise, raised further
        _extend(out, 2, 1.3, capsys)
        _forge(out, lambda recs: next(r for r in recs if r.get("kind") == "budget_raise").update(eps_budget=1.4))
    else:
        _forge(out, _appended_raise)
    words = "edited"
    if forgery.endswith("no key here"):            # links only: the raise is re-derived (its knob solved again)
        cfg = load_config(out / "config.toml")
        key = ledger_keys.key_dir(cfg) / f"{ledger_keys.read_run_id(out)}.key"
        key.rename(tmp_path / "key")
        words = "the budget raised to eps 1.4"
    before = digest(out)
    assert main(["verify", str(out)]) == 1
    said = capsys.readouterr().out.strip()
    assert "FAILED" in said and words in said and len(said.splitlines()) == 1, said
    if not forgery.endswith("no key here"):
        _refused(out, ["run", "--resume", str(out), "--extend", "3", "--quiet"], capsys, "cannot resume")
    assert digest(out) == before


CDPB = ["data.dataset=digits", "data.clients=6", "data.classes_per_client=10", "model.name=logreg", "air.name=sim",
        "train.local_epochs=1", "train.tau=0.2", "privacy.unit=client", "power.jammer=false", "power.max_snr_db=20",
        "channel.sigma_c2=1.0", "algorithm.name=fedavg", "power.policy=cdpb_noisy"]
NOISY = ["data.dataset=digits", "data.clients=4", "data.partition=iid", "model.hidden=8", "train.batch_size=16",
         "train.lr=0.1", "train.tau=5.0", "air.name=sim", "channel.fading=awgn", "power.jammer=false",
         "channel.sigma_c2=1e-9", "power.max_snr_db=80", "algorithm.name=noisy_fedavg",
         'algorithm.options={clip = 0.5, local_steps = 4, schedule = "stagewise"}']


@pytest.mark.experiment
@pytest.mark.parametrize("family, sets, eps, knob", [
    ("paper 001 cdpb_noisy: rho bisected (solve_knob)", CDPB, 2.0, "power.options.rho"),
    ("paper 002 noisy_fedavg: the clients' sigma (solve_sigma)", NOISY, 2.0, "client noise sigma"),
])
def test_each_knob_family_continues_under_a_raised_budget(tmp_path, capsys, family, sets, eps, knob):
    """The default experiment's closed form is above; a bisected policy knob and paper 002's client sigma
    compose the booked rounds before the planned ones (privacy/targeting.py, ``prior``)."""
    out = tmp_path / "run"
    base = [*SETS[:-2], "run.rounds=2", "privacy.eps=1", *sets]
    assert main(["run", "--out", str(out), "--quiet", *[a for s in base for a in ("--set", s)]]) == 0
    n0 = len(_lines(out / "privacy_ledger.jsonl"))
    _extend(out, 2, eps, capsys)
    s = json.loads((out / "summary.json").read_text())
    led = _lines(out / "privacy_ledger.jsonl")
    booked = [x for x in led if x.get("kind") != "budget_raise"]
    independent = independent_pld_epsilon(booked, s["delta"])
    assert s["client_rounds"] == 4 and s["eps_target"] == eps and s["eps_pld"] <= eps
    assert math.isclose(s["eps_pld"], independent, rel_tol=1e-3), (s["eps_pld"], independent)
    assert led[n0]["kind"] == "budget_raise" and led[n0]["eps_budget"] == eps
    assert s["calibrated_knob"] == knob and s["eps_pld"] >= 0.98 * eps, s      # solved so the whole run spends E
    assert led[n0]["calibration"]["calibrated_knob"] == knob
    assert main(["verify", str(out)]) == 0
    assert f"budget raised to eps {eps:g}" in capsys.readouterr().out
