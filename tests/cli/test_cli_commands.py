"""The small CLI commands: list, config, account, report."""
import tomllib

import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.registry import ALL
from otafl_sdr.configure.plugins import load_plugins


def test_list_names_every_registered_implementation(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    load_plugins()
    for kind, reg in ALL.items():
        assert f"{kind} ({reg.config_key})" in out
        for name in reg.names():
            assert f"  {name} " in out
    for must in ("mnist5k", "digits", "synthetic", "femnist", "classes_per_client", "dirichlet", "mlp", "cnn",
                 "fedavg", "fedprox", "upcycled_fl", "cj_adaptive", "paper", "rdp", "pld", "sim", "loopback", "uhd"):
        assert f"  {must} " in out, must


def test_config_prints_every_key_as_loadable_toml(capsys, tmp_path):
    assert main(["config", "--set", "run.rounds=9"]) == 0
    text = capsys.readouterr().out
    data = tomllib.loads(text)
    assert data["run"]["rounds"] == 9
    assert {"run", "data", "model", "train", "algorithm", "power", "privacy", "channel", "air"} <= set(data)
    p = tmp_path / "c.toml"
    p.write_text(text)
    from otafl_sdr.configure.load import load_config
    assert load_config(p).run.rounds == 9


def test_account_matches_the_ledger(capsys):
    assert main(["account", "--sigma", "2.0", "--rounds", "10", "--delta", "1e-5"]) == 0
    out = capsys.readouterr().out
    import dp_accounting
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 10))
    eps = acc.get_epsilon(1e-5)
    line = next(l for l in out.splitlines() if "eps_rdp" in l)
    assert float(line.split()[-1]) == pytest.approx(eps, rel=1e-5)


@pytest.mark.parametrize("args", [["account", "--sigma", "-1"], ["account", "--sigma", "1", "--delta", "2"],
                                  ["report", "/no/such/dir"], ["run", "--resume", "/no/such/dir"]])
def test_bad_arguments_exit_2(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_flag_exits_2_in_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--bogus"])
    assert e.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
