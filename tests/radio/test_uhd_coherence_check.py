"""`otafl-sdr calibrate coherence` (issue 34, item 4) on UHD's simulated lab with a shared reference (five
simulated E320s: three clients, the jammer, the receiver; radio/uhd_sim_lab.py): the calm lab passes, each
client's residual phase within 0.1 rad; a client's radio retuned after the calibration (a new LO phase) is
named by the check, read by each client's sounding after its frame (``air.coherence = "measure"``,
radio/appended_sounding.py), and the coherent sum's excess is its.
The same check at the start of a run (experiment/coherence_gate.py): a client retuned between the run's
calibration and its first round stops the run before anything is released, the client named (exit 4); the
resumed run, calibrated again, passes it and runs."""
import json
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.slow]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_lab_shared_ref.toml"
SHARED = {"n": 5, "oscillators": "shared_ref", "seed": 1, "advance_s": 18.0, "idle_s": 1.0}


@pytest.mark.parametrize("uhd_lab", [SHARED], indirect=True)
def test_the_check_passes_a_calm_lab_and_a_run_stops_on_a_retuned_client_until_recalibrated(
        uhd_lab, tmp_path, capsys, monkeypatch):
    report = tmp_path / "calm.json"
    rc = main(["calibrate", "coherence", "--config", str(PRESET), "--set", "run.progress=false", "--rounds", "3",
               "--out", str(report)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    v = json.loads(report.read_text())["verdict"]
    assert v["passed"] and v["sensitive"] and v["received"] == 3 and v["tracked"], v     # the preset tracks
    assert [c["client"] for c in v["clients"]] == [0, 1, 2]
    assert all(abs(c["phase_rad"]) < 0.1 for c in v["clients"]), v["clients"]
    assert "coherence check: passed" in printed and "client-1: phase" in printed
    assert main(["calibrate", "coherence", "--config", str(PRESET), "--out", str(report)]) == 2   # never overwritten
    capsys.readouterr()

    # a run measuring each client's residual: client 2's radio (the lab's radio 3) tuned again between the
    # run's calibration and its first round (a new, unknown LO phase)
    from otafl_sdr.experiment import orchestrator
    start = orchestrator.Experiment.start_transport

    def start_then_retune(self):
        start(self)
        uhd_lab.retune(3)
    monkeypatch.setattr(orchestrator.Experiment, "start_transport", start_then_retune)
    out = tmp_path / "run"
    rc = main(["run", "--quiet", "--config", str(PRESET), "--out", str(out), "--set", "run.rounds=1",
               "--set", "air.coherence=measure"])
    err = capsys.readouterr().err
    assert rc == 4, err[-2000:]                          # a radio failure: fix the lab, then resume
    assert "the coherence check before round 1 failed: client-2: residual phase" in err, err[-2000:]
    checks = [json.loads(x) for x in (out / "coherence-checks.jsonl").read_text().splitlines()]
    assert len(checks) == 1 and checks[0]["before_round"] == 1
    check = checks[0]
    assert "air.coherence=measure" in check["sets"] and "power.jammer=false" in check["sets"]
    assert all(not r["lost"] and [c["client"] for c in r["link_health"]["clients"]] == [0, 1, 2] for r in check["rounds"])
    assert all("feedback_ms" not in r["link_health"] for r in check["rounds"])     # measured after the frame
    v = check["verdict"]
    print(f"calm: ratio {json.loads(report.read_text())['verdict']['ratio']:.3f}; retuned: ratio {v['ratio']:.3f}, "
          f"phases {[round(c['phase_rad'], 3) for c in v['clients']]}")
    assert not v["passed"] and not v["tracked"]
    named = [f for f in v["failures"] if f.startswith("client-")]
    assert len(named) == 1 and named[0].startswith("client-2: residual phase"), v["failures"]
    assert not (out / "rounds.jsonl").exists() or not (out / "rounds.jsonl").read_text().strip()
    ledger = out / "privacy_ledger.jsonl"           # nothing released, nothing booked
    assert not ledger.exists() or not [x for x in ledger.read_text().splitlines() if '"uses_data": true' in x]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == 0 and summary["coherence_check"]["passed"] is False

    monkeypatch.undo()                                   # the lab fixed
    rc = main(["run", "--quiet", "--resume", str(out)])
    printed = capsys.readouterr()
    assert rc == 0, printed.err[-2000:]
    assert "coherence check       passed" in printed.out, printed.out
    checks = [json.loads(x) for x in (out / "coherence-checks.jsonl").read_text().splitlines()]
    assert len(checks) == 2 and checks[1]["verdict"]["passed"] and checks[1]["before_round"] == 1
    assert all(abs(c["phase_rad"]) < 0.1 for c in checks[1]["verdict"]["clients"]), checks[1]["verdict"]
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    assert len(rows) == 1 and not rows[0]["lost"]
    assert main(["verify", str(out)]) == 0
