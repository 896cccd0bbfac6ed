"""The release rule through the orchestrator on both kinds of air: a run interrupted after round 1 went on the
air but before its row and checkpoint, then resumed. On the in-process zmq air (noise from OS entropy: the
re-send is a new release) round 1 is booked twice, each line naming the release it books; on the loopback
air (seeded: the re-send replays the same samples) the ledger equals the uninterrupted run's."""
from __future__ import annotations

import json

import pytest

from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.configure.load import default_experiment
from dp_reference import independent_pld_epsilon

pytestmark = [pytest.mark.gnuradio, pytest.mark.net, pytest.mark.slow]

SETS = ["run.rounds=2", "run.progress=false", "algorithm.name=fedavg", "data.dataset=digits", "data.clients=3",
        "data.classes_per_client=10", "model.hidden=16", "privacy.targeting=paper", "run.torch_threads=1"]


def _ledger(out):
    return [json.loads(ln) for ln in (out / "privacy_ledger.jsonl").read_text().splitlines() if ln.strip()]


def _interrupted_then_resumed(cfg, out):
    exp = Experiment(cfg, out, progress=False)
    orig = exp.run_round

    def crashing(it, *a, **k):
        outcome = orig(it, *a, **k)          # round 1 is recorded and on the air...
        if it == 1:
            raise KeyboardInterrupt          # ...and the process dies before its row and checkpoint
        return outcome
    exp.run_round = crashing
    assert "interrupted" in exp.run().stopped_reason
    assert not (out / "checkpoint.pt").exists() and len(_ledger(out)) == 1
    return Experiment.resume(out, progress=False).run()


@pytest.mark.parametrize("air", ["zmq_inproc", "loopback"])
def test_a_resent_round_is_booked_again_where_its_noise_is_secret(tmp_path, air):
    cfg = default_experiment(SETS + [f"air.name={air}"])
    resumed = _interrupted_then_resumed(cfg, tmp_path / "cut")
    assert not resumed.stopped_reason
    ledger = _ledger(tmp_path / "cut")
    if air == "zmq_inproc":
        assert [(x["round"], x["attempt"]) for x in ledger] == [(1, 0), (1, 1), (2, 0)]
        assert len({x["release"] for x in ledger}) == 3
        sent = [json.loads(ln)["release"] for ln in (tmp_path / "cut" / "privacy_ledger.sent").read_text().splitlines()]
        assert sent == [x["release"] for x in ledger]                      # each booking went out once
        assert any("further release (attempt 1)" in n for n in resumed.summary["notes"])
    else:
        full = Experiment(cfg, tmp_path / "full", progress=False).run()
        strip = lambda rows: [{k: v for k, v in r.items() if k not in ("time", "prev", "hash")} for r in rows]
        assert strip(ledger) == strip(_ledger(tmp_path / "full"))           # the same release, recorded once
        assert [(x["round"], x["attempt"]) for x in ledger] == [(1, 0), (2, 0)]
        assert full.summary["eps_pld"] == resumed.summary["eps_pld"]
    assert resumed.summary["eps_pld"] == pytest.approx(independent_pld_epsilon(ledger, cfg.privacy.delta), rel=1e-3)
