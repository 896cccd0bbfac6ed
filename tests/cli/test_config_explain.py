"""A self-explaining config (issue 27, item 5): `config --explain [KEY]` gives type, unit, range, default,
meaning and paper of every key (this test fails when a key has no explanation), and `config` writes each
key's one-line meaning as a TOML comment above it (the text still loads as the same config)."""
import dataclasses
import re
import tomllib

from otafl_sdr.cli.main import main
from otafl_sdr.config.schema import Config, to_dict
from otafl_sdr.configure.explain import explain_all
from otafl_sdr.configure.key_rules import key_rules
from otafl_sdr.configure.option_keys import option_keys
from otafl_sdr.sweeps.spec_keys import SPEC_KEYS, spec_key_names
from otafl_sdr.configure.load import default_experiment


def _every_key():
    return [f"{s.name}.{f.name}" for s in dataclasses.fields(Config) for f in dataclasses.fields(s.default_factory)]


def test_every_key_is_explained(capsys):
    infos = explain_all()
    keys = _every_key()
    assert list(infos) == keys
    missing = [k for k in keys if not infos[k].meaning.strip()]
    assert not missing, f"config keys without a meaning (add a comment beside the field in config.py): {missing}"
    assert main(["config", "--explain"]) == 0
    text = capsys.readouterr().out
    for k in keys:
        assert f"\n{k}  (" in "\n" + text, k
    every = len(keys) + len(option_keys()) + len(SPEC_KEYS)          # the option tables' and spec keys too
    assert text.count("  meaning:  ") == text.count("  range:    ") == text.count("  paper:    ") == every


def test_explain_one_key_says_type_unit_range_default_meaning_paper(capsys):
    assert main(["config", "--explain", "run.rounds"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "run.rounds  (integer, client rounds)"
    assert "Upcycled-FL runs 2M iterations" in text
    assert "default:  20  (the default experiment: 30)" in text
    assert "range:    must be in [1, 100000]" in text and "paper:    paper 000" in text
    assert main(["config", "--explain", "power.max_snr_db"]) == 0
    text = capsys.readouterr().out
    assert "(number, dB" in text and "[-200, 200] dB" in text
    assert main(["config", "--explain", "data.partition"]) == 0
    text = capsys.readouterr().out
    assert "range:    one of: " in text and "dirichlet" in text
    assert main(["config", "--explain", "privacy"]) == 0                  # a section: each of its keys
    text = capsys.readouterr().out
    assert all(f"privacy.{f.name}  (" in text for f in dataclasses.fields(Config().privacy))
    assert main(["config", "--explain", "algorithm.options"]) == 0        # each implementation's own options
    text = capsys.readouterr().out
    assert "    noisy_fedavg: sigma = 0.01, clip = 1.0" in text and "    fedavg: none" in text
    assert main(["config", "--explain", "run.roundz"]) == 2
    assert "no key 'run.roundz'" in capsys.readouterr().err


def test_config_writes_each_meaning_as_a_comment(capsys):
    assert main(["config"]) == 0
    text = capsys.readouterr().out
    assert tomllib.loads(text) == to_dict(default_experiment())
    lines = text.splitlines()
    for k in _every_key():
        section, name = k.split(".")
        start = lines.index(f"[{section}]")
        i = next(i for i, line in enumerate(lines) if i > start and (line.startswith(f"{name} = ")
                                                                      or line == f"[{section}.{name}]"))
        assert lines[i - 1].startswith("# "), k
    assert "# FL rounds M (Upcycled-FL runs 2M iterations, of which M use clients) [client rounds]" in lines


# issue 36, item 3: every key (the option tables' dotted keys and the spec keys included), one range each, the
# rules that tie keys together where they apply
_INTERVAL = re.compile(r"must be (?:in|within) [\[(]")


def _blocks(text: str) -> dict[str, list[str]]:
    out, key = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            key = line.split("  (")[0]
            out[key] = []
        elif key:
            out[key].append(line)
    return out


def test_every_option_and_spec_key_is_explained_with_one_range(capsys):
    assert main(["config", "--explain"]) == 0
    blocks = _blocks(capsys.readouterr().out)
    wanted = _every_key() + list(option_keys()) + spec_key_names()
    assert set(SPEC_KEYS) == set(spec_key_names())               # a new spec key needs its explanation
    for k in wanted:
        assert k in blocks, f"config --explain does not cover {k}"
        lines = blocks[k]
        meaning = next(x for x in lines if x.startswith("  meaning:  "))
        ranges = [x for x in lines if x.startswith("  range:    ")]
        assert meaning.strip() != "meaning:" and len(ranges) == 1 and ranges[0].strip() != "range:", k
        assert len(_INTERVAL.findall(ranges[0])) <= 1, f"{k} states its range twice: {ranges[0]}"


def test_dotted_options_spec_keys_and_rules_where_they_apply(capsys):
    assert main(["config", "--explain", "power.options.rho"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("power.options.rho  (number)") and "fixed rho" in text and "cdpb_idle" in text
    assert "range:    must be >= 0" in text
    assert main(["config", "--explain", "compare.last_k"]) == 0
    text = capsys.readouterr().out
    assert "evaluations averaged" in text and "[1, 10000]" in text
    assert main(["config", "--explain", "train.tau"]) == 0
    assert capsys.readouterr().out.count("must be in") == 1            # once, not "[1e-12, 1e+06]; (0, 1e6]"
    assert main(["config", "--explain", "phy.ofdm_cp"]) == 0
    text = capsys.readouterr().out
    assert "rule:     ... samples is shorter than the channel's delay extent" in text and "uhd.rate" in text
    assert main(["config", "--explain", "channel.delay_spread_ns"]) == 0
    assert "does nothing with channel.multipath = 'flat'" in capsys.readouterr().out
    assert main(["config", "--explain", "air.record_iq"]) == 0          # a boolean (fixed range) states its rule too
    assert "rule:     records the received IQ, and air.name" in capsys.readouterr().out
    every = {k for s in dataclasses.fields(Config) for k in [f"{s.name}.{f.name}" for f in
                                                             dataclasses.fields(s.default_factory)]}
    assert set(key_rules()) <= every and {"phy.ofdm_cp", "data.iid_devices", "channel.multipath"} <= set(key_rules())
