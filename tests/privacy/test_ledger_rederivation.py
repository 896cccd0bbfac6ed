"""Every mechanism family's booked figures re-derived from the config and the entry's recorded plan inputs
(issue 28, item 3; workload/rederive.py): an insider who holds the run's ledger key lowers what a family's
accountant reads (the sensitivity, a claimed sampling probability, paper 002's Lemma 20 weight, paper 004's
per-device budgets, or the recorded input a figure derives from), recomputes every epsilon, re-chains
the ledger with the key and patches the checkpoint; `verify` and `run --resume` refuse it in one line
naming the entry, and the refused resume changes nothing on disk. The honest ledger verifies, resumes,
and verifies again. Short real runs on the sim air (1 round, then the resume's second); the runs' figures are
not drawn (conftest.figures_not_drawn: nothing here reads them)."""
import hashlib
import json

import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

import shared_runs
from ledger_helpers import digest, ledger, rewrite, run_key
from otafl_sdr.cli.main import main
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.configure.load import default_experiment

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]

BASE = ["run.progress=false", "run.torch_threads=1", "data.dataset=digits", "data.clients=3", "model.hidden=8",
        "air.name=sim", "run.checkpoint_every=1", "algorithm.name=fedavg", "power.jammer=false"]
CDPB = ["privacy.unit=client", "privacy.eps=1e6", "privacy.targeting=paper", "privacy.accountant=rdp",
        "privacy.report=['rdp', 'cdpb']", "power.options={eps_bar=100000.0, gamma_bar=0.5}"]
LAPA = ["power.policy=lapa", "privacy.eps=5", "privacy.accountant=lapa_sum", "privacy.report=['lapa_sum', 'rdp']",
        "privacy.targeting=paper", "privacy.enforce=false"]
FAMILIES = {
    "paper001_cdpb_idle": ["power.policy=cdpb_idle"] + CDPB,
    "paper001_cdpb_mixed": ["power.policy=cdpb_mixed"] + CDPB[:-1] +
                           ["power.options={eps_bar=100000.0, gamma_bar=0.5, portion=0.5}"],
    "paper001_independent_sampling": ["power.policy=independent_sampling"] + CDPB,
    "paper002_noisy_fedavg": ["algorithm.name=noisy_fedavg", "train.tau=5.0", "privacy.eps=1e6",
                              "algorithm.options={sigma=0.5, clip=0.5, local_steps=2, smoothness=2.0}",
                              "privacy.targeting=paper", "privacy.accountant=rdp", "privacy.report=['fdp', 'rdp']"],
    "paper002_noisy_fedprox_target": ["algorithm.name=noisy_fedprox", "algorithm.mu=0.3", "train.tau=5.0",
                                      "algorithm.options={clip=0.5, local_steps=2}", "privacy.eps=5",
                                      "privacy.targeting=target", "privacy.accountant=rdp",
                                      "privacy.report=['fdp', 'rdp']"],
    "paper003_otafd": ["data.partition=dominant_class", "model.name=logreg", "algorithm.name=otafd",
                       "algorithm.options={gamma=2.0, targets='simplex'}", "power.policy=otafd_prop1",
                       "power.max_snr_db=20", "privacy.accountant=otafd", "privacy.report=['otafd', 'rdp']",
                       "privacy.targeting=paper"],
    "paper004_lapa": LAPA,
    "paper004_lapa_target": ["power.policy=lapa", "privacy.eps=1", "privacy.accountant=rdp",
                             "privacy.report=['rdp']", "privacy.targeting=target"],
    "paper004_ddpg": ["power.policy=ddpg", "privacy.eps=5", "privacy.accountant=rdp", "privacy.report=['rdp']",
                      "privacy.targeting=paper", "privacy.enforce=false",
                      "power.options={episodes=1, steps=2, warmup=2, batch=2, buffer=10, env_channels=1}"],
}


