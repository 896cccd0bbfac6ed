"""Issue 28, item 5: every bad config value is a ConfigError naming its key (never a TypeError), from a TOML
file, --set or the Python API; numpy scalars are read as the numbers they hold; strings that name paths,
addresses and device arguments are printable, bounded and do not climb with '..'; the remaining ranges
are checked; an exception in the API's on_round stops the run with a checkpoint and a summary."""
import dataclasses
import json

import numpy as np
import pytest

from otafl_sdr import api
from otafl_sdr.config.schema import Config
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.results.files import read_rounds
from otafl_sdr.configure.load import load_config

SMALL = {"run.rounds": 2, "data.clients": 3, "data.max_samples": 300, "model.name": "logreg", "run.progress": False}


def _refused(config) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        api.resolve(config)
    assert "\n" not in str(e.value)
    return e.value


@pytest.mark.parametrize("key, value", [
    ("run.rounds", None), ("run.rounds", b"5"), ("run.rounds", object()), ("train.lr", None),
    ("train.lr", b"0.1"), ("train.lr", object()), ("run.name", b"x"), ("run.name", None),
    ("power.jammer", None), ("privacy.report", [None]), ("privacy.report", [b"rdp"]),
    ("algorithm.lambda_schedule", [[object(), 1]]), ("algorithm.options", {"sigma": None}),
    ("train.lr", np.float64("nan")), ("run.seed", np.int64(-1)), ("train.lr", float("inf")),
])
def test_api_refuses_bad_values_with_a_config_error_naming_the_key(key, value):
    assert _refused({key: value}).key == key


def test_api_reads_numpy_scalars_as_numbers():
    cfg = api.resolve({"run.rounds": np.int64(3), "train.lr": np.float32(0.25), "power.jammer": np.bool_(False),
                       "algorithm.lambda_schedule": [[np.int64(5), np.float32(0.5)]]})
    assert cfg.run.rounds == 3 and type(cfg.run.rounds) is int
    assert cfg.train.lr == 0.25 and type(cfg.train.lr) is float
    assert cfg.power.jammer is False
    assert cfg.algorithm.lambda_schedule == [[5, 0.5]]


@pytest.mark.parametrize("mutate, key", [
    (lambda c: setattr(c, "run", None), "run"), (lambda c: setattr(c, "air", {"name": "sim"}), "air"),
    (lambda c: setattr(c, "privacy", c.power), "privacy"), (lambda c: setattr(c.run, "rounds", None), "run.rounds"),
    (lambda c: setattr(c.train, "lr", b"1"), "train.lr"), (lambda c: setattr(c.run, "name", object()), "run.name"),
])
def test_a_config_object_with_a_replaced_section_or_bad_field_is_a_config_error(mutate, key):
    cfg = Config()
    mutate(cfg)
    assert _refused(cfg).key == key


def test_a_config_object_with_numpy_fields_runs_as_numbers():
    cfg = Config()
    cfg.run.rounds, cfg.train.lr = np.int64(4), np.float32(0.5)
    out = api.resolve(cfg)
    assert (out.run.rounds, out.train.lr) == (4, 0.5)


def test_a_key_given_both_dotted_and_in_its_section_is_refused_as_ambiguous():
    e = _refused({"air.name": "sim", "air": {"name": "loopback"}})
    assert e.key == "air.name" and "twice" in str(e)
    assert _refused({"run.rounds": 2, "run": {"rounds": 2}}).key == "run.rounds"     # even when they agree
    assert api.resolve({"air.name": "sim", "run": {"rounds": 2}}).run.rounds == 2     # different keys: fine


@pytest.mark.parametrize("key, value", [
    ("data.path", "data\x00/femnist"), ("calibration.file", "cal\u202enosj.json"), ("net.keys_dir", "k" * 5000),
    ("net.bind", "../../etc"), ("net.bind", "127.0.0.1/../x"), ("net.bind", "a b"), ("net.keys_dir", "../../etc/keys"),
    ("calibration.file", "../../../etc/passwd"), ("data.path", "leaf/../../x"), ("uhd.rx_args", "serial=../../dev"),
    ("uhd.jammer_args", "serial=J\x00"), ("uhd.rx_args", "not device args"), ("uhd.tx_args", ["serial=A\u2066"]),
    ("run.name", "x\u200f"), ("data.femnist_classes", "a" * 4097),
])
def test_strings_naming_paths_addresses_and_devices_are_validated(key, value):
    e = _refused({key: value})
    assert e.key == key or e.key.startswith(key.split("[")[0])
    assert len(str(e)) < 400                          # a 5,000-character value is not echoed whole


