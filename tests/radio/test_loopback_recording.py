"""`air.record_iq` on every air that carries IQ (loopback, the in-process zmq air, the zmq testbed of node
processes): every round's received IQ is a SigMF recording that `otafl-sdr replay` demodulates, offline,
into exactly the aggregate the run applied to its model. (The uhd air's recordings are checked against
UHD's simulator in test_uhd_simulator.py.)"""
from __future__ import annotations

import json
import sys

import numpy as np
from pathlib import Path

import pytest
import torch

from otafl_sdr.cli.main import main as cli_main
from otafl_sdr.configure.load import default_experiment
from otafl_sdr.experiment.orchestrator import make_experiment

pytestmark = [pytest.mark.gnuradio, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

SETS = ["run.rounds=1", "run.progress=false", "air.name=loopback", "air.record_iq=true", "algorithm.name=fedavg",
        "data.dataset=digits", "data.clients=4", "data.classes_per_client=10", "model.hidden=16",
        "privacy.targeting=paper"]


@pytest.mark.parametrize("air", ["loopback", "zmq_inproc"])
def test_a_recording_replays_to_the_aggregate_the_run_applied(tmp_path, air):
    cfg = default_experiment(SETS + [f"air.name={air}"])
    before = make_experiment(cfg, tmp_path / "init")
    before.build()
    before.close()                  # its built parts stay; the folder's lock is released
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
    meta_json = json.loads(meta.read_text())
    assert meta_json["global"]["otafl:air"] == air and len(meta_json["global"]["otafl:alpha"]) == 4
    # SigMF annotations: the preamble where the receiver's correlator finds it, the payload after it,
    # one annotation per transmitting client
    notes = {a["core:label"]: a for a in meta_json["annotations"]}
    from otafl_sdr.phy.modem import Modem
    from otafl_sdr.radio.recording import read_recording
    x, _ = read_recording(meta)
    mod = Modem(cfg.phy)
    t = mod.preamble_template()
    peak = int(np.argmax(np.abs(np.correlate(x[:4 * len(t)], t, mode="valid"))))
    first_centre = peak + (mod.ntaps - 1) // 2                  # the template starts a half filter early
    pre = notes["preamble"]
    assert pre["core:sample_start"] <= first_centre < pre["core:sample_start"] + mod.sps
    assert notes["payload"]["core:sample_start"] == pre["core:sample_start"] + pre["core:sample_count"]
    assert sorted(k for k in notes if k.startswith("client ")) == [f"client {i}" for i in range(4)]


def test_the_zmq_testbed_records_what_its_receiver_node_demodulated(tmp_path):
    """`otafl-sdr run --air zmq` (one process per radio): the receiver node ships the samples it
    demodulated to the server, which records them; replaying gives the aggregate the model received."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "net"))   # the testbed tests' helpers
    from test_net_testbed import run_cli, _sets
    out = tmp_path / "tb"
    r = run_cli(["--air", "zmq", "--out", str(out)] + _sets(["run.rounds=1", "air.record_iq=true",
                                                            "net.diagnostics=false", "privacy.targeting=paper"]), out)
    assert r.returncode == 0, r.stderr[-2000:]
    from otafl_sdr.configure.load import load_config
    cfg = load_config(out / "config.toml")
    init = make_experiment(cfg, tmp_path / "init")
    init.build()
    init.close()                  # its built parts stay; the folder's lock is released
    w0 = init.trainer.get_flat().detach().double()
    w1 = torch.load(out / "checkpoint.pt", weights_only=True)["w"].double()
    meta = out / "iq" / "round_0001.sigmf-meta"
    assert meta.exists(), sorted(p.name for p in out.iterdir())
    agg_file = tmp_path / "agg.npy"
    assert cli_main(["replay", str(meta), "--out", str(agg_file)]) == 0
    np.testing.assert_allclose(np.load(agg_file) * cfg.train.tau, (w1 - w0).numpy(), rtol=1e-5, atol=1e-6)
