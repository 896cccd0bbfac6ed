"""A whole `otafl-sdr run` with phy.waveform = "ofdm" on the sim and loopback airs under a TDL channel: every
client round goes through the per-subcarrier plan (power/ofdm_plan.py), the rows carry the OFDM airtime and
the aggregate's NMSE against its theory, and `otafl-sdr verify` re-derives every booked figure (the
per-subcarrier mechanism is planned by the same hook in the round, the dry run and the re-derivation)."""
import json

import pytest

from otafl_sdr.cli.main import main

OFDM = ["--set", "phy.waveform=ofdm", "--set", "phy.ofdm_cp=24", "--set", "channel.multipath=tdl-a",
        "--set", "channel.delay_spread_ns=2000", "--set", "run.rounds=2", "--set", "data.dataset=digits"]


def _run(tmp_path, capsys, air):
    out = tmp_path / air
    rc = main(["run", "--air", air, "--out", str(out), "--quiet", *OFDM])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    ledger = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    data = [r for r in rows if r.get("aggregate_nmse") is not None]
    assert len(data) == 2
    for r in data:
        assert 0.9 < r["aggregate_nmse"] / r["aggregate_nmse_theory"] < 1.2
        assert r["channel_uses"] > 0
        # beside it, the link's own error against the aggregate the plan carries (truncation and the
        # per-subcarrier gains left out of the reference): its theory is the booked noise alone
        assert 0.8 < r["aggregate_nmse_planned"] / r["aggregate_nmse_planned_theory"] < 1.25
    booked = [x for x in ledger if x["uses_data"]]
    assert len(booked) == 2 and all(x["extra"]["waveform"] == "ofdm" for x in booked)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "OK" in capsys.readouterr().out


@pytest.mark.experiment
def test_ofdm_run_on_sim_verifies(tmp_path, capsys):
    _run(tmp_path, capsys, "sim")


@pytest.mark.gnuradio
def test_ofdm_run_on_loopback_verifies(tmp_path, capsys):
    _run(tmp_path, capsys, "loopback")
