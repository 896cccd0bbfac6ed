"""The notebook API (issue 27, item 6): ``otafl_sdr.load(DIR)`` gives rounds, ledger and summary as pandas
DataFrames equal to the files (a sweep / compare folder: every cell, tagged with its arm, grid keys and seed);
``otafl_sdr.sweep`` / ``otafl_sdr.compare`` wrap the commands and return tidy long-format DataFrames;
``run.tensorboard = true`` is refused in one line where the tensorboard package is not installed (and the
key never changes the hash of a config that leaves it off); `report` / `verify` take sweep folders."""
import importlib.util
import json

import pandas as pd
import pytest

import otafl_sdr
import otafl_sdr.api          # the test reads otafl_sdr.api.resolve: imported here, not left to an earlier test
from dp_reference import independent_pld_epsilon
from otafl_sdr.cli.main import main
from otafl_sdr.config.schema import hashed_toml
from otafl_sdr.errors import ConfigError, UserError

SMALL = {"air.name": "sim", "run.rounds": 2, "data.dataset": "digits", "data.clients": 4, "model.name": "logreg",
         "run.torch_threads": 1, "algorithm.name": "upcycled_fl"}

SPEC = """
[sweep]
name = "nb"
seeds = [1, 2]
set = ["run.rounds=2", "data.dataset=digits", "data.clients=4", "model.name=logreg", "air.name=sim",
       "run.torch_threads=1", "privacy.unit=client", "power.jammer=false", "privacy.enforce=false"]

[grid]
"privacy.eps" = [50.0]

[arms.pc]
set = ["power.policy=cj_adaptive"]

[arms.hmin]
set = ["power.policy=h_min"]

[[claims]]
source = "test"
more = "pc"
less = "hmin"
"""


