"""`otafl-sdr audit`: config handling as `run` (--config / --set / --air), audit.json and audit.png, the
printed line, and bad input as one line with exit 2 (nothing already written is touched)."""
import json

import pytest
from dp_reference import independent_pld_epsilon

from otafl_sdr.cli.main import main

SMALL = ["--air", "sim", "--set", "run.rounds=3", "--set", "data.dataset=digits", "--set", "data.clients=5",
         "--set", "model.hidden=16", "--quiet"]


@pytest.mark.experiment
def test_audit_writes_its_figures_and_prints_the_ratio(tmp_path, capsys):
    cfg = tmp_path / "exp.toml"
    assert main(["config", "--set", "run.name=auditme"]) == 0
    cfg.write_text(capsys.readouterr().out)
    out = tmp_path / "audit"
    assert main(["audit", "--config", str(cfg), *SMALL, "--canaries", "600", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    a = json.loads((out / "audit.json").read_text())
    for k in ("eps_lower", "eps_printed", "delta", "confidence", "trials", "air", "wall_s", "ratio", "eps_lower_cp"):
        assert k in a, k
    assert a["air"] == "sim" and a["config"] == "auditme" and a["trials"] == 600 and a["confidence"] == 0.95
    assert f"{a['eps_lower']:.4g}" in printed and f"ratio {a['ratio']:.3f}" in printed
    assert f"{a['eps_printed']:.4g}" in printed
    assert 0 <= a["eps_lower"] < 3 * a["eps_printed"]      # private coins from OS entropy: tightness is tested seeded
    recs = [json.loads(x) for x in (out / "run" / "privacy_ledger.jsonl").read_text().splitlines() if x]
    assert a["eps_printed"] == pytest.approx(independent_pld_epsilon(recs, a["delta"]), rel=2e-3)
    assert (out / "audit.png").stat().st_size > 10_000
    assert (out / "run" / "summary.json").is_file()


@pytest.mark.parametrize("extra,words", [
    (["--canaries", "2"], "--canaries"),
    (["--confidence", "1.5"], "--confidence"),
    (["--air", "zmq"], "testbed"),
    (["--set", "run.nonsense=1"], "nonsense"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, words):
    out = tmp_path / "a"
    assert main(["audit", *SMALL, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("otafl-sdr: error:") and len(err.splitlines()) == 1 and words in err
    assert not (out / "audit.json").exists()


def test_a_folder_in_use_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "a"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["audit", *SMALL, "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine" and not (out / "audit.json").exists()


def test_out_is_required(capsys):
    with pytest.raises(SystemExit) as e:
        main(["audit", "--air", "sim"])
    assert e.value.code == 2