@pytest.mark.parametrize("key, value", [("net.bind", "0.0.0.0"), ("net.bind", "*"), ("net.bind", "::1"),
                                        ("uhd.rx_args", "addr=192.168.10.2,clock_source=external"),
                                        ("uhd.tx_args", ["serial=31A0B1C", "type=b200,name=lab radio"]),
                                        ("calibration.file", "/tmp/calibration.json"), ("net.keys_dir", "keys")])
def test_ordinary_addresses_paths_and_device_args_are_accepted(key, value):
    cfg = api.resolve({key: value})
    section, name = key.split(".")
    assert getattr(getattr(cfg, section), name) == value


@pytest.mark.parametrize("override, key", [
    ("algorithm.lambda_schedule=[[1e30, 1]]", "algorithm.lambda_schedule"),
    ("algorithm.lambda_schedule=[[5, 1e30]]", "algorithm.lambda_schedule"),
    ("power.jammer_max_snr_db=-1", "power.jammer_max_snr_db"), ("uhd.rx_gain=1e308", "uhd.rx_gain"),
    ("uhd.tx_gain=1e308", "uhd.tx_gain"), ("run.checkpoint_every=2000000000", "run.checkpoint_every"),
    ("air.retries=100000", "air.retries"), ("privacy.eps=1e300", "privacy.eps"),
    ("run.seed=99999999999999999999999999", "run.seed"), ("train.lr=1e999", "train.lr"),
])
def test_ranges_name_the_key_that_is_out_of_range(override, key):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert e.value.key == key


def test_nested_arrays_in_a_config_file_are_one_line(tmp_path):
    for text in ("x = " + "[" * 100_000 + "]" * 100_000 + "\n",
                 "[algorithm]\nlambda_schedule = " + "[" * 2_000 + "]" * 2_000 + "\n"):
        p = tmp_path / "deep.toml"
        p.write_text(text)
        with pytest.raises(UserError) as e:
            load_config(p)
        assert "\n" not in str(e.value) and len(str(e.value)) < 400
    with pytest.raises(ConfigError):
        load_config(None, ["algorithm.lambda_schedule=" + "[" * 50_000 + "]" * 50_000])


def test_a_row_whose_round_is_true_is_not_round_1(tmp_path):
    p = tmp_path / "rounds.jsonl"
    p.write_text(json.dumps({"round": True, "test_accuracy": 0.5}) + "\n" + json.dumps({"round": 2}) + "\n")
    with pytest.raises(UserError, match="line 1 is corrupt"):
        read_rounds(p)
    p.write_text(json.dumps({"round": 1}) + "\n" + json.dumps({"round": True}) + "\n")   # a torn last line
    assert [r["round"] for r in read_rounds(p)] == [1]


@pytest.mark.gnuradio        # a run loads every air's plugin (GNU Radio's too), though sim builds no flowgraph
def test_an_exception_in_on_round_stops_the_run_with_a_checkpoint_and_a_summary(tmp_path):
    import torch

    from otafl_sdr.experiment.orchestrator import resume_experiment
    seen = []

    def on_round(row):
        seen.append(row["round"])
        raise RuntimeError("plotting failed\nsecond line")

    out = tmp_path / "run"
    res = api.run({**SMALL, "run.checkpoint_every": 5}, out=out, on_round=on_round)
    assert seen == [1]
    assert "on_round callback raised RuntimeError: plotting failed" in res.stopped_reason
    assert "\n" not in res.stopped_reason
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == res.stopped_reason
    assert torch.load(out / "checkpoint.pt", weights_only=True)["iteration"] == 1   # saved though every=5
    assert [r["round"] for r in read_rounds(out / "rounds.jsonl")] == [1]
    done = resume_experiment(out, progress=False).run()                            # and it goes on
    rounds = [r["round"] for r in read_rounds(out / "rounds.jsonl")]
    assert done.stopped_reason == "" and len(rounds) > 1 and rounds == list(range(1, len(rounds) + 1))


def test_api_refuses_a_bad_out_or_on_round():
    with pytest.raises(UserError):
        api.run(SMALL, out=b"/tmp/x")
    with pytest.raises(UserError):
        api.run(SMALL, on_round=42)


def test_every_key_refuses_none_bytes_and_objects_through_the_api():
    """Every key of every section, each hostile Python value: ConfigError naming the key, nothing else."""
    tried = refused = 0
    for section in dataclasses.fields(Config):
        for f in dataclasses.fields(section.default_factory()):
            key = f"{section.name}.{f.name}"
            for value in (None, b"1", object(), {1, 2}, 1j):
                tried += 1
                try:
                    api.resolve({key: value})
                except ConfigError as e:
                    assert e.key.startswith(key), (key, value, e.key)
                    refused += 1
    assert refused == tried
