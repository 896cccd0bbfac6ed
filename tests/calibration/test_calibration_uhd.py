"""Calibration on the uhd air takes the same code path with usrp blocks; with no USRP attached it fails
at start with the uhd air's message naming uhd_find_devices (one line, CLI exit 2), before writing a file."""
import pytest

from otafl_sdr.cli import main as cli
from otafl_sdr.calibration import PilotBurst
from otafl_sdr.calibration import procedures as P
from otafl_sdr.calibration.session import UHD_SWEEP
from otafl_sdr.radio.calibration_flowgraphs import calibrate
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import AirError, UserError
from otafl_sdr.phy.modem import Modem
from otafl_sdr.radio.calibration_flowgraphs import UhdLink, make_link
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE, find_usrps

UHD = ["data.clients=2", "air.name=uhd", "uhd.tx_args=['serial=A1', 'serial=A2']", "uhd.jammer_args=serial=J1",
       "uhd.rx_args=serial=R1"]

pytestmark = [pytest.mark.gnuradio, pytest.mark.xdist_group("uhd"),     # no USRP answers: never beside a simulator
              pytest.mark.skipif(bool(find_usrps("")), reason="a USRP is attached: the no-device path cannot be tested")]


def test_uhd_calibration_without_a_usrp_names_uhd_find_devices(tmp_path):
    cfg = load_config(None, UHD)
    link = make_link(cfg, "uhd")
    assert isinstance(link, UhdLink) and link.transmitters == 3 and link.full_scale == DAC_FULL_SCALE
    with pytest.raises(AirError) as ei:
        calibrate(cfg, ("channel",), tmp_path / "cal.toml", echo=lambda *a: None)
    msg = str(ei.value)
    assert "uhd_find_devices" in msg and "\n" not in msg
    assert not (tmp_path / "cal.toml").exists()


def test_uhd_calibration_cli_fails_in_one_line(tmp_path, capsys):
    conf = tmp_path / "lab.toml"
    conf.write_text("[data]\nclients = 2\n[air]\nname = 'uhd'\n[uhd]\ntx_args = ['serial=A1', 'serial=A2']\n"
                    "jammer_args = 'serial=J1'\nrx_args = 'serial=R1'\n")
    rc = cli.main(["calibrate", "all", "--config", str(conf), "--out", str(tmp_path / "cal.toml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("otafl-sdr: error:") and "uhd_find_devices" in err[0]


def test_default_uhd_amplitudes_fit_the_dac_and_a_loud_pilot_is_refused():
    burst = PilotBurst(Modem(load_config(None, UHD).phy))
    P.check_amplitude(burst, max(UHD_SWEEP), DAC_FULL_SCALE)
    with pytest.raises(UserError, match="beyond the DAC full scale"):
        P.check_amplitude(burst, 0.95, DAC_FULL_SCALE)
