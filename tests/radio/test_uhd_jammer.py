"""The jammer's delivered noise on UHD's simulated E320 (issue 13, item 1): a client on TX channel 0, the
jammer on TX channel 1, the simulator's cable attenuating channel 1 (amplitude 0.5, power 0.25). The run's
own calibration measures the jammer's delivered noise (a Gaussian test signal from OS entropy in a
jammer-only slot) and every round's ledger line counts the measured noise, below the plan's; the jammer
is designed on its calibrated path."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main as cli_main
from otafl_sdr.privacy.ledger import read_chain
from uhd_sim_helpers import fresh_simulator

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"
TX1_GAIN = 0.5


@pytest.fixture
def uhd_sim_attenuated(tmp_path):
    """A fresh simulator whose cable attenuates TX channel 1, gone before the next test."""
    with fresh_simulator(tmp_path, tx1_gain=TX1_GAIN) as sim:
        yield sim


def test_the_ledger_counts_the_jammers_measured_noise_below_the_plan(uhd_sim_attenuated, tmp_path, capsys):
    """The CLI's `run` in this process (the answer, not the process boundary, is under test)."""
    out = tmp_path / "run"
    rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out),
                   "--set", "run.rounds=2", "--set", "power.jammer=true", "--set", "privacy.targeting=paper",
                   "--set", "privacy.eps=2",          # the jammer needed at eps 1 through the attenuator passes the DAC
                   "--set", "uhd.tx_args=['addr=127.0.0.1,channel=0']", "--set", "uhd.jammer_args=addr=127.0.0.1,channel=1"])
    assert rc == 0, capsys.readouterr().err
    cal = json.loads((out / "calibration.json").read_text())
    jn = cal["jammer_noise"]
    truth = TX1_GAIN ** 2
    # at the symbol-aligned phase the jammer delivers the cable's power gain; the worst phase (what the
    # ledger may count at any sampling instant) is lower by up to rolloff / 2
    assert max(jn["phase_gains"]) == pytest.approx(truth, rel=0.05)
    assert 0.8 * truth < jn["gain"] < truth and 0 < jn["gain_std"] < 0.02 * truth
    assert jn["sigma_c2"] == pytest.approx(cal["noise"]["sigma_c2"], rel=0.1)
    assert abs(complex(*cal["jammer"]["h"])) == pytest.approx(TX1_GAIN, rel=0.05)    # the pilot sees it too
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines()]
    entries, torn = read_chain(out / "privacy_ledger.jsonl")
    # each round's booking; a round whose jammer measured below it (privacy/jammer_shortfall.py: about half the
    # calm rounds, by about a standard error) has its charge line after it, and its row says so
    charges = [e for e in entries if "jammer_shortfall" in e["extra"]]
    entries = [e for e in entries if "jammer_shortfall" not in e["extra"]]
    assert not torn and len(entries) == len(rows) == 2
    assert sorted(c["round"] for c in charges) == [r["round"] for r in rows if r["jammer_charged_bound"] is not None]
    for row, e in zip(rows, entries):
        assert row["cj_active"] and not row["lost"]
        # alpha_cj is designed on the calibrated jammer path (not the simulation's draw): the measured
        # aggregate error is what the plan predicts
        assert row["aggregate_nmse"] == pytest.approx(row["aggregate_nmse_theory"], rel=0.25)
        booked = e["extra"]["jammer_noise"]
        assert booked["power_gain_lower"] == pytest.approx(jn["gain"] - 3 * jn["gain_std"])
        assert booked["measured"] < booked["planned"] and booked["booked"] == booked["measured"]
        assert booked["source"] == "measured" and e["sigma_eff"] == pytest.approx(row["sigma_eff"])
