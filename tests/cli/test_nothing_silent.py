"""Nothing silent (issue 36, item 1): a flag that contradicts a --set, or a key that makes another inert, is
refused in one line naming both; misspelt config, spec and CLI keys get a "did you mean" (difflib); a spec's
unknown key is named as written."""
import pytest

from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import default_experiment
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.sweeps.sweep import load_spec


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_air_flag_contradicting_a_set_is_refused_naming_both(capsys, tmp_path):
    err = _one_line_error(capsys, ["run", "--air", "sim", "--set", "air.name=loopback", "--dry-run",
                                   "--out", str(tmp_path / "r")])
    assert "--air sim" in err and "air.name=loopback" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("sets,both", [
    (["channel.multipath=tdl-a"], ("channel.multipath", "channel.delay_spread_ns")),          # spread 0: flat
    (["channel.multipath=tdl-b", "channel.delay_spread_ns=10"], ("channel.multipath", "delay_spread_ns = 10")),
    (["channel.delay_spread_ns=2000"], ("channel.delay_spread_ns", "channel.multipath = 'flat'")),
    (["air.name=sim", "air.record_iq=true"], ("air.record_iq", "air.name = 'sim'")),      # no IQ to record
])
def test_a_key_made_inert_by_another_is_refused_naming_both(sets, both):
    with pytest.raises(ConfigError) as e:
        default_experiment(sets)
    assert all(k in str(e.value) for k in both), str(e.value)


def test_a_multipath_with_a_spread_still_loads():
    cfg = default_experiment(["channel.multipath=tdl-a", "channel.delay_spread_ns=2000"])
    assert cfg.channel.multipath == "tdl-a"


@pytest.mark.parametrize("override,meant", [
    ("run.roundz=3", "run.rounds"), ("rnu.rounds=3", "run"), ("channel.multipth=tdl-a", "channel.multipath"),
    ("power.policy=cj_adaptiv", "cj_adaptive"),
])
def test_misspelt_config_keys_and_names_get_did_you_mean(capsys, override, meant):
    err = _one_line_error(capsys, ["config", "--set", override])
    assert f"(did you mean '{meant}'?)" in err


def test_misspelt_option_of_a_policy_gets_did_you_mean(capsys):
    err = _one_line_error(capsys, ["config", "--set", "power.policy=cdpb_idle", "--set", "power.options.rhoo=1"])
    assert "(did you mean 'power.options.rho'?)" in err


@pytest.mark.parametrize("argv,meant", [
    (["run", "--sett", "run.rounds=2"], "--set"), (["sweeep", "x.toml"], "sweep"), (["run", "--air", "simm"], "sim"),
    (["config", "--explian"], "--explain"),
])
def test_misspelt_cli_options_commands_and_choices_get_did_you_mean(capsys, argv, meant):
    with pytest.raises(SystemExit) as e:                 # argparse's own exit, status 2
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"(did you mean '{meant}'?)" in err


SPEC = """
[sweep]
seeds = [1]

[arms.jammer]
set = ["power.policy=cj_adaptive"]
"""


@pytest.mark.parametrize("edit,named,meant", [
    (lambda s: s.replace("set = [", "sett = ["), "arms.jammer.sett", "arms.jammer.set"),
    (lambda s: s.replace("seeds =", "sedes ="), "sweep.sedes", "sweep.seeds"),
    (lambda s: s + '\n[[claims]]\nmroe = "jammer"\nless = "jammer"\n', "claims[0].mroe", "claims[0].more"),
    (lambda s: s + "\n[compare]\nlast_kk = 2\n", "compare.last_kk", "compare.last_k"),
    (lambda s: s.replace("[sweep]", "[swep]"), "swep", "sweep"),
])
def test_a_spec_unknown_key_is_named_as_written_with_did_you_mean(tmp_path, edit, named, meant):
    path = tmp_path / "spec.toml"
    path.write_text(edit(SPEC))
    with pytest.raises(UserError) as e:
        load_spec(path)
    assert f"unknown key {named} (did you mean '{meant}'?)" in str(e.value), str(e.value)


@pytest.mark.parametrize("argv,shown", [([], True), (["--set", "run.progress=false"], False), (["--quiet"], False)])
def test_run_progress_false_is_acted_on_as_quiet_is(monkeypatch, tmp_path, argv, shown):
    import otafl_sdr.experiment.orchestrator as orchestrator
    seen = {}

    def capture(cfg, out, progress=None, **kw):
        seen["progress"] = progress
        raise KeyboardInterrupt                          # nothing runs
    monkeypatch.setattr(orchestrator, "make_experiment", capture)
    assert main(["run", "--air", "sim", "--out", str(tmp_path / "r"), *argv]) == 130
    assert seen["progress"] is shown
