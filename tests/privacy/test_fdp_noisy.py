"""Noisy-FedAvg / Noisy-FedProx (otafl_sdr/learning/noisy_fedavg.py): Algorithm 1's local steps against
plain autograd, the update-norm bound, config errors, and short end-to-end runs whose results carry eps_fdp."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.learning.lr_schedules import round_lrs, schedule_lrs
from otafl_sdr.privacy import fdp_analysis as fa

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

torch.set_num_threads(1)

BASE = ["run.progress=false", "run.torch_threads=1", "data.dataset=digits", "data.clients=4",
        "data.partition=iid", "model.hidden=8", "train.batch_size=16", "train.lr=0.1", "train.tau=5.0"]
IDEAL_AIR = ["channel.fading=awgn", "power.jammer=false", "channel.sigma_c2=1e-9", "power.max_snr_db=80"]


def cfg_of(*extra):
    return load_config(None, BASE + list(extra))


def build(cfg):
    from otafl_sdr.learning.federated_data import load_federated
    from otafl_sdr.learning.models import build_model
    from otafl_sdr.learning.trainer import LocalTrainer
    from otafl_sdr.registry import ALGORITHMS
    from otafl_sdr.configure.plugins import load_plugins
    load_plugins()
    data = load_federated(cfg)
    model = build_model(cfg, data.input_shape, data.num_classes)
    return LocalTrainer(cfg, data, model), ALGORITHMS.get(cfg.algorithm.name)(cfg)


def manual_local(trainer, w0, lrs, V, alpha, batches):
    """Reference L-update for one client with nn.Module autograd: eq. (2) / (4) with per-step clipping."""
    model = trainer.model
    torch.nn.utils.vector_to_parameters(w0.clone(), model.parameters())
    anchor = w0.clone()
    for eta, (xb, yb) in zip(lrs, batches):
        model.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        g = torch.nn.utils.parameters_to_vector([p.grad for p in model.parameters()])
        g = g / max(1.0, float(g.norm()) / V)
        w = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
        if alpha > 0:
            g = g + alpha * (w - anchor)
        torch.nn.utils.vector_to_parameters(w - eta * g, model.parameters())
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach() - w0


@pytest.mark.parametrize("name,schedule", [("noisy_fedavg", "cyclic"), ("noisy_fedprox", "constant")])
def test_local_steps_match_autograd(name, schedule):
    cfg = cfg_of(f"algorithm.name={name}", "algorithm.mu=0.5",
                 f'algorithm.options={{clip = 0.05, local_steps = 3, schedule = "{schedule}"}}')
    trainer, algo = build(cfg)
    w0 = trainer.get_flat()
    it = 2
    tr = algo.local_train(trainer, w0, it)
    idx, wts = algo._batches(trainer, it)
    lrs = round_lrs(schedule, 0.1, it - 1, 3)
    for i in range(trainer.data.clients):
        n = int((wts[i, 0] > 0).sum())
        x = trainer.data.client_x[i].reshape(len(trainer.data.client_y[i]), -1)
        batches = [(x[idx[i, k, :n]], trainer.data.client_y[i][idx[i, k, :n]]) for k in range(3)]
        ref = manual_local(trainer, w0, lrs, 0.05, algo.alpha, batches)
        assert torch.allclose(tr.updates[i], ref, atol=2e-6, rtol=1e-4)
    assert algo.alpha == (0.5 if name == "noisy_fedprox" else 0.0)


@pytest.mark.parametrize("schedule", ["constant", "cyclic", "stagewise", "continuous"])
def test_update_never_longer_than_V_sum_eta(schedule):
    cfg = cfg_of("algorithm.name=noisy_fedavg",
                 f'algorithm.options={{clip = 0.02, local_steps = 6, schedule = "{schedule}"}}')
    trainer, algo = build(cfg)
    w = trainer.get_flat()
    for it in (1, 3):
        tr = algo.local_train(trainer, w, it)
        bound = 0.02 * float(np.sum(algo.round_lrs(it)))
        assert np.all(tr.raw_norms <= bound * (1 + 1e-5))
        assert np.any(tr.raw_norms > 0.5 * bound)            # clipping at 0.02 binds on digits: steps are long
        assert not tr.clipped.any()


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="train.tau"):
        build(cfg_of("algorithm.name=noisy_fedavg", "train.tau=0.01", "algorithm.options={clip = 1.0}"))
    with pytest.raises(ConfigError, match="algorithm.options.schedule"):
        cfg_of("algorithm.name=noisy_fedavg", 'algorithm.options={schedule = "warm"}')
    with pytest.raises(ConfigError, match="algorithm.options.sigma"):
        cfg_of("algorithm.name=noisy_fedprox", "algorithm.options={sigma = -1.0}")
    with pytest.raises(ConfigError, match="algorithm.options.bogus"):
        cfg_of("algorithm.name=noisy_fedavg", "algorithm.options={bogus = 1}")


def _run(tmp_path, name, *extra):
    from otafl_sdr.experiment.orchestrator import run_experiment
    cfg = cfg_of(*extra, "run.rounds=2", 'privacy.report=["fdp", "fdp_feasible", "rdp", "pld"]',
                 "privacy.accountant=rdp", "privacy.eps=1e6", "privacy.targeting=paper")
    out = run_experiment(cfg, tmp_path / name).out
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    ledger = [json.loads(line) for line in (out / "privacy_ledger.jsonl").read_text().splitlines()]
    return cfg, rows, summary, ledger


@pytest.mark.experiment
def test_noisy_fedavg_run_carries_eps_fdp(tmp_path):
    sigma, V, K = 0.5, 0.5, 4
    cfg, rows, summary, ledger = _run(tmp_path, "nf", "algorithm.name=noisy_fedavg", *IDEAL_AIR,
                                      f'algorithm.options={{sigma = {sigma}, clip = {V}, local_steps = {K}, '
                                      'schedule = "stagewise", smoothness = 2.0}')
    assert len(rows) == 2 and all(isinstance(r["eps_fdp"], float) for r in rows)
    assert summary["eps_fdp"] == pytest.approx(rows[-1]["eps_fdp"]) and "eps_fdp_feasible" in summary
    assert rows[0]["eps_fdp"] < rows[1]["eps_fdp"] <= rows[1]["eps_fdp_feasible"] * (1 + 1e-12)
    # recompute independently: aggregate weights p_i (s_i = 1 at this SNR), Lemma 20/21, eq. (16), Lemma 7
    sizes = np.array([r["extra"]["fdp"]["m"] for r in ledger])
    assert np.all(sizes == 4)
    p_max = max(r["extra"]["fdp"]["weight"] for r in ledger)
    lrs = schedule_lrs("stagewise", cfg.train.lr, 2, K)
    lrho, gamma = fa.fedavg_rho_gamma(lrs, 2.0, V, p_max)
    tau = cfg.train.tau
    sig = np.array([r["sigma_eff"] for r in rows])
    p_sq = (sig ** 2 - np.array([r["extra"]["fdp"]["sigma_air"] for r in ledger]) ** 2) / (sigma / tau) ** 2
    assert p_sq == pytest.approx([0.25] * 2, rel=0.05)         # sum_i p_i^2 = 1/m for (nearly) equal clients
    mu = fa.paper_mu(lrho, gamma / tau, sig)
    assert rows[-1]["eps_fdp"] == pytest.approx(fa.gdp_to_eps(mu, cfg.privacy.delta), rel=1e-9)
    assert rows[0]["sensitivity"] == pytest.approx(gamma[0] / tau, rel=1e-12)
    assert all(math.isfinite(r["test_accuracy"]) for r in rows)


@pytest.mark.experiment
def test_noisy_fedprox_over_the_air_variant(tmp_path):
    """sigma = 0: no client noise; the jammer and channel noise of cj_adaptive are what the accountant uses."""
    cfg, rows, summary, ledger = _run(tmp_path, "ota", "algorithm.name=noisy_fedprox", "algorithm.mu=0.3",
                                      'algorithm.options={sigma = 0.0, clip = 0.5, local_steps = 3}')
    for r, line in zip(rows, ledger):
        info = line["extra"]["fdp"]
        assert info["noise"] == "air" and info["method"] == "fedprox" and info["alpha"] == 0.3
        assert r["sigma_eff"] == pytest.approx(info["sigma_air"], rel=1e-12)    # only the air's noise
        lrs = round_lrs("constant", cfg.train.lr, r["round"] - 1, 3)
        lemma22 = fa.fedprox_rho_gamma(lrs, 0.3, 1.0, 0.5, info["weight"])[1][0] / cfg.train.tau
        assert r["sensitivity"] == pytest.approx(lemma22, rel=1e-12)
        assert r["sensitivity"] < 2 * 0.5 * info["weight"] * lrs.sum() / cfg.train.tau     # below Lemma 20's
        assert isinstance(r["eps_fdp"], float) and math.isfinite(r["eps_fdp"])
    assert summary["eps_fdp"] == pytest.approx(rows[-1]["eps_fdp"])


def test_a_sweep_or_compare_plan_refuses_a_cell_whose_tau_the_algorithm_refuses(tmp_path, capsys):
    """train.tau below V sum_k eta_k is refused where the config is loaded (the algorithm's validate_config),
    so `sweep --dry-run` and `compare --plan` name the cell before anything runs, as `run --dry-run` does (the
    K = 50 page's spec at the K = 10 pages' tau 0.5: they used to list the cells and plan their power)."""
    from otafl_sdr.cli.main import main
    root = Path(__file__).resolve().parents[2]
    spec = (root / "sim_loopback/compare/paper002_fdp_target_k50.toml").read_text().replace("train.tau=2.5", "train.tau=0.5")
    path = tmp_path / "k50.toml"
    path.write_text(spec.replace('base = "../presets/', f'base = "{root}/sim_loopback/presets/'))
    for argv in (["sweep", str(path), "--dry-run", "--out", str(tmp_path / "s")],
                 ["compare", str(path), "--plan", "--out", str(tmp_path / "c")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "train.tau" in err and "2.5" in err, err
    assert main(["run", "--config", str(root / "sim_loopback/presets/noisy_fedavg_mnist5k.toml"), "--dry-run", "--set",
                 "algorithm.options={clip=1.0,local_steps=50,schedule='constant',smoothness=1.0}"]) == 2
