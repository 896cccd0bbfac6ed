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
    # what the bound means: the stated false-alarm rate, the corrected level of each of the 2k bounds, the rule
    assert a["false_alarm_rate"] == pytest.approx(0.05) and a["bounds"] == 2 * len(a["statistics"])
    assert a["confidence_each"] == pytest.approx(1 - 0.05 / a["bounds"]) and "at most 1 - confidence" in a["rule"]
    assert a["violation"] == bool(a["violation_by"]) and "false-alarm rate 5 %" in printed


@pytest.mark.experiment
def test_repeat_pools_fresh_audits_into_one_verdict(tmp_path, capsys):
    out = tmp_path / "audit"
    assert main(["audit", *SMALL, "--canaries", "400", "--repeat", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    a = json.loads((out / "audit.json").read_text())
    reps = [json.loads((out / f"repeat-{k}" / "audit.json").read_text()) for k in (1, 2)]
    assert a["repeat"] == 2 and a["pooled"] and a["trials"] == 800 == sum(r["trials"] for r in reps)
    assert a["canaries_inserted"] == sum(r["canaries_inserted"] for r in reps)
    assert [r["eps_lower"] for r in a["repetitions"]] == [r["eps_lower"] for r in reps]
    assert a["mu_booked"] == reps[0]["mu_booked"] == reps[1]["mu_booked"]
    assert a["eps_printed"] == max(r["eps_printed"] for r in reps)
    # the pooled inserted side holds both audits' samples: its mean is the two audits' mean
    m = [r["statistics"]["canary"]["mean_inserted"] for r in reps]
    assert a["statistics"]["canary"]["mean_inserted"] == pytest.approx(sum(m) / 2, rel=1e-9, abs=1e-12)
    assert "pooled over 2 audits" in printed and "repeat-1: eps_lower" in printed
    assert (out / "audit.png").is_file() and (out / "repeat-2" / "run" / "summary.json").is_file()


@pytest.mark.parametrize("extra,words", [
    (["--canaries", "2"], "--canaries"),
    (["--confidence", "1.5"], "--confidence"),
    (["--repeat", "0"], "--repeat"),
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