@pytest.mark.experiment
def test_load_a_run_folder(tmp_path):
    res = otafl_sdr.run(SMALL, out=tmp_path / "r")
    rounds, ledger, summary = otafl_sdr.load(tmp_path / "r")
    rows = [json.loads(x) for x in (tmp_path / "r" / "rounds.jsonl").read_text().splitlines()]
    recs = [json.loads(x) for x in (tmp_path / "r" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert isinstance(rounds, pd.DataFrame) and list(rounds["round"]) == [r["round"] for r in rows] == [1, 2, 3, 4]
    assert list(rounds["client_round"]) == [1, 1, 2, 2]
    assert len(ledger) == len(recs) and list(ledger["sigma_eff"]) == [r["sigma_eff"] for r in recs]
    assert list(ledger["eps_pld"]) == [r["eps"]["pld"] for r in recs]          # each accountant as a column
    assert len(summary) == 1 and summary["eps_pld"].iloc[0] == res.summary["eps_pld"]
    assert summary["eps_pld"].iloc[0] == pytest.approx(independent_pld_epsilon(recs, summary["delta"].iloc[0]),
                                                       rel=2e-3)
    assert summary["client_rounds"].iloc[0] == 2 and summary["rounds"].iloc[0] == 4
    with pytest.raises(UserError, match="neither a results folder"):
        otafl_sdr.load(tmp_path)


@pytest.mark.experiment
def test_sweep_and_compare_return_tidy_frames_and_folders_report_and_verify(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('name = "nb"', f'name = "nb"\nout = "{tmp_path / "out"}"'))
    frame = otafl_sdr.compare(spec, workers=1)
    assert {"dir", "mechanism", "privacy.eps", "seed", "round", "client_round", "metric", "value"} <= set(frame.columns)
    assert set(frame["mechanism"]) == {"pc", "hmin"} and set(frame["seed"]) == {1, 2}
    assert {"test_accuracy", "eps_pld", "sigma_eff"} <= set(frame["metric"])
    acc = frame[frame["metric"] == "test_accuracy"]
    assert len(acc) == 4 * 4                                        # 4 cells x 4 iterations, one row each
    out = frame.attrs["out"]
    assert (tmp_path / "out" / "compare.csv").is_file() and out == str(tmp_path / "out")
    loaded = otafl_sdr.load(out)
    assert len(loaded.table) == 4 and len(loaded.cells) == 4
    cell = loaded.table["dir"].iloc[0]
    row = json.loads((tmp_path / "out" / cell / "rounds.jsonl").read_text().splitlines()[-1])
    mine = acc[(acc["dir"] == cell) & (acc["round"] == row["round"])]["value"]
    assert mine.tolist() == [row["test_accuracy"]]
    # the sweep entry point on the same folder: finished cells are skipped, the same tidy rows come back
    again = otafl_sdr.sweep(spec, workers=1)
    pd.testing.assert_frame_equal(again.sort_values(list(again.columns)).reset_index(drop=True),
                                  frame.sort_values(list(frame.columns)).reset_index(drop=True))
    capsys.readouterr()
    assert main(["verify", out]) == 0                              # every cell verified
    text = capsys.readouterr().out
    assert text.count(": OK: ") == 4 and f"verify {out}: 4/4 cells OK" in text
    assert main(["report", out]) == 0                              # the comparison, not cell by cell
    text = capsys.readouterr().out
    assert "| pc | 50 | 2/2 |" in text and "pc > hmin in accuracy_last_k" in text and "== " not in text
    assert not any((tmp_path / "out" / c / "report").exists() for c in loaded.table["dir"])
    with pytest.raises(UserError):
        otafl_sdr.sweep(tmp_path / "nothing.toml")


@pytest.mark.experiment
def test_tensorboard_key(tmp_path):
    default = otafl_sdr.api.resolve(None)
    assert "tensorboard" not in hashed_toml(default)               # off: the hash of every config is as before
    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(ConfigError, match="run.tensorboard.*'tensorboard' package, which is not installed"):
            otafl_sdr.api.resolve({"run.tensorboard": True})
    else:                                                          # where it is installed: scalars per round
        res = otafl_sdr.run({**SMALL, "run.tensorboard": True}, out=tmp_path / "tb")
        assert any((res.out / "tensorboard").iterdir())


@pytest.mark.experiment
def test_a_folder_written_before_a_key_existed_keeps_its_chain(tmp_path, capsys):
    """config.HASHED_WHEN_SET: a key added later (run.tensorboard, data.download) is hashed only when set, so a
    folder whose config.toml predates it (the key absent) still verifies and resumes."""
    from otafl_sdr.config.schema import HASHED_WHEN_SET
    out = tmp_path / "r"
    assert main(["run", "--out", str(out), "--air", "sim", "--set", "run.rounds=2", "--set", "data.dataset=digits",
                 "--set", "data.clients=3", "--set", "model.name=logreg", "--quiet"]) == 0
    import tomli_w
    text = (out / "config.toml").read_text()
    for dotted, unset in HASHED_WHEN_SET.items():
        if isinstance(unset, dict):                                        # an empty table, e.g. [uhd.tx_gains]
            assert f"\n[{dotted}]\n\n" in text, dotted
            text = text.replace(f"\n[{dotted}]\n\n", "\n")
            continue
        line = tomli_w.dumps({dotted.rpartition(".")[2]: unset})          # e.g. "download = false\n"
        assert "\n" + line in text, line
        text = text.replace("\n" + line, "\n")
    (out / "config.toml").write_text(text)                     # as a folder written before those keys
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0 and ": OK: " in capsys.readouterr().out
    assert main(["run", "--resume", str(out), "--extend", "1", "--eps", "1.2", "--quiet"]) == 0, capsys.readouterr().err
    assert main(["verify", str(out)]) == 0


# every key a results folder's ledger chain has always hashed (as of issue 27); a key added since must be in
# config.HASHED_WHEN_SET with its default, or every folder written before it fails verify and --resume
HASHED_ALWAYS = set("""
run.seed run.rounds run.name run.progress run.checkpoint_every run.torch_threads run.eval_every run.device
data.dataset data.path data.femnist_classes data.partition data.clients data.classes_per_client
data.iid_devices data.dirichlet_alpha data.dominant_fraction data.unequal_sizes data.test_fraction
data.max_samples data.synthetic_alpha data.synthetic_beta data.synthetic_iid data.synthetic_dim
data.synthetic_classes data.synthetic_samples model.name model.hidden train.local_epochs train.batch_size
train.lr train.momentum train.tau train.sample_clip algorithm.name algorithm.mu algorithm.lambda_schedule
algorithm.options power.policy power.max_snr_db power.alpha_u power.alpha_u_quantile power.jammer
power.jammer_multiple power.jammer_max_snr_db power.options privacy.eps privacy.delta privacy.accountant
privacy.report privacy.enforce privacy.unit privacy.targeting channel.sigma_c2 channel.fading
channel.jammer_fading channel.multipath channel.delay_spread_ns channel.rician_k air.name air.record_iq
air.retries air.csi air.allow_unsynced air.recalibrate_every phy.sps phy.rolloff phy.rrc_span phy.preamble_len
phy.pilot_spacing phy.guard loopback.client_cfo_max loopback.client_delay_max loopback.client_phase
loopback.rx_cfo loopback.rx_delay loopback.rx_phase_noise loopback.residual_cfo loopback.residual_delay
loopback.residual_phase uhd.tx_args uhd.jammer_args uhd.rx_args uhd.freq uhd.rate uhd.tx_gain uhd.rx_gain
uhd.start_delay uhd.lo_offset uhd.simulator net.bind net.port net.keys_dir net.timeout_s net.heartbeat_s
net.dead_client_policy net.insecure net.diagnostics net.max_attacked_rounds calibration.file
calibration.session calibration.max_age_days calibration.max_phase_age_min""".split())


def test_every_key_added_later_is_hashed_only_when_set():
    import dataclasses

    from otafl_sdr.config.schema import HASHED_WHEN_SET, Config
    keys = {f"{s.name}.{f.name}" for s in dataclasses.fields(Config) for f in dataclasses.fields(s.default_factory)}
    new = sorted(keys - HASHED_ALWAYS - set(HASHED_WHEN_SET))
    assert not new, (f"config keys {new} are new: add each to config.HASHED_WHEN_SET with its default value, so "
                     f"that results folders written before them keep their ledger chains (verify, --resume)")
    defaults = Config()
    for dotted, unset in HASHED_WHEN_SET.items():
        section, _, key = dotted.rpartition(".")
        assert getattr(getattr(defaults, section), key) == unset, dotted
