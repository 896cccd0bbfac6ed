"""privacy.targeting = "target" for paper 004's LAPA (and its DDPG power control): the noise schedule is a
Gaussian privacy filter (power/lapa.py, calibrate_to) fixed before round 1, so that whatever the training
feedback does to the personalised budgets, an INDEPENDENT dp-accounting PLD composition of the ledger lies
in [0.97, 1.00] for eps = 1 -- on every seed (the issue saw 0.99 / 1.12 / 10.0 across three seeds)."""
import json
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main
from dp_reference import independent_pld_epsilon

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

BASE = ["data.dataset=digits", "data.clients=6", "data.partition=iid_noniid_mix", "data.iid_devices=2",
        "data.classes_per_client=2", "model.hidden=16", "run.rounds=5", "air.name=sim", "run.progress=false",
        "train.local_epochs=1", "privacy.eps=1", "privacy.delta=1e-5", "privacy.accountant=pld",
        "privacy.unit=client", "power.max_snr_db=0", "power.jammer=false", "algorithm.name=fedavg"]


def _run(tmp_path, name, extra):
    args = ["run", "--out", str(tmp_path / name), "--quiet"]
    for s in BASE + list(extra):
        args += ["--set", s]
    return main(args)


@pytest.mark.experiment
@pytest.mark.parametrize("policy,seed", [("lapa", 0), ("lapa", 1), ("lapa", 2), ("ddpg", 0), ("lapa_arb", 0),
                                         ("lapa_uniform", 0)])
