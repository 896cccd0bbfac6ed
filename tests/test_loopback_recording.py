"""`air.record_iq` on the loopback air: every round's received IQ is a SigMF recording that
`otafl-sdr replay` demodulates, offline, into exactly the aggregate the run applied to its model."""
from __future__ import annotations

import numpy as np
import torch

from otafl_sdr.cli import main as cli_main
from otafl_sdr.config import default_experiment
from otafl_sdr.orchestrator import make_experiment

SETS = ["run.rounds=1", "run.progress=false", "air.name=loopback", "air.record_iq=true", "algorithm.name=fedavg",
        "data.dataset=digits", "data.clients=4", "data.classes_per_client=10", "model.hidden=16",
        "privacy.calibrate=paper"]


def test_a_loopback_recording_replays_to_the_aggregate_the_run_applied(tmp_path):
    cfg = default_experiment(SETS)
    before = make_experiment(cfg, tmp_path / "init")
    before._build()
    w0 = before.trainer.get_flat().detach().double()          # the seeded initial model
    out = tmp_path / "run"
    make_experiment(cfg, out).run()
    w1 = torch.load(out / "checkpoint.pt", weights_only=True)["w"].double()
    meta = out / "iq" / "round_0001.sigmf-meta"
    assert meta.exists() and (out / "iq" / "round_0001.sigmf-data").exists()
    agg_file = tmp_path / "agg.npy"
    assert cli_main(["replay", str(meta), "--out", str(agg_file)]) == 0
    replayed = np.load(agg_file) * cfg.train.tau                # FedAvg: w1 = w0 + tau * aggregate (eq. 7)
    np.testing.assert_allclose(replayed, (w1 - w0).numpy(), rtol=1e-5, atol=1e-6)
