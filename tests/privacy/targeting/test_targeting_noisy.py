"""privacy.targeting = "target" for paper 002's Noisy-FedAvg / Noisy-FedProx: the clients' noise std sigma
(Algorithm 1) is solved before round 1 so that the ledger's rounds (Lemma 20/22 sensitivity, std
sqrt(sigma_air^2 + (sigma/tau)^2 sum_i g_i^2)) spend privacy.eps within 1 % and never above. Checked on real
runs (sim air, digits) by an INDEPENDENT composition of privacy_ledger.jsonl with dp-accounting; "paper"
keeps the configured sigma; a target the clients cannot meet (the air's noise already spends less) is
refused at start (exit 2, one line)."""
import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from otafl_sdr.cli.main import main
from otafl_sdr.privacy import fdp_analysis as fa
from otafl_sdr.privacy.rdp import DEFAULT_ORDERS

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

BASE = ["run.progress=false", "run.torch_threads=1", "data.dataset=digits", "data.clients=4",
        "data.partition=iid", "model.hidden=8", "train.batch_size=16", "train.lr=0.1", "train.tau=5.0",
        "run.rounds=3", "air.name=sim", "privacy.eps=1", "privacy.delta=1e-5",
        'privacy.report=["pld", "rdp"]']
IDEAL_AIR = ["channel.fading=awgn", "power.jammer=false", "channel.sigma_c2=1e-9", "power.max_snr_db=80"]
SIGMA = 0.5
OPTS = f'algorithm.options={{sigma = {SIGMA}, clip = 0.5, local_steps = 4, schedule = "stagewise"}}'
OPTS_T = 'algorithm.options={clip = 0.5, local_steps = 4, schedule = "stagewise"}'   # sigma: the target's


def _run(tmp_path, name, extra):
    args = ["run", "--out", str(tmp_path / name), "--quiet"]
    for s in BASE + list(extra):
        args += ["--set", s]
    return main(args)


def _ledger(path):
    return [json.loads(line) for line in (path / "privacy_ledger.jsonl").read_text().splitlines() if line.strip()]


def _summary(path):
    return json.loads((path / "summary.json").read_text())


def independent_epsilon(records, delta, accountant):
    """dp-accounting directly, one GaussianDpEvent(sigma_eff / sensitivity) per data-using round."""
    acc = PLDAccountant(value_discretization_interval=1e-4) if accountant == "pld" else RdpAccountant(DEFAULT_ORDERS)
    for r in records:
        if not r["uses_data"] or r["sensitivity"] == 0:
            continue
        ev = dp_accounting.GaussianDpEvent(noise_multiplier=r["sigma_eff"] / r["sensitivity"])
        if r["sampling_prob"] < 1:
            ev = dp_accounting.PoissonSampledDpEvent(sampling_probability=r["sampling_prob"], event=ev)
        acc.compose(ev)
    return acc.get_epsilon(delta)


@pytest.mark.experiment
@pytest.mark.parametrize("algorithm,accountant", [("noisy_fedavg", "pld"), ("noisy_fedprox", "rdp"),
                                                  ("noisy_fedprox", "pld")])
def test_a_calibrated_noisy_run_spends_its_target(tmp_path, algorithm, accountant):
    extra = [f"algorithm.name={algorithm}", "algorithm.mu=0.3", OPTS_T, f"privacy.accountant={accountant}", *IDEAL_AIR]
    assert _run(tmp_path, "t", extra) == 0
    recs = _ledger(tmp_path / "t")
    assert len(recs) == 3 and all(r["uses_data"] for r in recs)
    assert len({r["sensitivity"] for r in recs}) == 3       # stagewise rates: three different mechanisms
    eps = independent_epsilon(recs, 1e-5, accountant)
    assert 0.97 <= eps <= 1.0, eps
    assert independent_epsilon(recs, 1e-5, "pld") <= 1.0   # pld is the tighter one: never above the target
    s = _summary(tmp_path / "t")
    assert s["calibration"] == f"target ({accountant})" and s["calibrated_knob"] == "client noise sigma"
    assert s["calibrated_rounds"] == 3 and 0.99 <= s["eps_planned"] <= 1.0
    assert s[f"eps_{accountant}"] == pytest.approx(s["eps_planned"], rel=1e-3)
    sigma = s["calibrated_sigma"]
    assert sigma > 0 and sigma != SIGMA
    tau = 5.0
    for r in recs:                                          # the ledger's rounds used the solved sigma
        info = r["extra"]["fdp"]
        assert info["sigma_client"] == pytest.approx(sigma, rel=1e-12) and info["noise"] == "client"
        gain_sq = (r["sigma_eff"] ** 2 - info["sigma_air"] ** 2) / (sigma / tau) ** 2
        assert gain_sq == pytest.approx(0.25, rel=0.05)    # sum_i p_i^2 = 1/m for (nearly) equal clients


