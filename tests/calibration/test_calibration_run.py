"""A run with air.csi = "calibrated" loads the calibration file and uses it: the clients pre-invert with
their estimated h_i, pre-compensate the measured carrier offsets and delays (real loopback flowgraphs),
and the measured sigma_c2 is exposed for the privacy ledger."""
import json

import numpy as np
import pytest
import torch

from otafl_sdr.radio.calibration_flowgraphs import calibrate
from otafl_sdr.calibration.data import CalibrationFile
from otafl_sdr.calibration.csi import CalibratedCsi
from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.orchestrator import Experiment

pytestmark = [pytest.mark.gnuradio, pytest.mark.usefixtures("figures_not_drawn")]

torch.set_num_threads(1)
SETS = ["run.rounds=3", "run.progress=false", "data.dataset=digits", "data.clients=4", "model.hidden=16",
        "train.local_epochs=1", "run.torch_threads=1", "air.name=loopback", "loopback.client_cfo_max=1e-4",
        "loopback.client_delay_max=3", "loopback.rx_delay=2", "power.max_snr_db=20", "power.jammer=false",
        "privacy.enforce=false", "channel.sigma_c2=1e-4",
        "privacy.targeting=paper"]   # same alpha_u with perfect and estimated CSI: the comparison is of the CSI alone


@pytest.fixture(scope="module")
def calfile(tmp_path_factory):
    d = tmp_path_factory.mktemp("cal")
    calibrate(load_config(None, SETS), ("channel", "noise"), d / "cal.toml", pilot_snr_db=10,
                    echo=lambda *a: None)
    return d / "cal.toml"


def _run(tmp_path, csi, calfile, name):
    cfg = load_config(None, SETS + [f"air.csi={csi}", f"calibration.file={calfile}"])
    exp = Experiment(cfg, tmp_path / name)
    out = exp.run()
    rows = [json.loads(line) for line in (out.out / "rounds.jsonl").read_text().splitlines()]
    return exp, np.array([r["aggregate_nmse"] for r in rows])


def test_calibrated_run_uses_the_file(tmp_path, calfile):
    cal = CalibrationFile.load(calfile)
    exp_p, nmse_p = _run(tmp_path, "perfect", calfile, "perfect")
    exp_c, nmse_c = _run(tmp_path, "calibrated", calfile, "calibrated")
    assert exp_p.csi is None
    csi = exp_c.csi
    assert isinstance(csi, CalibratedCsi)
    # the measured noise floor, for the server's ledger (channel block: 1e-4)
    assert csi.sigma_c2 == cal.noise["sigma_c2"] and abs(csi.sigma_c2 / 1e-4 - 1) < 0.05
    # pre-inversion with the estimate: h (1 + e_i), e_i the calibration's measured error
    h, _ = exp_c.draw_channels(2)
    est = csi.estimates(2, h)
    e = np.array([c.h / c.truth["h"] - 1 for c in cal.clients])
    np.testing.assert_allclose(est, h * (1 + e))
    assert np.all(np.abs(e) > 0) and np.all(np.abs(e) < 0.02)
    # carrier offsets and delays: the clients pre-compensate the measured values, the channel applies the true
    air = exp_c.air
    np.testing.assert_allclose(air._tx_cfo, [c.cfo for c in cal.clients])
    assert not np.array_equal(air._tx_cfo, air._off["cfo"])
    assert np.max(np.abs(air._tx_cfo - air._off["cfo"])) < 2e-6
    arrival = air._start + air._off["delay"]                     # every burst arrives together
    assert np.ptp(arrival) == 0
    np.testing.assert_array_equal(exp_p.air._tx_cfo, exp_p.air._off["cfo"])
    # the aggregate is as good as with perfect CSI (10 dB calibration), and not identical to it
    assert np.all(nmse_c != nmse_p)
    assert np.all(np.abs(nmse_c / nmse_p - 1) < 0.1)


def test_a_wrong_calibration_shows_in_the_aggregate(tmp_path, calfile):
    """Proof that the estimate, not the truth, drives the clients: a file whose estimates are 30% high
    (edited ground truth) shrinks the aggregate by 1/1.3."""
    cal = CalibrationFile.load(calfile)
    for c in cal.clients:
        c.truth["h"] = c.h / 1.3
    cal.save(tmp_path / "wrong.toml")
    _, nmse_p = _run(tmp_path, "perfect", calfile, "p")
    _, nmse_w = _run(tmp_path, "calibrated", tmp_path / "wrong.toml", "w")
    assert np.all(nmse_w > nmse_p + 0.5 * (1 - 1 / 1.3) ** 2)


def test_ledger_sensitivity_bounds_the_real_gain_with_estimated_csi(tmp_path, calfile):
    """Clients pre-invert with h_hat = h (1 + e): the real gain |h alpha| / alpha_u exceeds the planned one
    by up to 1/|1 + e|; the ledger's sensitivity (scaled by the calibration's 3-sigma gain margin) stays
    above the real-gain sensitivity in every round."""
    from otafl_sdr import seeding
    cfg = load_config(None, SETS + ["air.csi=calibrated", f"calibration.file={calfile}", "privacy.unit=client"])
    exp = Experiment(cfg, tmp_path / "m")
    exp.build()
    exp.close()                  # its built parts stay; the folder's lock is released
    b = exp.info.payload_bound()
    u = np.random.default_rng(0).normal(size=(exp.K, exp.dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    ratios = []
    for it in range(1, 30):
        h, h_cj = exp.draw_channels(it)
        plan = exp.policy.plan(it, u, h, h_cj, seeding.rng(0, "p", it), csi=exp.csi.estimates(it, h))
        planned = plan.mechanism.sensitivity
        safe = exp.ledger_mechanism(plan).sensitivity
        real = float(np.max(np.abs(plan.h * plan.alpha) / plan.alpha_u * b))
        assert real <= safe * (1 + 1e-12), (it, real, safe)
        ratios.append(real / planned)
    assert max(ratios) > 1.0        # the planned gains alone would have under-stated some rounds
