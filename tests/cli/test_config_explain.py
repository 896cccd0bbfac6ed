"""A self-explaining config (issue 27, item 5): `config --explain [KEY]` gives type, unit, range, default,
meaning and paper of every key (this test fails when a key has no explanation), and `config` writes each
key's one-line meaning as a TOML comment above it (the text still loads as the same config)."""
import dataclasses
import tomllib

from otafl_sdr.cli.main import main
from otafl_sdr.config.schema import Config, to_dict
from otafl_sdr.configure.explain import explain_all
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
    assert text.count("  meaning:  ") == text.count("  range:    ") == text.count("  paper:    ") == len(keys)


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
