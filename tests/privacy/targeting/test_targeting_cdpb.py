"""privacy.targeting = "target" for paper 001's mechanisms (CDPB-n / -i / -mixed and the baselines): the
one knob (rho for CDPB and its design-sharing baselines, the power scaling c of Liu & Simeone's
"privacy for free" for h_min) is solved before round 1 so that an INDEPENDENT dp-accounting PLD
composition of the run's privacy_ledger.jsonl lies in [0.97, 1.00] for eps = 1 (issue 14's "Done when").
eps_bar (Algorithm 3) no longer designs anything under "target"; under "paper" it does (tests/test_cdpb_*).
independent_sampling's coins are private, so under "target" its ledger books the coin-free bound (channel
noise only) and rho is solved for that; noise_free's only noise is the channel's (finite eps through rho)."""
import json

import pytest

from otafl_sdr.cli.main import main
from dp_reference import independent_pld_epsilon

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

BASE = ["data.dataset=digits", "data.clients=6", "data.classes_per_client=10", "model.name=logreg",
        "run.rounds=4", "air.name=sim", "run.progress=false", "train.local_epochs=1", "train.tau=0.2",
        "privacy.eps=1", "privacy.delta=1e-5", "privacy.accountant=pld", "privacy.unit=client",
        "power.jammer=false", "power.max_snr_db=20", "channel.sigma_c2=1.0", "algorithm.name=fedavg"]


def _run(tmp_path, name, extra):
    args = ["run", "--out", str(tmp_path / name), "--quiet"]
    for s in BASE + list(extra):
        args += ["--set", s]
    return main(args)


@pytest.mark.experiment
@pytest.mark.parametrize("policy,knob", [("cdpb_noisy", "power.options.rho"), ("cdpb_idle", "power.options.rho"),
                                         ("cdpb_mixed", "power.options.rho"), ("noise_free", "power.options.rho"),
                                         ("gamma_bar", "power.options.rho"), ("h_min", "power.options.power_scale")])
def test_each_paper001_mechanism_spends_its_target(tmp_path, policy, knob):
    assert _run(tmp_path, "t", [f"power.policy={policy}"]) == 0
    recs = [json.loads(ln) for ln in (tmp_path / "t" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert len([r for r in recs if r["uses_data"]]) == 4
    eps = independent_pld_epsilon(recs, 1e-5)
    assert 0.97 <= eps <= 1.0, eps
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert s["calibration"] == "target (pld)" and s["calibrated_knob"] == knob
    assert 0.99 <= s["eps_planned"] <= 1.0 and s["eps_pld"] == pytest.approx(s["eps_planned"], rel=1e-6)


@pytest.mark.experiment
def test_h_min_with_artificial_noise_spends_its_target(tmp_path):
    """h_min's option artificial_noise (every client fills its spare power with noise): still one knob, c."""
    assert _run(tmp_path, "t", ["power.policy=h_min", "power.options={artificial_noise = true}"]) == 0
    recs = [json.loads(ln) for ln in (tmp_path / "t" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert 0.97 <= independent_pld_epsilon(recs, 1e-5) <= 1.0
    assert json.loads((tmp_path / "t" / "summary.json").read_text())["calibrated_knob"] == "power.options.power_scale"


@pytest.mark.parametrize("policy,eps,words", [
    ("independent_sampling", 0.01, ["cannot be met", "power.options.rho", "1e-9 P <= rho W^2 <= 1e3 P"]),
    ("cdpb_idle", 0.001, ["cannot be met", "power.options.rho", "1e-9 P <= rho W^2 <= 1e3 P"]),
    ("cdpb_noisy", 1000, ["cannot be spent", "power.options.rho", "1e3 P", "other noise is larger"]),
    ("h_min", 1e5, ["cannot be spent", "power.options.power_scale = 1", "full power at c = 1"])])
def test_an_unreachable_target_is_refused_at_start_naming_the_limit(tmp_path, capsys, policy, eps, words):
    assert _run(tmp_path, "u", [f"power.policy={policy}", f"privacy.eps={eps}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    assert not (tmp_path / "u").exists()


def test_rho_set_by_hand_with_a_target_is_refused(tmp_path, capsys):
    assert _run(tmp_path, "t", ["power.policy=cdpb_idle", "power.options={rho = 0.5}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "power.options.rho" in err and "is set by hand" in err
    assert not (tmp_path / "t").exists()


@pytest.mark.experiment
@pytest.mark.parametrize("seed", [0, 1])
def test_independent_sampling_spends_its_target_whatever_the_coins(tmp_path, seed):
    """The clients' coins are private (not plannable), so the ledger books the coin-free bound
    z = sigma_c / (sqrt(rho) Delta_u) of every round someone sends; rho is solved for it (the only knob)."""
    assert _run(tmp_path, "t", ["power.policy=independent_sampling", f"run.seed={seed}"]) == 0
    recs = [json.loads(ln) for ln in (tmp_path / "t" / "privacy_ledger.jsonl").read_text().splitlines()]
    data = [r for r in recs if r["uses_data"]]
    assert len(data) == 4
    eps = independent_pld_epsilon(recs, 1e-5)
    assert 0.97 <= eps <= 1.0, eps
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert s["calibration"] == "target (pld)" and s["calibrated_knob"] == "power.options.rho"
    assert 0.99 <= s["eps_planned"] <= 1.0
    assert s["eps_pld"] == pytest.approx(s["eps_planned"], rel=1e-6)   # planned on other coins: the same ledger
    rho = s["calibrated_value"]
    for r in data:                                       # client unit, W = 1: Delta_u = 1
        n = max(r["extra"]["participants"], 1)
        assert r["sensitivity"] * n == pytest.approx(data[0]["sensitivity"] * max(data[0]["extra"]["participants"], 1))
        assert r["sigma_eff"] == pytest.approx(1.0 / (rho ** 0.5 * n), rel=1e-9)     # sigma_c2 = 1: channel only
        assert r["extra"]["sigma_realised"] >= r["sigma_eff"] * (1 - 1e-12)          # the others' noise only adds


def test_hand_set_knobs_with_a_target_are_refused(tmp_path, capsys):
    for policy, opt, key in [("independent_sampling", "{rho = 0.5}", "power.options.rho"),
                             ("h_min", "{power_scale = 0.5}", "power.options.power_scale"),
                             ("noise_free", "{rho = 0.5}", "power.options.rho")]:
        assert _run(tmp_path, policy, [f"power.policy={policy}", f"power.options={opt}"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and key in err and "is set by hand" in err, err
        assert not (tmp_path / policy).exists()


@pytest.mark.experiment
def test_noise_free_is_protected_by_the_channel_noise_alone(tmp_path):
    """noise_free sends no artificial noise: its eps is that of the channel noise sigma_c2 on the update
    scaled by sqrt(rho), finite and calibrated through rho; the ledger books exactly that noise."""
    assert _run(tmp_path, "t", ["power.policy=noise_free"]) == 0
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    rho = s["calibrated_value"]
    for r in (json.loads(ln) for ln in (tmp_path / "t" / "privacy_ledger.jsonl").read_text().splitlines()):
        if r["uses_data"]:
            z = r["sigma_eff"] / r["sensitivity"]
            assert z == pytest.approx(1.0 / (rho ** 0.5 * 1.0), rel=1e-6), (z, r)   # sigma_c = 1, Delta_u = W = 1
