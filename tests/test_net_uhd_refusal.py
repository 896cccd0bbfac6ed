"""The testbed's server and a `uhd` run (issue 13, item 3): no node role can carry a uhd round yet (the
per-radio timed-burst path is not built), so its nodes can never register ready; the server refuses at
start in one line, leaves no folder and does not wait out its start-up time for them."""
import time
from pathlib import Path

from otafl_sdr.cli import main as cli_main

PRESET = Path(__file__).resolve().parent.parent / "sim_loopback" / "presets" / "uhd_sim.toml"


def test_the_server_refuses_a_uhd_run_whose_nodes_cannot_be_reached(tmp_path, capsys):
    out = tmp_path / "run"
    t0 = time.monotonic()
    rc = cli_main(["node", "server", "--config", str(PRESET), "--out", str(out), "--set", "power.jammer=true",
                   "--set", "uhd.jammer_args=addr=127.0.0.1,channel=1"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("otafl-sdr: error:"), err
    assert "client, jammer, receiver nodes have no per-radio uhd path" in err[0] and "otafl-sdr run" in err[0]
    assert not out.exists() and time.monotonic() - t0 < 60

