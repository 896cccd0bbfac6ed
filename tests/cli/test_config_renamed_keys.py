"""A renamed config key (privacy.calibrate -> privacy.targeting: "calibrate" now means radio measurement
only) is still read under its old name, so results folders written before the rename resume and verify:
their ledger's hash chain starts from the config under the keys' first names (config.hashed_toml)."""
import json
import re

import pytest

from otafl_sdr.config.schema import hashed_toml, to_toml
from otafl_sdr.errors import ConfigError
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.verify import verify


def test_the_old_key_is_read_as_the_new_one():
    assert load_config(None, ["privacy.calibrate=paper"]).privacy.targeting == "paper"
    assert load_config(None, ["privacy.targeting=paper"]).privacy.targeting == "paper"
    with pytest.raises(ConfigError, match="privacy.calibrate.*set only one"):
        load_config(None, ["privacy.calibrate=paper", "privacy.targeting=target"])


def test_the_hashed_text_keeps_the_first_name_in_its_place():
    cfg = load_config(None)
    new, old = to_toml(cfg), hashed_toml(cfg)
    assert 'targeting = "target"' in new and "calibrate = " not in new.split("[privacy]")[1].split("[")[0]
    # (keys added later, config.HASHED_WHEN_SET, are left out of the hashed text while at their unset value)
    import tomli_w

    from otafl_sdr.config.schema import HASHED_WHEN_SET
    expected = new.replace('targeting = "target"', 'calibrate = "target"')
    for dotted, unset in HASHED_WHEN_SET.items():
        if isinstance(unset, dict):                  # an empty table: its own [section.key] header
            expected = expected.replace(f"[{dotted}]\n\n", "")
            continue
        expected = expected.replace("\n" + tomli_w.dumps({dotted.rpartition(".")[2]: unset}), "\n")
    assert old == expected


@pytest.mark.experiment
def test_a_folder_written_under_the_old_name_resumes_and_verifies(tmp_path, small_cfg):
    small_cfg.run.rounds = 4
    small_cfg.run.checkpoint_every = 1
    exp = Experiment(small_cfg, tmp_path / "old", progress=False)
    orig = exp.run_round

    def crashing(it, *a, **k):
        if it == 3:
            raise KeyboardInterrupt
        return orig(it, *a, **k)
    exp.run_round = crashing
    assert "interrupted" in exp.run().stopped_reason
    conf = tmp_path / "old" / "config.toml"                 # as an otafl-sdr before the rename wrote it
    conf.write_text(re.sub(r'(?m)^targeting = ', 'calibrate = ', conf.read_text()))
    assert 'calibrate = "target"' in conf.read_text()
    resumed = Experiment.resume(tmp_path / "old", progress=False).run()
    assert not resumed.stopped_reason
    full = Experiment(small_cfg, tmp_path / "new", progress=False).run()
    assert resumed.summary["eps_pld"] == full.summary["eps_pld"]
    assert "chain intact" in verify(tmp_path / "old")
    ledger = [json.loads(l) for l in (tmp_path / "old" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert len(ledger) == len([json.loads(l) for l in (tmp_path / "new" / "privacy_ledger.jsonl").read_text().splitlines()])
