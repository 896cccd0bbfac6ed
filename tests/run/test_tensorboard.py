"""``run.tensorboard = true`` (issue 27 item 6, issue 36 item 4): the round hook writes each row's numeric fields
as TensorBoard scalars at the client round (Upcycled-FL's server-only iterations under ``server_step/`` at
theirs: one value per tag and step), the config's hyperparameters (hparams plugin) and the resolved config as
text into DIR/tensorboard. Read back with tensorboard's own EventAccumulator they equal rounds.jsonl (float32,
as TensorBoard stores them) and config.toml; a --resume --extend appends the new client rounds, a resume after
a crash shows each client round once, and where the package is absent the key is refused in one line (exit 2)
before anything runs. The uhd air's per-client link health and constellation images: tests/radio/test_uhd_tracking.py."""
import json
import math
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

import otafl_sdr
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError

SMALL = {"air.name": "sim", "run.rounds": 2, "data.dataset": "digits", "data.clients": 4, "model.name": "logreg",
         "run.torch_threads": 1, "algorithm.name": "upcycled_fl", "run.tensorboard": True}


def accumulator(out):
    acc = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    acc.Reload()
    return acc


def scalars(out):
    acc = accumulator(out)
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def expected(out):
    """{tag: [(client round, value)]} from rounds.jsonl, written here from the rule: step = client_round; a row
    that used no client (uses_clients false) under server_step/; the iteration as ``iteration``."""
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines()]
    want: dict[str, list] = {}
    for r in rows:
        pre = "server_step/" if r["uses_clients"] is False else ""
        for k, v in {**r, "iteration": r["round"]}.items():
            if k not in ("round", "client_round") and isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and math.isfinite(v):
                want.setdefault(pre + k, []).append((r["client_round"], v))
    return rows, want


@pytest.mark.experiment
def test_event_files_hold_the_rounds_at_client_rounds_with_hparams_and_the_config(tmp_path):
    res = otafl_sdr.run(SMALL, out=tmp_path / "tb")
    rows, want = expected(res.out)
    assert [(r["round"], r["client_round"]) for r in rows] == [(1, 1), (2, 1), (3, 2), (4, 2)]   # 2 client rounds
    got = scalars(res.out)
    assert set(got) == set(want)
    assert {"test_accuracy", "eps_pld", "sigma_eff", "aggregate_nmse", "server_step/test_accuracy"} <= set(got)
    for tag, pts in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in pts] == [1, 2], tag      # one value per client round
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in pts], rel=1e-6, abs=1e-30), tag
    assert got["server_step/test_accuracy"][-1][1] == pytest.approx(res.summary["final_accuracy"], rel=1e-6)
    assert [v for _, v in got["iteration"]] == [1, 3] and [v for _, v in got["server_step/iteration"]] == [2, 4]

    acc = accumulator(res.out)
    (text,) = acc.Tensors("config/text_summary")
    assert text.tensor_proto.string_val[0].decode().replace("\n    ", "\n").strip() == \
        (res.out / "config.toml").read_text().strip()
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    hp = {k: v.string_value or v.number_value or v.bool_value for k, v in start.hparams.items()}
    assert hp["run.rounds"] == 2 and hp["algorithm.name"] == "upcycled_fl" and hp["data.clients"] == 4
    assert hp["air.name"] == "sim" and hp["privacy.report"] == json.dumps(load_config(res.out / "config.toml").privacy.report)
    exp = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    metrics = {m.name.tag for m in exp.metric_infos}
    assert {"test_accuracy", "eps_pld"} <= metrics and metrics <= set(got) | {"eps_paper"}


@pytest.mark.experiment
def test_an_extension_appends_its_client_rounds(tmp_path, capsys):
    out = tmp_path / "tb"
    otafl_sdr.run({**SMALL, "privacy.enforce": False}, out=out)      # the extension goes past the eps target
    assert main(["run", "--resume", str(out), "--extend", "1", "--eps", "1.2", "--quiet"]) == 0, capsys.readouterr().err
    rows, want = expected(out)
    assert len(rows) == 6
    got = scalars(out)
    for tag in ("test_accuracy", "server_step/test_accuracy", "eps_pld"):
        assert [s for s, _ in got[tag]] == [1, 2, 3], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in want[tag]], rel=1e-6), tag
    assert len(accumulator(out).Tensors("config/text_summary")) == 1     # the config once, as the first session wrote it


def test_without_the_package_the_key_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)         # as on a machine where it is not installed
    with pytest.raises(ConfigError, match="run.tensorboard.*'tensorboard' package, which is not installed"):
        otafl_sdr.api.resolve({"run.tensorboard": True})
    capsys.readouterr()
    rc = main(["run", "--out", str(tmp_path / "no"), "--air", "sim", "--set", "run.tensorboard=true", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "run.tensorboard" in err and "Traceback" not in err
    assert not (tmp_path / "no").exists()


@pytest.mark.experiment
def test_a_resume_after_a_crash_shows_each_client_round_once(tmp_path):
    """Interrupted after iteration 4 (client round 2's server-only step) with the checkpoint at 3: the resume
    redoes iteration 4; its event file purges from client round 2 and writes iteration 3's kept row again, so
    TensorBoard shows each client round once, with the final rows' values."""
    out = tmp_path / "tb"

    def stop_after_4(row):
        if row["round"] == 4:
            raise KeyboardInterrupt

    res = otafl_sdr.run({**SMALL, "run.rounds": 3, "run.checkpoint_every": 3}, out=out, on_round=stop_after_4)
    assert "interrupted" in res.stopped_reason
    assert [s for s, _ in scalars(out)["server_step/test_accuracy"]] == [1, 2]
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    rows, want = expected(out)
    assert [r["round"] for r in rows] == [1, 2, 3, 4, 5, 6]
    got = scalars(out)
    for tag in ("test_accuracy", "server_step/test_accuracy", "eps_pld", "sigma_eff", "iteration"):
        assert [s for s, _ in got[tag]] == [s for s, _ in want[tag]] == [1, 2, 3], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in want[tag]], rel=1e-6), tag