def _run_one_round(tmp_path, sets, after: int = 1):
    """A private copy (tests/shared_runs.py: its own run id and key) of the family's run, stopped (as by a kill
    between rounds) after round ``after`` (1 of 2 by default); the run itself is made once per session."""
    def make(out):
        exp = Experiment(default_experiment(BASE + sets + [f"run.rounds={after + 1}"]), out)

        def stop(row):
            if row["round"] == after:
                raise KeyboardInterrupt
        exp.on_round = stop
        assert exp.run().stopped_reason.startswith("interrupted")
    name = "rederive-" + hashlib.sha256(json.dumps([sets, after]).encode()).hexdigest()[:16]
    return shared_runs.copy_of(name, make, tmp_path / "run")


def _verify(out, capsys):
    rc = main(["verify", str(out)])
    return rc, capsys.readouterr().out.strip()


def _resume(out, capsys):
    rc = main(["run", "--resume", str(out), "--quiet"])
    return rc, capsys.readouterr().err.strip()


def _refused_by_both(out, capsys, named: str, entry: int = 1):
    which = f"ledger entry {entry} (round {entry}"
    rc, line = _verify(out, capsys)
    assert rc == 1 and which in line and named in line and "rewritten" in line, line
    assert len(line.splitlines()) == 1
    before = digest(out)
    rc, err = _resume(out, capsys)
    assert rc == 2 and "cannot resume" in err and which in err and named in err, err
    assert len(err.splitlines()) == 1
    assert digest(out) == before                                   # a refused resume changes nothing


def _forge(out, edit, entry: int = 1) -> tuple[dict, dict]:
    """Apply ``edit`` to ``entry``, re-chain with the run's key, patch the checkpoint; (eps before, after)."""
    recs = ledger(out)
    before = recs[-1]["eps"]
    edit(recs[entry - 1])
    rewrite(out, recs, run_key(out), "patched")
    return before, ledger(out)[-1]["eps"]


@pytest.mark.experiment
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_honest_ledger_is_re_derived_resumes_and_verifies(tmp_path, capsys, family):
    out = _run_one_round(tmp_path, FAMILIES[family])
    rc, line = _verify(out, capsys)
    assert rc == 0 and "1 entries' booked figures re-derived" in line, line
    rc, err = _resume(out, capsys)
    assert rc == 0, err
    rc, line = _verify(out, capsys)
    assert rc == 0 and "2 entries' booked figures re-derived" in line, line


@pytest.mark.experiment
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_quartered_sensitivity_rechained_with_the_key_is_refused(tmp_path, capsys, family):
    """The issue's forgery, on every family: sensitivity / 4, eps recomputed, keyed chain, checkpoint patched."""
    out = _run_one_round(tmp_path, FAMILIES[family])

    def quarter(rec):
        rec["sensitivity"] /= 4
    before, after = _forge(out, quarter)
    assert after["rdp"] < before["rdp"]                            # what the forger wanted the folder to say
    _refused_by_both(out, capsys, "sensitivity")


@pytest.mark.experiment
def test_cdpb_a_claimed_sampling_probability_is_refused(tmp_path, capsys):
    """Paper 001: amplification by participation (Lemma 3) claimed afresh, sampling_prob 1 -> 0.1."""
    out = _run_one_round(tmp_path, FAMILIES["paper001_cdpb_idle"])
    rec = ledger(out)[0]
    q, z = 0.1, rec["sigma_eff"] / rec["sensitivity"]
    acc = rdp_privacy_accountant.RdpAccountant()                   # dp-accounting directly: what it would buy
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)))
    claimed = acc.get_epsilon(1e-5)
    before, after = _forge(out, lambda r: r.update(sampling_prob=q))
    assert after["rdp"] == pytest.approx(claimed, rel=1e-6) and after["rdp"] < before["rdp"]
    _refused_by_both(out, capsys, "sampling_prob")


