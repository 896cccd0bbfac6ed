"""The calibration file: save/load (TOML, JSON), refusal of a file that does not match the run, the age
warning, missing and corrupt files (never a silent fall-back to perfect CSI), and the CLI's one-line
errors (exit status 2)."""
import json
import logging
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from otafl_sdr.cli import main as cli
from otafl_sdr.calibration.data import CalibrationFile, LinkRecord, check_matches, merge, run_setup
from otafl_sdr.calibration.csi import CalibratedCsi, known_offsets
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError, UserError

K = 3
BASE = ["run.seed=5", f"data.clients={K}", "loopback.client_delay_max=4", "loopback.client_cfo_max=1e-4"]
UHD = ["air.name=uhd", "power.jammer=true", "uhd.tx_args=['serial=A1,clock_source=external', 'serial=A2', 'serial=A3']",
       "uhd.jammer_args=serial=J1", "uhd.rx_args=serial=R1"]


def make_file(cfg, air="loopback", age_days=0.0, noise=True, clients=True):
    rng = np.random.default_rng(0)
    recs = []
    for i in range(K):
        h = complex(rng.standard_normal() + 1j * rng.standard_normal())
        truth = {"h": h * (1 - 0.01j), "cfo": 1e-5 * i, "delay": float(i)} if air == "loopback" else None
        recs.append(LinkRecord(id=f"client {i}", h=h, h_std=0.004, cfo=1e-5 * i + 1e-7, cfo_std=1e-7,
                               delay=2.0 + i + 0.02, snr_db=12.0, truth=truth))
    created = (datetime.now(timezone.utc) - timedelta(days=age_days)).isoformat(timespec="seconds")
    return CalibrationFile(air=air, setup=run_setup(cfg, K, air), created=created, pilots={"length": 4096},
                           clients=recs if clients else None,
                           jammer=LinkRecord(id="jammer", h=0.5 + 0.5j, h_std=0.01,
                                             truth={"h": 0.5 + 0.49j, "cfo": 0.0, "delay": 0.0} if air == "loopback" else None),
                           noise={"sigma_c2": 0.98, "sigma_c2_std": 0.005, "sigma_c2_raw": 0.99, "dc": 0.001 + 0j,
                                  "symbols": 32000} if noise else None)


def run_cfg(tmp_path, extra=(), name="cal.toml"):
    return load_config(None, BASE + ["air.csi=calibrated", f"calibration.file={tmp_path / name}", *extra])


@pytest.mark.parametrize("ext", ["toml", "json"])
def test_save_load_round_trip_and_csi(tmp_path, ext):
    cfg = run_cfg(tmp_path, name=f"cal.{ext}")
    cal = make_file(cfg)
    cal.save(tmp_path / f"cal.{ext}")
    back = CalibrationFile.load(tmp_path / f"cal.{ext}")
    assert back.to_dict() == cal.to_dict()
    csi = CalibratedCsi.for_run(cfg, K)
    assert csi.sigma_c2 == 0.98 and csi.sigma_c2_std == 0.005
    np.testing.assert_allclose(csi.h, [c.h for c in cal.clients])
    np.testing.assert_allclose(csi.delay, [0.0, 1.0, 2.0])
    # loopback: the calibration's relative error carried onto the round's true channel
    h = np.array([1 + 1j, -0.5j, 2.0])
    e = np.array([c.h / c.truth["h"] - 1 for c in cal.clients])
    np.testing.assert_allclose(csi.estimates(7, h), h * (1 + e))
    assert np.all(np.abs(csi.estimates(7, h) - h) > 0)
    assert csi.jammer_estimate(1.0) == pytest.approx((0.5 + 0.5j) / (0.5 + 0.49j))
    cfo, delay = known_offsets(cfg, K)
    # offsets within 3 standard errors are noise and not compensated (client 0: 1e-7 +- 1e-7)
    np.testing.assert_allclose(cfo, [c.cfo if abs(c.cfo) > 3 * c.cfo_std else 0.0 for c in cal.clients])
    assert cfo[0] == 0.0 and cfo[1] != 0.0
    assert delay.tolist() == [0, 1, 2] and delay.dtype.kind == "i"


def test_uhd_file_gives_the_static_calibrated_channel(tmp_path):
    cfg = run_cfg(tmp_path, UHD)
    cal = make_file(cfg, air="uhd")
    cal.save(tmp_path / "cal.toml")
    csi = CalibratedCsi.for_run(cfg, K)
    assert cal.setup["devices"]["clients"][0] == "serial=A1"        # clock keys do not name a radio
    np.testing.assert_allclose(csi.estimates(3, np.ones(K)), csi.h)
    assert csi.rel_error is None and csi.jammer_estimate(1.0) == 0.5 + 0.5j


