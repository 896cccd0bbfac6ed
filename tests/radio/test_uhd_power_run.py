"""A uhd run's transmit power on UHD's simulator (issue 25, item 6): the default preset keeps every round at
tx_scale 1 (its bursts are what they were); a peaky plan is scaled by a planned, recorded factor and the run
continues, its ledger verifying and its eps rechecked with dp-accounting; a plan into the compressed region
of the power fit is refused before any round, in one line naming the radio and by how many dB."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dp_reference import independent_pld_epsilon

from otafl_sdr.cli.main import main as cli_main
from otafl_sdr.privacy.ledger import read_chain

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_sim.toml"


def _rows(out):
    return [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines()]


def test_the_default_preset_is_unscaled_and_a_peaky_plan_is_scaled_and_recorded(uhd_sim, tmp_path):
    out = tmp_path / "default"
    assert cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out)]) == 0
    for r in _rows(out):                                  # the preset: planned peak under full scale, linear radio
        assert r["tx_scale"] == 1.0 and r["pa_correction"] == [1.0] and not r["lost"]
        assert r["planned_peak_dbfs"] < 0
        assert r["aggregate_nmse"] == pytest.approx(r["aggregate_nmse_theory"], rel=0.25)

    peaky = tmp_path / "peaky"                            # a 30 dB PAPR budget: the planned peak passes the DAC
    assert cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(peaky), "--set", "run.rounds=3",
                     "--set", "uhd.payload_papr_db=30", "--set", "air.record_iq=true"]) == 0
    rows = _rows(peaky)
    assert len(rows) == 3
    for r in rows:
        assert not r["lost"] and 0 < r["tx_scale"] < 1
        # planned, never the data's: the plan's peak |alpha| / sqrt(n sps) x 12 dB brought to full scale
        assert r["planned_peak_dbfs"] == pytest.approx(0.0, abs=1e-9)
        # the receiver divided by f alpha_u: the aggregate is the planned one with the channel noise / f
        assert r["aggregate_nmse"] == pytest.approx(r["aggregate_nmse_theory"] / r["tx_scale"] ** 2, rel=0.3)
    print(f"\npeaky plan: tx_scale {[round(r['tx_scale'], 4) for r in rows]}, nmse / theory "
          f"{[round(r['aggregate_nmse'] / r['aggregate_nmse_theory'], 3) for r in rows]}")
    # the recording carries alpha_u as the payload went out (x tx_scale): replayed offline, the aggregate's
    # measured noise is the booked sigma_eff / tx_scale
    from otafl_sdr.experiment.replay import replay
    rep = replay(peaky / "iq" / "round_0001.sigmf-meta")
    assert rep["ok"] and rep["sigma_eff_measured"] == pytest.approx(rows[0]["sigma_eff"] / rows[0]["tx_scale"], rel=0.2)
    assert cli_main(["verify", str(peaky)]) == 0
    entries, torn = read_chain(peaky / "privacy_ledger.jsonl")
    assert len(entries) == 3 and not torn
    summary = json.loads((peaky / "summary.json").read_text())
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(entries, 1e-5), rel=1e-3)


def test_a_plan_into_the_power_fits_compression_is_refused_before_any_round(tmp_path, capsys):
    from uhd_sim_helpers import fresh_simulator
    cal = tmp_path / "cal.json"
    sets = ["--set", "uhd.tx_gain=46"]              # the cable x2.8 at 46 dB (reference 37): the sweep's 0.8 clips
    # the simulator's int16 ADC (> 1 dB), and a plan with a 36 dB PAPR budget peaks past that drive
    with fresh_simulator(tmp_path, tx_gain_ref=37.0):
        assert cli_main(["calibrate", "all", "--config", str(PRESET), "--air", "uhd", "--out", str(cal),
                         "--sweep-amplitudes", "0.05,0.1,0.2,0.4,0.8", *sets]) == 0
        power = json.loads(cal.read_text())["power"]
        fit = next(iter(power.values()))
        assert any(not row[3] for row in fit["table"])     # the simulator's int16 ADC saturated: compressed points
        capsys.readouterr()
        # at 30 dB of PAPR budget the run's own plan fits while the coherence check's 20 dB plan would drive the
        # PA into compression: the check is not run (the table says why) and the run goes on (first: the refused
        # run below leaves UHD's simulator unable to open its radios again)
        fits = tmp_path / "fits"
        assert cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(fits), *sets, "--set", "run.rounds=1",
                         "--set", "calibration.session=false", "--set", f"calibration.file={cal}",
                         "--set", "uhd.payload_papr_db=30"]) == 0
        check = json.loads((fits / "summary.json").read_text())["coherence_check"]
        assert check["passed"] is None and "plan was refused" in check["not_run"] and "compression" in check["not_run"]
        assert "coherence check       not run: its 20 dB plan was refused" in capsys.readouterr().out
        assert len(_rows(fits)) == 1 and not _rows(fits)[0]["lost"]
        out = tmp_path / "run"
        rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out), *sets,
                       "--set", "calibration.session=false", "--set", f"calibration.file={cal}",
                       "--set", "uhd.payload_papr_db=36"])
        cap = capsys.readouterr()
    err = (cap.err + cap.out).strip().splitlines()
    assert rc != 0
    line = next(ln for ln in err if "compression" in ln)
    assert "client-0 would drive its PA" in line and "dB into compression" in line and rc == 2
    assert not (out / "rounds.jsonl").exists() or not _rows(out)
    entries = read_chain(out / "privacy_ledger.jsonl")[0] if (out / "privacy_ledger.jsonl").exists() else []
    assert not [e for e in entries if e.get("uses_data")]
    print(f"\nrefused: {line}")
    assert np.isfinite(float(line.split("PA ")[1].split(" dB")[0]))
