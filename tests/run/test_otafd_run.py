"""End-to-end otafd runs (paper 003) through the orchestrator: sim and the GNU Radio loopback air."""
import json
import math

import numpy as np
import pytest

from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.experiment.orchestrator import make_experiment, resume_experiment, run_experiment

pytestmark = [pytest.mark.gnuradio]

BASE = ["run.progress=false", "run.torch_threads=1", "data.dataset=digits", "data.clients=5",
        "data.partition=dominant_class", "model.name=logreg", "train.local_epochs=2", "train.lr=0.1",
        "algorithm.name=otafd", "algorithm.options={gamma=2.0, targets='simplex'}", "power.policy=otafd_prop1",
        "power.max_snr_db=20", "privacy.accountant=otafd", "privacy.report=['paper','rdp','pld']",
        "privacy.unit=sample_paper", "privacy.targeting=paper"]     # paper 003's per-class premise: these tests check its design


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sim_run_releases_before_use_and_accounts_theorem2(tmp_path):
    cfg = load_config(None, BASE + ["run.rounds=3"])
    exp = make_experiment(cfg, tmp_path / "run")
    seen = []
    build = exp.build

    def instrumented_build():
        build()
        assert exp.parts.workload.name == "distillation"       # picked through Otafd.workload
        train = exp.trainer.train_round

        def train_round(w, targets, round, **kw):                # the devices use the targets of round t
            if targets is not None:                              # only after the ledger recorded round t
                seen.append((round, exp.ledger.rounds_recorded))
            return train(w, targets, round, **kw)
        exp.trainer.train_round = train_round
    exp.build = instrumented_build
    out = exp.run()
    s = out.summary
    assert not s["stopped_reason"] and s["rounds"] == 3
    assert seen == [(1, 1), (2, 2), (3, 3)]
    r = rows(tmp_path / "run" / "rounds.jsonl")
    ledger = rows(tmp_path / "run" / "privacy_ledger.jsonl")
    assert len(ledger) == 3
    assert all(x["channel_uses"] == 50 and x["payload_dim"] == 100 for x in r)     # C^2 / 2 complex symbols
    assert s["channel_uses_per_round"] == 50 and s["payload_dim"] == 100 and s["model_dim"] == 650
    mu2 = sum(x["mu"] ** 2 for x in r)
    assert s["eps_otafd"] == pytest.approx(math.sqrt(2 * math.log(1e5) * mu2), rel=1e-9)
    assert 0.9 < s["eps_otafd"] <= 1.0                           # Case II rounds make Theorem 2 tight
    assert s["eps_pld"] < s["eps_otafd"] and s["eps_rdp"] < s["eps_paper"]
    for x in r:
        assert x["test_accuracy_min"] <= x["test_accuracy"] <= x["test_accuracy_max"]
        assert len(x["test_accuracy_devices"]) == 5
        assert x["max_power_ratio"] <= 1.0
        assert x["aggregate_nmse"] == pytest.approx(x["aggregate_nmse_theory"], rel=1.0)
    assert r[-1]["test_accuracy"] > 0.3                          # the devices learn (10 classes)


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path):
    cfg = load_config(None, BASE + ["run.rounds=3", "power.max_snr_db=10"])
    full = run_experiment(cfg, tmp_path / "full")
    exp = make_experiment(cfg, tmp_path / "cut")
    orig = exp.run_round

    def crashing(it, *a, **k):
        row = orig(it, *a, **k)
        if it == 2:
            raise KeyboardInterrupt                               # round 2 spent, not checkpointed
        return row
    exp.run_round = crashing
    assert "interrupted" in exp.run().stopped_reason
    assert len(rows(tmp_path / "cut" / "privacy_ledger.jsonl")) == 2
    resumed = resume_experiment(tmp_path / "cut").run()
    assert not resumed.stopped_reason
    drop = ("wall_s", "air_s", "time")
    a = [{k: v for k, v in x.items() if k not in drop} for x in rows(tmp_path / "full" / "rounds.jsonl")]
    b = [{k: v for k, v in x.items() if k not in drop} for x in rows(tmp_path / "cut" / "rounds.jsonl")]
    assert [x["round"] for x in b] == [1, 2, 3]
    for xa, xb in zip(a, b):
        assert xa.keys() == xb.keys()
        for k in xa:
            if isinstance(xa[k], float):
                assert xb[k] == pytest.approx(xa[k], rel=1e-6, abs=1e-9), k
    skip = ("time", "prev", "hash")          # the hash chain covers the wall-clock time of each entry
    la = [{k: v for k, v in x.items() if k not in skip} for x in rows(tmp_path / "full" / "privacy_ledger.jsonl")]
    lb = [{k: v for k, v in x.items() if k not in skip} for x in rows(tmp_path / "cut" / "privacy_ledger.jsonl")]
    assert la == lb
    assert full.summary["eps_otafd"] == resumed.summary["eps_otafd"]


def test_loopback_run_carries_the_targets_through_gnuradio(tmp_path):
    cfg = load_config(None, BASE + ["run.rounds=2", "air.name=loopback"])
    out = run_experiment(cfg, tmp_path / "lb")
    s = out.summary
    assert not s["stopped_reason"] and s["rounds"] == 2 and s["air"] == "loopback"
    r = rows(tmp_path / "lb" / "rounds.jsonl")
    for x in r:
        assert not x["lost"]
        assert x["channel_uses"] > 50                            # the burst: payload + preamble, pilots, guards
        assert x["aggregate_nmse"] == pytest.approx(x["aggregate_nmse_theory"], rel=0.5)
        assert np.isfinite(x["test_accuracy"])
    sim = run_experiment(load_config(None, BASE + ["run.rounds=2"]), tmp_path / "sim").summary
    assert s["eps_otafd"] == pytest.approx(sim["eps_otafd"], rel=1e-9)     # same design, same spend


def test_otafd_and_its_transceiver_go_together(tmp_path):
    with pytest.raises(ConfigError, match="power.policy"):
        run_experiment(load_config(None, BASE + ["run.rounds=1", "power.policy=cj_adaptive"]), tmp_path / "a")
    with pytest.raises(ConfigError, match="power.policy"):
        run_experiment(load_config(None, BASE + ["run.rounds=1", "algorithm.name=fedavg", "algorithm.options={}"]),
                       tmp_path / "b")
    with pytest.raises(ConfigError, match="algorithm.options.gamma"):
        load_config(None, BASE + ["algorithm.options={gamma=-1.0}"])


def test_prop2_sets_the_number_of_rounds(tmp_path):
    cfg = load_config(None, BASE + ["run.rounds=7", "power.options={rounds='prop2', max_rounds=2}"])
    exp = make_experiment(cfg, tmp_path / "p2")
    s = exp.run().summary
    assert s["rounds"] == s["rounds_planned"] == s["design_rounds"] == 2 == exp.policy.T   # T* (capped), not 7
    assert exp.policy.suggested_rounds == 2
    assert 0.9 < s["eps_otafd"] <= 1.0                     # the privacy design is for those 2 rounds