@pytest.mark.parametrize("override, words", [
    ("uhd.freq=868e6", "915 MHz"), ("uhd.rate=2e6", "uhd.rate"), ("uhd.tx_gain=30", "tx_gain"),
    ("uhd.rx_gain=20", "rx_gain"), ("data.clients=4", "holds 3 clients"), ("run.seed=6", "run.seed"),
    ("loopback.rx_cfo=1e-4", "loopback.rx_cfo"), ("channel.sigma_c2=2.0", "channel.sigma_c2"),
])
def test_a_file_for_another_setup_is_refused(tmp_path, override, words):
    make_file(run_cfg(tmp_path)).save(tmp_path / "cal.toml")
    cfg = run_cfg(tmp_path, [override])
    with pytest.raises(UserError) as ei:
        CalibratedCsi.for_run(cfg, cfg.data.clients)
    msg = str(ei.value)
    assert words in msg and "\n" not in msg and "does not match the run" in msg


def test_other_radios_or_another_air_are_refused(tmp_path):
    make_file(run_cfg(tmp_path, UHD), air="uhd").save(tmp_path / "cal.toml")
    other = UHD[:2] + ["uhd.tx_args=['serial=A1', 'serial=B2', 'serial=A3']"] + UHD[3:]
    with pytest.raises(UserError, match=r"client 1 was radio 'serial=A2', uhd.tx_args\[1\] is 'serial=B2'"):
        CalibratedCsi.for_run(run_cfg(tmp_path, other), K)
    with pytest.raises(UserError, match="the receiver was radio"):
        CalibratedCsi.for_run(run_cfg(tmp_path, UHD + ["uhd.rx_args=serial=R9"]), K)
    with pytest.raises(UserError, match="measured on the 'uhd' air but the run uses 'loopback'"):
        CalibratedCsi.for_run(run_cfg(tmp_path, ["air.name=loopback"]), K)


def test_an_old_file_warns_in_one_line(tmp_path, caplog):
    cfg = run_cfg(tmp_path, ["calibration.max_age_days=7"])
    make_file(cfg, age_days=10).save(tmp_path / "cal.toml")
    with caplog.at_level(logging.WARNING, logger="otafl_sdr.calibration"):
        CalibratedCsi.for_run(cfg, K)
    warns = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "10.0 days old" in warns[0] and "max_age_days = 7" in warns[0] and "\n" not in warns[0]
    caplog.clear()
    make_file(cfg, age_days=1).save(tmp_path / "cal.toml")
    with caplog.at_level(logging.WARNING, logger="otafl_sdr.calibration"):
        CalibratedCsi.for_run(cfg, K)
    assert not caplog.records


def test_missing_file_or_key_is_an_error_not_perfect_csi(tmp_path):
    with pytest.raises(UserError, match="not found; make one with `otafl-sdr calibrate all"):
        CalibratedCsi.for_run(run_cfg(tmp_path), K)
    cfg = load_config(None, BASE + ["air.csi=calibrated"])
    with pytest.raises(ConfigError, match="calibration.file"):
        CalibratedCsi.for_run(cfg, K)


CORRUPT = {
    "garbage.toml": b"\x00\x01\xff\xfe not toml",
    "bad.toml": b"format = 'otafl-sdr calibration'\nversion = [",
    "bad.json": b"{\"format\": ",
    "nokeys.toml": b"format = 'otafl-sdr calibration'\nversion = 1\n",
    "wrongformat.toml": b"format = 'something else'\n",
    "list.json": b"[1, 2, 3]",
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_files_are_clear_errors(tmp_path, name):
    (tmp_path / name).write_bytes(CORRUPT[name])
    with pytest.raises(UserError) as ei:
        CalibratedCsi.for_run(run_cfg(tmp_path, name=name), K)
    assert "is corrupt" in str(ei.value) and name in str(ei.value) and "\n" not in str(ei.value)


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["clients"][0].update(h=[float("nan"), 0.0]), "not finite"),
    (lambda d: d["clients"][1].update(h=[0.0, 0.0]), "zero"),
    (lambda d: d["noise"].update(sigma_c2=-1.0), "noise.sigma_c2"),
    (lambda d: d["clients"][2].pop("truth"), "ground truth"),
    (lambda d: d.update(created="yesterday"), "corrupt"),
    (lambda d: d["setup"].pop("freq"), "corrupt"),
])
def test_bad_values_inside_a_well_formed_file(tmp_path, edit, words):
    cfg = run_cfg(tmp_path, name="cal.json")
    d = make_file(cfg).to_dict()
    edit(d)
    (tmp_path / "cal.json").write_text(json.dumps(d))
    with pytest.raises(UserError, match=words):
        CalibratedCsi.for_run(cfg, K)


def test_missing_sections_name_the_step_to_run(tmp_path):
    cfg = run_cfg(tmp_path)
    make_file(cfg, noise=False).save(tmp_path / "cal.toml")
    with pytest.raises(UserError, match="no noise floor; run `otafl-sdr calibrate noise"):
        CalibratedCsi.for_run(cfg, K)
    make_file(cfg, clients=False).save(tmp_path / "cal.toml")
    with pytest.raises(UserError, match="no channel estimates; run `otafl-sdr calibrate channel"):
        CalibratedCsi.for_run(cfg, K)


