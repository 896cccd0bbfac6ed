import pytest

from otafl_sdr.config.schema import to_toml
from otafl_sdr.configure.load import load_config, config_from_dict
from otafl_sdr.errors import ConfigError, UserError


def test_defaults_validate_and_roundtrip(tmp_path):
    cfg = load_config(None)
    p = tmp_path / "c.toml"
    p.write_text(to_toml(cfg))
    again = load_config(p)
    assert again == cfg


def test_dotted_overrides_are_typed():
    cfg = load_config(None, ["run.rounds=7", "privacy.delta=0.01", "power.jammer=false",
                             "data.dataset=digits", "privacy.report=['rdp']"])
    assert cfg.run.rounds == 7 and cfg.privacy.delta == 0.01 and cfg.power.jammer is False
    assert cfg.privacy.report == ["rdp"]


@pytest.mark.parametrize("override,key", [
    ("privacy.eps=0", "privacy.eps"), ("privacy.eps=-1", "privacy.eps"),
    ("privacy.delta=0", "privacy.delta"), ("privacy.delta=1", "privacy.delta"),
    ("data.clients=0", "data.clients"), ("train.tau=0", "train.tau"), ("train.tau=-2", "train.tau"),
    ("algorithm.name=fedfoo", "algorithm.name"), ("data.dataset=cifar", "data.dataset"),
    ("power.policy=magic", "power.policy"), ("run.bogus=1", "run.bogus"), ("nosection.x=1", "nosection"),
    ("run.rounds=abc", "run.rounds"), ("channel.sigma_c2=-1", "channel.sigma_c2"),
    ("power.alpha_u=-3", "power.alpha_u"), ("air.name=carrier-pigeon", "air.name"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert e.value.key.startswith(key)
    assert "\n" not in str(e.value)


def test_femnist_needs_existing_path(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(None, ["data.dataset=femnist", f"data.path={tmp_path / 'missing'}"])
    assert e.value.key == "data.path"


def test_malformed_toml_is_a_user_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[run\nrounds = ")
    with pytest.raises(UserError, match="not valid TOML"):
        load_config(p)
    with pytest.raises(UserError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_unknown_policy_option_rejected():
    with pytest.raises(ConfigError) as e:
        config_from_dict({"power": {"policy": "cj_adaptive", "options": {"foo": 1}}})
    assert e.value.key == "power.options.foo"