def test_lapa_spends_its_target_on_every_seed(tmp_path, policy, seed):
    extra = [f"power.policy={policy.split('_')[0]}", f"run.seed={seed}"]
    if policy == "ddpg":
        extra += ["power.options={episodes = 2, steps = 4}"]
    if "_" in policy:                                   # LAPA's other budget rules: the same filter
        extra += [f"power.options={{budget = '{policy.split('_')[1]}'}}"]
    assert _run(tmp_path, "t", extra) == 0
    recs = [json.loads(ln) for ln in (tmp_path / "t" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert len([r for r in recs if r["uses_data"]]) == 5
    eps = independent_pld_epsilon(recs, 1e-5)
    assert 0.97 <= eps <= 1.0, eps
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert s["calibration"] == "target (pld)" and s["calibrated_knob"].startswith("noise schedule")


def test_a_budget_without_noise_cannot_be_calibrated(tmp_path, capsys):
    assert _run(tmp_path, "t", ["power.policy=lapa", "power.options={budget = 'none'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "budget = 'none'" in err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("policy", ["lapa", "ddpg"])
def test_a_target_the_channel_noise_alone_undercuts_is_refused_at_start(tmp_path, capsys, policy):
    """No device noise at full power is the most a round can spend (whatever weights the training picks):
    a target above the planned rounds' bound is refused before round 1, in one line."""
    extra = [f"power.policy={policy}", "privacy.eps=1e4"]
    if policy == "ddpg":
        extra += ["power.options={episodes = 2, steps = 4}"]
    assert _run(tmp_path, "u", extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "privacy.eps = 10000" in err and "cannot be spent" in err, err
    assert "with no device noise" in err and not (tmp_path / "u").exists()


FIG7 = Path(__file__).resolve().parents[3] / "sim_loopback" / "presets" / "lapa_fig7.toml"


def _run_fig7(tmp_path, name, policy, options, seed=0, rounds=5, eps=1):
    """sim_loopback/presets/lapa_fig7.toml (privacy.unit = 'sample_paper', max SNR 0 dB, 15 devices, power_fraction
    0.5) at a few rounds, privacy.eps calibrated as a target by PLD."""
    args = ["run", "--config", str(FIG7), "--out", str(tmp_path / name), "--quiet"]
    for s in [f"run.rounds={rounds}", f"run.seed={seed}", "privacy.targeting=target", "privacy.accountant=pld",
              f"privacy.eps={eps}", f"power.policy={policy}", f"power.options={options}"]:
        args += ["--set", s]
    assert main(args) == 0
    recs = [json.loads(ln) for ln in (tmp_path / name / "privacy_ledger.jsonl").read_text().splitlines()]
    return recs, json.loads((tmp_path / name / "summary.json").read_text())


@pytest.mark.experiment
@pytest.mark.parametrize("seed", [0, 1])
def test_ddpg_powers_leave_the_filter_room_to_spend_the_target(tmp_path, seed):
    """The DDPG learned its powers against the paper's classic per-device noise (c Delta s_k / eps_k, far more
    than the filter plans under sample_paper) and chose amplitudes ~20 dB below channel inversion: channel noise
    alone was z ~ 40-80 against the planned 5-6, the filter (which cannot remove channel noise) added nothing, and
    the run spent 0.3 of eps = 1 (0.41 of 4 on the full preset), learning nothing. Now the ledger's rounds, composed
    independently, spend the target within 1 % and never above it."""
    recs, s = _run_fig7(tmp_path, "d", "ddpg", "{power_fraction = 0.5, episodes = 2, steps = 4}", seed)
    assert len([r for r in recs if r["uses_data"]]) == 5
    eps = independent_pld_epsilon(recs, 1e-5)
    assert 0.99 <= eps <= 1.0, eps
    assert s["calibration"] == "target (pld)" and s["eps_pld"] <= s["eps_planned"] * (1 + 1e-9)
    assert s["eps_pld"] == pytest.approx(eps, abs=2e-3)
    # the filter needed device noise on top of the channel's in the rounds (it could not before)
    assert any(r["extra"]["artificial"] for r in recs if r["uses_data"])


@pytest.mark.experiment
def test_ddpg_accuracy_is_not_collapsed_next_to_lapa_at_the_same_target(tmp_path):
    """Same preset, same target: the DDPG's run learns about as well as LAPA at average power (seeds 0-7 at these
    sizes: ddpg - lapa in [-0.02, +0.07]; before the fix 0.145 against 0.379 on seed 0)."""
    _, d = _run_fig7(tmp_path, "d", "ddpg", "{power_fraction = 0.5, episodes = 2, steps = 4}")
    _, la = _run_fig7(tmp_path, "l", "lapa", "{power_fraction = 0.5}")
    assert d["final_accuracy"] >= la["final_accuracy"] - 0.1, (d["final_accuracy"], la["final_accuracy"])


@pytest.mark.experiment
@pytest.mark.parametrize("policy,seed", [("lapa", 0), ("ddpg", 2)])
def test_rounds_a_fade_leaves_short_are_made_up_by_the_others(tmp_path, policy, seed):
    """eps = 4 over 8 rounds of the same preset: some planned rounds' channel noise alone (at the policy's largest
    amplitudes) is above the even share of the filter; sharing the rest out by water level over the planned
    channels spends the target (the even share left 3.72 (lapa, seed 0) and 3.65 (ddpg, seed 2) of 4 unspent)."""
    opts = "{power_fraction = 0.5, episodes = 2, steps = 4}" if policy == "ddpg" else "{power_fraction = 0.5}"
    recs, s = _run_fig7(tmp_path, "w", policy, opts, seed, rounds=8, eps=4)
    assert len([r for r in recs if r["uses_data"]]) == 8
    eps = independent_pld_epsilon(recs, 1e-5)
    assert 0.99 * 4 <= eps <= 4.0, eps
    assert s["eps_pld"] <= s["eps_planned"] * (1 + 1e-9)
    z = [r["sigma_eff"] / r["sensitivity"] for r in recs if r["uses_data"]]
    assert max(z) / min(z) > 1.05                      # the rounds did not all get the even share


@pytest.mark.experiment
def test_arb_and_uniform_dp_are_two_benchmarks_at_the_same_target(tmp_path):
    """Benchmark 4 (ARB: eq. (12)'s adaptive round budget, an equal split) and Benchmark 3 (uniform DP: the same
    noise every round) under one target: the filter gave both the even share of every round and the same equal
    split, so paper 004's two benchmarks were one arm on every seed (issue 37: 'B3 and B4 identical'). Now ARB's
    round takes exp(-e) of its share (power/lapa_filter._round_factor) and its last round the rest: the two
    schedules differ, and each still spends the target by an independent PLD composition."""
    z = {}
    for budget in ("arb", "uniform"):
        recs, s = _run_fig7(tmp_path, budget, "lapa", f"{{power_fraction = 0.5, budget = '{budget}', "
                                                      f"noise_control = false}}", rounds=6, eps=4)
        used = [r for r in recs if r["uses_data"]]
        assert len(used) == 6
        eps = independent_pld_epsilon(recs, 1e-5)
        assert 0.99 * 4 <= eps <= 4.0, (budget, eps)
        z[budget] = [r["sigma_eff"] / r["sensitivity"] for r in used]
    assert z["arb"][0] == pytest.approx(z["uniform"][0], rel=1e-6)      # round 1: no error yet, the even share
    # (eq. (11)'s error needs released updates: the first rounds of both take the even share)
    assert any(a > u * 1.01 for a, u in zip(z["arb"][1:-1], z["uniform"][1:-1])), z   # exp(-e) < 1: noisier ...
    assert z["arb"][-1] < z["uniform"][-1] / 1.01, z     # ... what those rounds saved spent by the last round
