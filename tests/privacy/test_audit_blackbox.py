"""Black-box canaries for `otafl-sdr audit` (issue 24, item 5; audit/blackbox.py): crafted training samples
(a wrong label, a NaN feature) replace samples of one client's data set by a private coin, the mechanism runs
untouched, and the statistic is the released aggregate's projection on each canary's clipped-gradient
direction. Each canary moves the noiseless aggregate by at most the booked sensitivity, the measured lower
bound stays below the printed epsilon on the default mechanism, and audit.json names the canary kind."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from dp_reference import independent_pld_epsilon

from otafl_sdr.audit.blackbox import BlackBoxTransport
from otafl_sdr.audit.runner import run_audit
from otafl_sdr.learning.trainer import mlp_layers
from otafl_sdr.experiment.orchestrator import make_experiment
from otafl_sdr.rounds.in_process import AirTransport
from otafl_sdr.configure.load import default_experiment

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures


def _ledger_eps(out: Path, delta: float) -> float:
    recs = [json.loads(x) for x in (out / "run" / "privacy_ledger.jsonl").read_text().splitlines() if x]
    return independent_pld_epsilon(recs, delta)


@pytest.mark.parametrize("kind", ["mislabeled", "nonfinite"])
def test_closed_form_directions_match_per_sample_autograd(tmp_path, kind):
    """The MLP closed form (no (m, d) gradient built) equals torch.func's per-sample gradients."""
    cfg = default_experiment(["air.name=sim", "run.rounds=1", "run.progress=false", "model.hidden=16"])
    tr = BlackBoxTransport(AirTransport(cfg), 50, np.random.default_rng(0), kind=kind)
    exp = make_experiment(cfg, tmp_path / "run", transport=tr)
    exp.build()
    exp.close()                  # its built parts stay; the folder's lock is released
    tr.bind(exp.parts)                            # what the run does before round 1
    assert tr.m == 50 and tr.coins.sum() == 25
    crafted = exp.trainer.y_pad[tr.fixed, tr.slots] if kind == "mislabeled" else exp.trainer.ok_pad[tr.fixed, tr.slots]
    if kind == "mislabeled":                      # inserted slots carry a wrong label, the others the true one
        assert torch.all((crafted != tr.y0) == torch.as_tensor(tr.coins))
    else:                                         # the trainer's own defence marks the NaN samples
        assert torch.all(~crafted == torch.as_tensor(tr.coins))
    g = torch.Generator().manual_seed(1)
    tr.w = exp.trainer.get_flat() + 0.05 * torch.randn(exp.trainer.dim, generator=g)
    back = torch.randn(exp.trainer.dim, generator=g, dtype=torch.float64)
    p1, n1 = tr.mlp_directions(len(mlp_layers(exp.trainer.model)), back)
    p2, n2 = tr.directions(back.to(torch.float32))
    assert np.allclose(p1, p2, atol=1e-4) and np.allclose(n1, n2, rtol=1e-4)
    assert np.all(n1 <= 2 * cfg.train.sample_clip + 1e-9)        # both gradients clipped to C


@pytest.mark.slow
def test_mislabeled_canaries_on_the_default_mechanism(tmp_path):
    """The default experiment on sim, all 30 rounds: eps_lower <= printed eps (95 %), every canary's move
    within the booked sensitivity, the printed eps rechecked with dp-accounting."""
    cfg = default_experiment(["air.name=sim", "run.progress=false"])
    a = run_audit(cfg, tmp_path, rng=np.random.default_rng(21), canary="mislabeled")
    assert a["canary"] == "mislabeled" and json.loads((tmp_path / "audit.json").read_text())["canary"] == "mislabeled"
    assert a["eps_printed"] == pytest.approx(_ledger_eps(tmp_path, a["delta"]), rel=2e-3)
    assert a["trials"] == a["canary_slots"] == a["carrier_samples"] and a["canaries_inserted"] == a["trials"] // 2
    assert 0 < max(a["shift_over_sensitivity"]) <= 1 + 1e-6     # a replaced sample never moves more than booked
    assert a["eps_lower"] <= a["eps_printed"], a
    assert a["eps_lower_cp"] <= a["eps_printed"]
    assert a["client_releases"] == 30 and a["nonfinite_releases"] == 0


@pytest.mark.experiment
def test_nonfinite_canaries_never_silence_nor_reach_the_release(tmp_path):
    """NaN-feature canaries: the trainer clips their gradient to zero, so the release stays finite, the
    carrier keeps transmitting, and each canary moves the aggregate by at most the booked sensitivity."""
    cfg = default_experiment(["air.name=sim", "run.rounds=4", "run.progress=false"])
    a = run_audit(cfg, tmp_path, rng=np.random.default_rng(22), canary="nonfinite")
    assert a["canary"] == "nonfinite" and a["nonfinite_releases"] == 0
    rows = [json.loads(x) for x in (tmp_path / "run" / "rounds.jsonl").read_text().splitlines() if x]
    client_rows = [r for r in rows if r.get("uses_clients")]
    assert client_rows and all(r["transmitting"] == cfg.data.clients and not r["lost"] for r in client_rows)
    assert 0 < max(a["shift_over_sensitivity"]) <= 1 + 1e-6
    assert a["eps_lower"] <= a["eps_printed"], a


@pytest.mark.experiment
def test_cli_canary_option(tmp_path, capsys):
    """`otafl-sdr audit --canary KIND` (a small logistic-regression run; the CLI's main in this process: the
    answer, not the process boundary, is under test) and a bad kind is one line, exit 2."""
    from otafl_sdr.cli.main import main
    small = ["--air", "sim", "--set", "run.rounds=2", "--set", "data.clients=3", "--set", "data.max_samples=300",
             "--set", "model.name=logreg", "--set", "run.torch_threads=1", "--quiet"]
    capsys.readouterr()
    rc = main(["audit", *small, "--canary", "mislabeled", "--out", str(tmp_path / "a")])
    r = capsys.readouterr()
    assert rc == 0, r.err[-2000:]
    assert "mislabeled canaries" in r.out
    assert json.loads((tmp_path / "a" / "audit.json").read_text())["canary"] == "mislabeled"
    try:
        rc = main(["audit", *small, "--canary", "bogus", "--out", str(tmp_path / "b")])
    except SystemExit as e:                    # argparse's refusal, as the console script would exit
        rc = e.code
    r = capsys.readouterr()
    assert rc == 2 and "Traceback" not in r.err and "--canary" in r.err