@pytest.mark.experiment
def test_paper_keeps_the_configured_sigma(tmp_path):
    """targeting = "paper": the previous release's ledger, every round as Algorithm 1 with the configured
    sigma, recomputed independently
    (Lemma 20's sensitivity, sigma_eff from sigma and the weights), and the same sensitivities as a
    calibrated run (the target changes only the noise)."""
    extra = ["algorithm.name=noisy_fedavg", OPTS, "privacy.accountant=rdp", "privacy.eps=1e6", *IDEAL_AIR]
    assert _run(tmp_path, "p", extra + ["privacy.targeting=paper"]) == 0
    assert _run(tmp_path, "t", ["algorithm.name=noisy_fedavg", OPTS_T, "privacy.accountant=rdp", "privacy.eps=1",
                                *IDEAL_AIR]) == 0
    paper, target = _ledger(tmp_path / "p"), _ledger(tmp_path / "t")
    assert _summary(tmp_path / "p")["calibration"] == "paper rule"
    assert "calibrated_sigma" not in _summary(tmp_path / "p")
    tau, sigma_t = 5.0, _summary(tmp_path / "t")["calibrated_sigma"]
    # the previous release's ledger (commit 1e608e9, before this calibration existed) on the same run
    for r, (sens, sig) in zip(paper, [(0.020027816411682893, 0.05000004837430575),
                                      (0.010013908205841447, 0.05000004837430575)]):
        assert r["sensitivity"] == pytest.approx(sens, rel=1e-12) and r["sigma_eff"] == pytest.approx(sig, rel=1e-12)
    for r, q in list(zip(paper, target))[:2]:
        info = r["extra"]["fdp"]
        assert info["sigma_client"] == SIGMA and r["extra"]["s_max"] == 1.0
        gamma = fa.fedavg_rho_gamma(np.asarray(info["lrs"]), 1.0, 0.5, info["weight"])[1][0]
        assert r["sensitivity"] == pytest.approx(gamma / tau, rel=1e-12) == q["sensitivity"]
        gain_sq_p = (r["sigma_eff"] ** 2 - info["sigma_air"] ** 2) / (SIGMA / tau) ** 2
        gain_sq_t = (q["sigma_eff"] ** 2 - q["extra"]["fdp"]["sigma_air"] ** 2) / (sigma_t / tau) ** 2
        assert gain_sq_p == pytest.approx(gain_sq_t, rel=1e-6)
        assert r["sigma_eff"] != pytest.approx(q["sigma_eff"], rel=1e-3)


@pytest.mark.experiment
def test_a_target_the_clients_cannot_meet_is_refused_before_round_1(tmp_path, capsys):
    # loud air (sigma_c2 = 1, 0 dB): its noise alone keeps the run far below eps = 100; client noise only adds
    loud = ["algorithm.name=noisy_fedavg", OPTS_T, "channel.sigma_c2=1.0", "power.jammer=false", "power.max_snr_db=0"]
    assert _run(tmp_path, "u", loud + ["privacy.eps=100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "privacy.eps = 100" in err and "cannot be met by client noise" in err
    assert not (tmp_path / "u").exists() or not (tmp_path / "u" / "rounds.jsonl").exists()
    # the same air with a target it can meet is calibrated: the refusal is the target's, not the config's
    assert _run(tmp_path, "ok", loud + ["privacy.eps=1", "run.rounds=1"]) == 0
    assert math.isfinite(_summary(tmp_path / "ok")["calibrated_sigma"])


def test_compose_matches_the_calculator_for_subsampled_and_mixed_rounds():
    """privacy/targeting.compose: Poisson-subsampled rounds by dp-accounting's PoissonSampledDpEvent
    (the calculator's self-composition), full-participation rounds as one merged Gaussian."""
    from otafl_sdr.privacy.targeting import compose
    from otafl_sdr.privacy.calculator import epsilon_of_rounds
    for acc in ("pld", "rdp"):
        assert compose(acc, [(1.5, 0.2)] * 5, 1e-5) == pytest.approx(epsilon_of_rounds(acc, 1.5, 5, 1e-5, 0.2), rel=1e-9)
        assert compose(acc, [(2.0, 1.0)] * 4, 1e-5) == pytest.approx(epsilon_of_rounds(acc, 2.0, 4, 1e-5), rel=1e-6)
    # different noise per round: mu^2 = sum_t 1/z_t^2 (1/4 + 1/16 + 1/16 = 3/8: z = sqrt(8/3))
    assert compose("pld", [(2.0, 1.0), (4.0, 1.0), (4.0, 1.0)], 1e-5) == pytest.approx(
        epsilon_of_rounds("pld", math.sqrt(8 / 3), 1, 1e-5), rel=1e-9)
    assert compose("pld", [(0.0, 1.0)], 1e-5) == math.inf


def test_a_hand_set_sigma_with_a_target_is_refused(tmp_path, capsys):
    """Which of the two wins is not guessed: the configured sigma and the target both set the noise."""
    assert _run(tmp_path, "h", ["algorithm.name=noisy_fedavg", OPTS, *IDEAL_AIR]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "algorithm.options.sigma is set by hand" in err, err
    assert not (tmp_path / "h").exists()