@pytest.mark.experiment
def test_noisy_fedavg_a_changed_smoothness_is_refused(tmp_path, capsys):
    """Paper 002: the fdp accountant reads extra['fdp'] (Theorem 10's rho_t, gamma_t from the smoothness L);
    round 2's L doubled, the figures kept, and eps_fdp falls."""
    out = _run_one_round(tmp_path, FAMILIES["paper002_noisy_fedavg"], after=2)

    def double(rec):
        rec["extra"]["fdp"]["L"] *= 2
    before, after = _forge(out, double, entry=2)
    assert after["fdp"] < before["fdp"]
    _refused_by_both(out, capsys, "extra.fdp.L", entry=2)


@pytest.mark.experiment
def test_lapa_lowered_device_budgets_are_refused(tmp_path, capsys):
    """Paper 004: lapa_sum sums the per-device budgets eps_k the entry books; halved, figures kept."""
    out = _run_one_round(tmp_path, FAMILIES["paper004_lapa"])

    def halve(rec):
        rec["extra"]["eps_k"] = [v / 2 for v in rec["extra"]["eps_k"]]
        rec["extra"]["eps_k_eff"] = [v / 2 for v in rec["extra"]["eps_k_eff"]]
    before, after = _forge(out, halve)
    assert after["lapa_sum"] < before["lapa_sum"]
    _refused_by_both(out, capsys, "extra.eps_k")


@pytest.mark.experiment
def test_lapa_a_pid_error_outside_its_bound_is_refused(tmp_path, capsys):
    """The recorded PID error e (eq. 11) is an input the config cannot give: refused outside [0, (K_p+K_s) 2C]."""
    out = _run_one_round(tmp_path, FAMILIES["paper004_lapa"])
    _forge(out, lambda r: r["extra"].update(e=-1.0))
    _refused_by_both(out, capsys, "PID error")


@pytest.mark.experiment
def test_otafd_a_raised_sigma_is_refused(tmp_path, capsys):
    """Paper 003: Theorem 2's mu = Delta / sigma, lowered by booking four times the target noise."""
    out = _run_one_round(tmp_path, FAMILIES["paper003_otafd"])
    before, after = _forge(out, lambda r: r.update(sigma_eff=4 * r["sigma_eff"]))
    assert after["otafd"] < before["otafd"]
    _refused_by_both(out, capsys, "sigma_eff")


@pytest.mark.experiment
def test_ddpg_a_forged_action_is_refused(tmp_path, capsys):
    """Paper 004 Config. 5: the DDPG action the entry records sets the powers, hence alpha_u and the channel
    noise; a different action (figures kept) no longer gives the booked sigma_eff."""
    out = _run_one_round(tmp_path, FAMILIES["paper004_ddpg"])
    action = ledger(out)[0]["extra"]["ddpg_train"]["action"]
    assert len(action) == 3 and all(0 <= a <= 1 for a in action)

    def other(rec):
        rec["extra"]["ddpg_train"]["action"] = [1.0 if a < 0.5 else 0.0 for a in action]
    _forge(out, other)
    _refused_by_both(out, capsys, "but the config and the round's plan give")     # alpha_u, so sigma and the fold


@pytest.mark.experiment
def test_ddpg_an_entry_without_its_action_is_refused(tmp_path, capsys):
    out = _run_one_round(tmp_path, FAMILIES["paper004_ddpg"])
    _forge(out, lambda r: r["extra"]["ddpg_train"].pop("action"))
    _refused_by_both(out, capsys, "action")


@pytest.mark.experiment
def test_the_summary_says_which_figures_were_re_derived(tmp_path, capsys):
    """The verdict names the re-derivation; the ledger's figures are what the run printed."""
    out = _run_one_round(tmp_path, FAMILIES["paper004_lapa"])
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines()]
    assert rows[0]["sensitivity"] == ledger(out)[0]["sensitivity"]
    rc, line = _verify(out, capsys)
    assert rc == 0 and "booked figures re-derived" in line and "chain intact (keyed" in line, line
