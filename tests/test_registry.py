"""registry.Registry: a name is taken once (a plugin cannot silently replace a built-in, e.g. the enforcing
``pld`` accountant), ``replace=True`` replaces on purpose, and each entry keeps its origin, which the run's
summary records for every plugin that is not built in (configure/plugins.plugin_origins)."""
import pytest

from otafl_sdr import registry
from otafl_sdr.configure.load import load_config
from otafl_sdr.configure.plugins import load_plugins, plugin_origins
from otafl_sdr.errors import UserError
from otafl_sdr.privacy.pld import PldAccountant


class FakePld(PldAccountant):
    """A plugin that would like to be 'pld'."""


def test_a_taken_name_is_refused_naming_both_origins():
    load_plugins()
    with pytest.raises(UserError) as e:
        registry.ACCOUNTANTS.register("pld")(FakePld)
    msg = str(e.value)
    assert "otafl_sdr.privacy.pld:PldAccountant" in msg and "test_registry:FakePld" in msg and "replace=True" in msg
    assert registry.ACCOUNTANTS.get("pld") is PldAccountant and registry.ACCOUNTANTS.builtin("pld")
    with pytest.raises(UserError):
        registry.AIRS.register_lazy("sim", "my_pkg.air:Air")
    assert registry.AIRS.origin("sim") == "otafl_sdr.channel.sim_air:SimAir"


def test_replace_on_purpose_and_the_same_implementation_again():
    table = registry.Registry("thing", "x.name")
    table.register("a")(PldAccountant)
    table.register("a")(PldAccountant)                    # its module imported again: no-op
    table.register("a", replace=True)(FakePld)
    assert table.get("a") is FakePld and not table.builtin("a")
    table.unregister("a")
    table.register("a")(PldAccountant)                     # free again once unregistered
    assert table.builtin("a")


def test_the_summary_names_each_plugin_and_where_it_came_from():
    load_plugins()
    cfg = load_config(None, [])
    assert plugin_origins(cfg) == {}
    with registry.loading_entry_point("entry point 'mine' (my_pkg.acc)"):
        registry.ACCOUNTANTS.register("count_plugin", "test only")(FakePld)
    try:
        cfg.privacy.report = ["paper", "count_plugin"]
        assert plugin_origins(cfg) == {"privacy.accountant": {
            "count_plugin": "test_registry:FakePld via entry point 'mine' (my_pkg.acc)"}}
    finally:
        registry.ACCOUNTANTS.unregister("count_plugin")
