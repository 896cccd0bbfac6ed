"""The jammer's delivered noise (issue 13): the calibration's jammer step measures the noise variance the
jammer delivers per unit amplitude^2 through a real GNU Radio channel (the loopback channel block, whose
jammer path is known), and a round's ledger line counts min(planned, measured lower bound)."""
import json

import numpy as np
import pytest
import torch

from otafl_sdr.cli import main as cli
from otafl_sdr.calibration.data import CalibrationFile
from otafl_sdr.calibration.csi import delivered_jammer_gain
from otafl_sdr.calibration.jammer_noise import default_amplitude, measure_jammer_noise
from otafl_sdr.radio.calibration_flowgraphs import calibrate
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import UserError
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.phy.modem import Modem
from otafl_sdr.privacy.delivered_jammer import book_jammer_noise
from otafl_sdr.privacy.ledger import read_chain
from otafl_sdr.radio.calibration_flowgraphs import LoopbackLink
from otafl_sdr.radio.uhd_air import UhdAir

pytestmark = [pytest.mark.gnuradio, pytest.mark.usefixtures("figures_not_drawn")]

torch.set_num_threads(1)
SETS = ["run.rounds=2", "run.progress=false", "data.dataset=digits", "data.clients=2", "model.name=logreg",
        "train.local_epochs=1", "run.torch_threads=1", "air.name=loopback", "power.policy=cj_adaptive",
        "power.jammer=true", "power.max_snr_db=1", "power.jammer_max_snr_db=60", "channel.jammer_fading=awgn",
        "channel.sigma_c2=1e-2", "privacy.eps=0.5", "privacy.targeting=paper", "privacy.enforce=false"]


@pytest.mark.parametrize("h_cj", [0.5, 0.1j])
def test_the_jammer_step_measures_the_channel_blocks_jammer_path(h_cj):
    cfg = load_config(None, SETS)
    link = LoopbackLink(cfg, 2, h_cj=h_cj)
    try:
        jn = measure_jammer_noise(link, Modem(cfg.phy), default_amplitude("loopback", cfg.channel.sigma_c2))
    finally:
        link.close()
    truth = abs(h_cj) ** 2
    aligned = max(jn.phase_gains)             # at the symbol-aligned phase: |h_cj|^2
    assert aligned == pytest.approx(truth, abs=4 * jn.gain_std + 0.01 * truth)
    # the gain kept is the worst phase (a jammer between the sampling instants delivers less): <= truth,
    # by at most rolloff / 2 of it; the ledger's bound lies 3 s.e. below
    assert (1 - cfg.phy.rolloff / 2 - 0.03) * truth < jn.gain <= truth
    assert jn.lower() == pytest.approx(jn.gain - 3 * jn.gain_std) and jn.gain_std < 0.02 * truth
    assert jn.sigma_c2 == pytest.approx(cfg.channel.sigma_c2, rel=0.05)


def test_the_calibration_file_keeps_the_jammer_step_and_the_uhd_air_reads_it(tmp_path):
    path = tmp_path / "cal.toml"
    cal = calibrate(load_config(None, SETS), ("noise", "jammer"), path, echo=lambda *a: None)
    back = CalibrationFile.load(path)
    assert back.jammer_noise["gain"] == pytest.approx(cal.jammer_noise["gain"])
    assert back.jammer_noise["truth"] == pytest.approx(1.0)            # awgn jammer path: h_cj = 1
    lower = delivered_jammer_gain(path)
    assert 0.7 < lower < back.jammer_noise["gain"] <= 1.0
    # the uhd air's public interface reads it from the calibration it was given (no radio opened)
    air = UhdAir(load_config(None, SETS + ["air.name=uhd"]))
    assert air.delivered_jammer_gain() is None
    air.use_calibration(path)
    assert air.delivered_jammer_gain() == pytest.approx(lower)


def test_the_jammer_step_without_a_jammer(tmp_path, capsys):
    cfg = load_config(None, SETS + ["power.jammer=false"])
    lines = []
    cal = calibrate(cfg, ("noise", "jammer"), tmp_path / "a.toml", echo=lines.append)
    assert cal.jammer_noise is None and any("step skipped" in ln for ln in lines)
    with pytest.raises(UserError, match="needs a jammer"):
        calibrate(cfg, ("jammer",), tmp_path / "b.toml", echo=lambda *a: None)
    conf = tmp_path / "lab.toml"
    conf.write_text("[data]\nclients = 2\n[power]\njammer = false\n")
    rc = cli.main(["calibrate", "jammer", "--config", str(conf), "--out", str(tmp_path / "c.toml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("otafl-sdr: error:") and "needs a jammer" in err[0]


def test_book_jammer_noise_takes_the_smaller_of_plan_and_measurement():
    sigma, rec = book_jammer_noise(sigma_eff=np.sqrt(5.0), planned_var=4.0, gain_lower=0.5, alpha_cj=2.0, alpha_u=1.0)
    assert rec["measured"] == pytest.approx(2.0) and rec["booked"] == pytest.approx(2.0)
    assert sigma == pytest.approx(np.sqrt(3.0)) and rec["source"] == "measured"
    sigma, rec = book_jammer_noise(np.sqrt(5.0), 4.0, 3.0, 2.0, 1.0)            # delivers more than planned
    assert sigma == pytest.approx(np.sqrt(5.0)) and rec["source"] == "planned"


def test_a_rounds_ledger_line_books_the_measured_jammer_noise_below_the_plan(tmp_path):
    """A calibrated loopback run (real flowgraphs) whose jammer path is static: the jammer step's lower
    bound (below |h_cj|^2 = 1) is what the ledger counts, in every round the jammer is on."""
    calfile = tmp_path / "cal.toml"
    calibrate(load_config(None, SETS), ("channel", "noise", "jammer"), calfile, echo=lambda *a: None)
    lower = delivered_jammer_gain(calfile)
    cfg = load_config(None, SETS + ["air.csi=calibrated", f"calibration.file={calfile}"])
    out = Experiment(cfg, tmp_path / "run").run()
    rows = [json.loads(ln) for ln in (out.out / "rounds.jsonl").read_text().splitlines()]
    entries, torn = read_chain(out.out / "privacy_ledger.jsonl")
    assert not torn and len(entries) == len(rows) == 2
    jammed = [(r, e) for r, e in zip(rows, entries) if r["cj_active"]]
    assert jammed, "the plan never switched the jammer on"
    for r, e in jammed:
        jn = e["extra"]["jammer_noise"]
        assert jn["power_gain_lower"] == pytest.approx(lower)
        assert jn["measured"] < jn["planned"] and jn["booked"] == jn["measured"] and jn["source"] == "measured"
        assert e["sigma_eff"] == pytest.approx(r["sigma_eff"]) and e["sigma_eff"] ** 2 > jn["booked"]
