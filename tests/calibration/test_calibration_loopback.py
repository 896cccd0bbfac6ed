"""Calibration through the real GNU Radio loopback channel (the same LoopbackChannel block, offsets and
receiver impairments as the run's loopback air): estimates against the block's ground truth."""
import numpy as np
import pytest

from otafl_sdr.calibration import DEFAULT_PILOT_LEN, PilotBurst
from otafl_sdr.calibration import procedures as P
from otafl_sdr.configure.load import load_config
from otafl_sdr.phy.modem import Modem
from otafl_sdr.radio.calibration_flowgraphs import LoopbackLink

pytestmark = [pytest.mark.gnuradio]

K = 4
SETS = ["run.seed=11", f"data.clients={K}", "loopback.client_cfo_max=2e-4", "loopback.client_delay_max=6",
        "loopback.rx_cfo=7e-5", "loopback.rx_delay=3", "loopback.rx_phase_noise=1e-5", "channel.sigma_c2=0.5"]


@pytest.fixture(scope="module")
def cfg():
    return load_config(None, SETS)


@pytest.fixture(scope="module")
def link(cfg):
    rng = np.random.default_rng(5)
    h = rng.uniform(0.8, 1.25, K) * np.exp(2j * np.pi * rng.uniform(size=K))
    with LoopbackLink(cfg, K, h=h, h_cj=0.9 * np.exp(0.4j)) as lk:
        yield lk


def test_channels_match_the_ground_truth_at_10_db_pilot_snr(cfg, link):
    """Issue 5: |h_hat - h| / |h| <= 2% at 10 dB pilot SNR with the default pilot length; delays within
    one sample; carrier offsets within 5 standard errors; reported errors consistent with the spread."""
    burst = PilotBurst(Modem(cfg.phy))
    assert burst.pilot_len == DEFAULT_PILOT_LEN
    gains = np.abs(np.append(link.h, link.h_cj))
    a = np.sqrt(2 * link.sigma_c2 * 10 ** (10 / 10)) / gains.min()     # the weakest link at 10 dB
    res = P.measure_channels(link, burst, a, repeats=1)
    assert [r.name for r in res] == [f"client {i}" for i in range(K)] + ["jammer"]
    z = []
    for r in res:
        t = r.truth
        assert r.rel_error <= 0.02, (r.name, r.rel_error)
        assert abs(r.delay - t["delay"]) < 1.0, (r.name, r.delay, t["delay"])
        assert abs(r.cfo - t["cfo"]) < 5 * r.cfo_std + 1e-9, (r.name, r.cfo, t["cfo"])
        assert r.snr_db > 9.3
        z.append(abs(r.h - t["h"]) / r.h_std)
    assert np.max(z) < 4.5
    # the truth really moves: the offsets are not trivially zero
    assert len({round(r.truth["delay"]) for r in res[:K]}) > 1
    assert np.ptp([r.truth["cfo"] for r in res[:K]]) > 1e-5


def test_noise_floor_within_5_percent(cfg, link):
    nf = P.measure_noise(link, Modem(cfg.phy))
    assert abs(nf.sigma_c2 / link.sigma_c2 - 1) < 0.05
    assert abs(nf.sigma_c2 / link.sigma_c2 - 1) < 4 * nf.sigma_c2_std / link.sigma_c2
    assert abs(nf.dc) < 0.02


def test_power_sweep_fit_is_linear_in_db(cfg, link):
    """The loopback's TX-gain stage is an exact 10^(dG/20): slopes 1 dB/dB, intercept 20 log10 |h|."""
    burst = PilotBurst(Modem(cfg.phy), 1024)
    a = np.sqrt(2 * link.sigma_c2 * 10 ** (20 / 10))
    sw = P.sweep_power(link, burst, a * np.array([0.5, 1.0, 2.0]), [34.0, 37.0, 40.0], gain_ref=40.0)
    assert set(sw.fits) == {f"client {i}" for i in range(K)} | {"jammer"}
    for i in range(K):
        f = sw.fits[f"client {i}"]
        assert f.k_amp == pytest.approx(1.0, abs=0.03) and f.k_gain == pytest.approx(1.0, abs=0.03)
        assert f.c0_db == pytest.approx(20 * np.log10(abs(link.h[i])), abs=0.2)
        assert f.used.all() and f.rms_db < 0.2
    assert link._gain_db == 40.0                              # left at the run's TX gain


def test_cli_steps_fill_one_file_with_plots_and_a_run_accepts_it(tmp_path, capsys):
    """`otafl-sdr calibrate channel`, then `noise`, then `power` into one file (each step keeps the
    others), plots written; the file then serves a calibrated run of the same config."""
    from otafl_sdr.cli import main as cli
    from otafl_sdr.calibration.data import CalibrationFile
    from otafl_sdr.calibration.csi import CalibratedCsi

    conf = tmp_path / "run.toml"
    conf.write_text("[run]\nseed = 2\n[data]\nclients = 2\n[loopback]\nclient_delay_max = 3\nclient_cfo_max = 1e-4\n")
    out, plots = tmp_path / "cal.json", tmp_path / "plots"
    base = ["--config", str(conf), "--out", str(out), "--plots", str(plots)]
    assert cli.main(["calibrate", "channel", *base]) == 0
    assert cli.main(["calibrate", "noise", *base]) == 0
    assert cli.main(["calibrate", "power", *base, "--sweep-gains", "38,40"]) == 0
    text = capsys.readouterr().out
    assert "client 1" in text and "jammer" in text and "noise floor: sigma_c2" in text and "power client 0" in text
    cal = CalibrationFile.load(out)
    assert len(cal.clients) == 2 and cal.jammer is not None and cal.noise and set(cal.power) == {"client 0", "client 1", "jammer"}
    assert all(abs(c.h / c.truth["h"] - 1) < 0.02 for c in cal.clients)
    for name in ("pilot_constellation.png", "channel_estimates.png", "power_sweep.png"):
        assert (plots / name).stat().st_size > 10_000
    run = load_config(conf, ["air.name=loopback", "air.csi=calibrated", f"calibration.file={out}"])
    csi = CalibratedCsi.for_run(run, 2)
    assert csi.sigma_c2 == pytest.approx(1.0, rel=0.05)
