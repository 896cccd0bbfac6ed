"""`otafl-sdr node ... --air uhd` arguments (issue 13, item 4): which radio each node drives, and the
one-line refusals of arguments that do not fit the node."""
import pytest

from otafl_sdr.cli.main import main as cli_main
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.net.uhd_port import device_args

pytestmark = [pytest.mark.net]


def test_each_node_takes_its_own_radio_from_the_run_config():
    cfg = load_config(None, ["air.name=uhd", "data.clients=2", "power.jammer=true",
                             "uhd.tx_args=['serial=A','serial=B,channel=1']", "uhd.jammer_args=serial=J",
                             "uhd.rx_args=serial=R"])
    assert device_args(cfg, "client", 1) == ("uhd.tx_args[1]", "serial=B,channel=1")
    assert device_args(cfg, "jammer") == ("uhd.jammer_args", "serial=J")
    assert device_args(cfg, "receiver") == ("uhd.rx_args", "serial=R")
    with pytest.raises(ConfigError, match=r"client 2 has no radio there"):
        device_args(cfg, "client", 2)


@pytest.mark.parametrize("argv", [
    ["node", "client", "--server", "tcp://127.0.0.1:9", "--id", "0", "--device-args", "addr=10.0.0.2"],
    ["node", "jammer", "--server", "tcp://127.0.0.1:9", "--air", "zmq", "--device-args", "addr=10.0.0.2"],
])
def test_device_args_outside_a_uhd_radio_node_is_refused_in_one_line(argv, capsys):
    assert cli_main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "--device-args is for client, jammer and receiver nodes with --air uhd" in err[0]