def test_merge_keeps_the_other_sections_and_the_older_date(tmp_path):
    cfg = run_cfg(tmp_path)
    old = make_file(cfg, noise=False, age_days=3)
    new = make_file(cfg, clients=False)
    new.jammer = None
    m = merge(old, new)
    assert m.clients == old.clients and m.noise == new.noise and m.jammer == old.jammer
    assert m.age_days() == pytest.approx(3, abs=0.01)
    check_matches(m, cfg, K)


def _cli(argv, capsys):
    rc = cli.main(argv)
    return rc, capsys.readouterr().err.strip().splitlines()


@pytest.mark.gnuradio          # 'calibrate noise' reaches radio/calibration_flowgraphs (GNU Radio) before reading --out
def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    conf = tmp_path / "run.toml"
    conf.write_text(f"[run]\nseed = 5\n[data]\nclients = {K}\n")
    rc, err = _cli(["calibrate", "channel", "--config", str(conf), "--out", str(tmp_path / "cal.txt")], capsys)
    assert rc == 2 and len(err) == 1 and "use a .toml or .json name" in err[0]
    (tmp_path / "broken.toml").write_text("format = [")
    rc, err = _cli(["calibrate", "noise", "--config", str(conf), "--out", str(tmp_path / "broken.toml")], capsys)
    assert rc == 2 and len(err) == 1 and "is corrupt" in err[0] and "choose another --out" in err[0]
    other = make_file(run_cfg(tmp_path, ["uhd.freq=2.45e9"]))
    other.save(tmp_path / "other.toml")
    rc, err = _cli(["calibrate", "noise", "--config", str(conf), "--out", str(tmp_path / "other.toml")], capsys)
    assert rc == 2 and len(err) == 1 and "does not match the run" in err[0]
    rc, err = _cli(["calibrate", "channel", "--config", str(conf), "--out", str(tmp_path / "c.toml"),
                    "--repeats", "0"], capsys)
    assert rc == 2 and len(err) == 1 and "--repeats" in err[0]


def test_cli_run_with_a_missing_calibration_fails_in_one_line(tmp_path, capsys):
    conf = tmp_path / "run.toml"
    conf.write_text(f"[run]\nrounds = 1\nprogress = false\n[data]\nclients = {K}\ndataset = 'digits'\n"
                    f"[model]\nhidden = 8\n[air]\ncsi = 'calibrated'\n[calibration]\nfile = '{tmp_path / 'none.toml'}'\n")
    rc, err = _cli(["run", "--config", str(conf), "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert rc == 2 and len(err) == 1 and "none.toml' not found" in err[0]


def test_fractional_offsets_and_burst_precompensation(tmp_path):
    """The uhd air's pre-compensation: fractional delays (tx_time is finer than a sample) and a burst
    rotated by the measured carrier offset, so that the offset cancels on the air."""
    from otafl_sdr.calibration.csi import precompensate
    cfg = run_cfg(tmp_path)
    make_file(cfg).save(tmp_path / "cal.toml")
    cfo, delay = known_offsets(cfg, K, whole=False)
    np.testing.assert_allclose(delay, [0.0, 1.0, 2.0])
    x = np.exp(1j * np.linspace(0, 3, 500))
    y, t = precompensate(x, 2e-4, 1.5, 1e6, 10.0)
    assert t == pytest.approx(10.0 - 1.5e-6)
    n = np.arange(500)
    np.testing.assert_allclose(y * np.exp(2j * np.pi * 2e-4 * n), x)      # the channel's offset undoes it


def test_uhd_channel_phases_older_than_the_limit_are_refused(tmp_path):
    """An AD936x draws a new LO phase whenever it is tuned: a uhd calibration file older than
    calibration.max_phase_age_min is refused (one line), a fresh one is taken."""
    import dataclasses as dc
    from datetime import datetime, timedelta, timezone
    cfg = run_cfg(tmp_path, UHD)
    fresh = make_file(cfg, air="uhd")
    fresh.save(tmp_path / "cal.toml")
    assert CalibratedCsi.for_run(cfg, K).clients == K
    old = dc.replace(fresh, created=(datetime.now(timezone.utc) - timedelta(minutes=45)).isoformat(timespec="seconds"))
    old.save(tmp_path / "cal.toml")
    with pytest.raises(UserError, match=r"channel phases are 45 min old.*calibration.session") as ei:
        CalibratedCsi.for_run(cfg, K)
    assert "\n" not in str(ei.value)
    relaxed = run_cfg(tmp_path, UHD + ["calibration.max_phase_age_min=60"])
    assert CalibratedCsi.for_run(relaxed, K).clients == K
