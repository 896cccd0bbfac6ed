"""A ledger that cannot be rewritten quietly (issue 28, item 3): the chain is HMAC-SHA256 under a per-run key
kept outside the results folder, and, independent of any key, `verify` and `run --resume` re-derive each
entry's booked sensitivity and sigma_eff from the config and the round's plan. The issue's forgery
(sensitivity divided by 4, eps recomputed, chain rehashed, checkpoint patched or deleted) is refused by
both, even by a forger who holds the key; a refused resume changes nothing on disk."""
import json
import stat

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from ledger_helpers import SETS, digest, interrupted_run, ledger, rewrite, run_key, to_legacy
from otafl_sdr.cli.main import main
from otafl_sdr.privacy import ledger_keys
from otafl_sdr.configure.load import load_config

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures


def _verify(out, capsys, *flags):
    rc = main(["verify", str(out), *flags])
    return rc, capsys.readouterr().out.strip()


def _resume(out, capsys):
    rc = main(["run", "--resume", str(out), "--quiet"])
    return rc, capsys.readouterr().err.strip()


def _quartered(out):
    recs = ledger(out)
    for r in recs:
        if r["uses_data"]:
            r["sensitivity"] /= 4                                # "sensitivity divided by 4"
    return recs


FORGERS = [("the key (an insider)", "patched"), ("the key (an insider)", "deleted"),
           ("no key: SHA-256, ledger.id removed", "patched"), ("no key: SHA-256, ledger.id removed", "deleted")]


@pytest.mark.parametrize("forger,checkpoint", FORGERS)
def test_the_issues_forgery_is_refused_by_verify_and_resume(tmp_path, capsys, forger, checkpoint):
    out = interrupted_run(tmp_path)
    rc, line = _verify(out, capsys)
    assert rc == 0 and "6 entries' booked figures re-derived" in line, line
    honest = json.loads((out / "summary.json").read_text())["eps_pld"]
    recs = _quartered(out)
    if forger.startswith("the key"):
        rewrite(out, recs, run_key(out), checkpoint)
    else:
        to_legacy(out, recs, checkpoint)
    forged = json.loads((out / "summary.json").read_text())["eps_pld"]
    assert forged < honest / 2                                   # what the forger wanted the folder to say
    # the key's holder is caught by the re-derived sensitivity; the key-less downgrade already by the key
    # folder, which holds a keyed run of this config (the re-derivation would catch it too: see below)
    why = "sensitivity" if forger.startswith("the key") else "rewritten as unkeyed"
    rc, line = _verify(out, capsys)
    assert rc in (1, 2) and why in line and "rewritten" in line and len(line.splitlines()) == 1, line
    before = digest(out)
    rc, err = _resume(out, capsys)
    assert rc == 2 and "cannot resume" in err and why in err and len(err.splitlines()) == 1, err
    assert digest(out) == before                                 # a refused resume changes nothing


def test_the_key_less_downgrade_is_also_caught_by_the_re_derivation(tmp_path, capsys, monkeypatch):
    """Checked where the key folder knows nothing of the run (another machine): the quartered sensitivity
    is still refused because the booked figures are re-derived from the config."""
    out = interrupted_run(tmp_path)
    to_legacy(out, _quartered(out), "patched")
    monkeypatch.setenv("OTAFL_LEDGER_KEYS", str(tmp_path / "another-machine-keys"))
    rc, line = _verify(out, capsys)
    assert rc == 1 and "sensitivity" in line and len(line.splitlines()) == 1, line


def test_a_dropped_entry_rewritten_consistently_is_refused_by_resume_too(tmp_path, capsys):
    out = interrupted_run(tmp_path)
    recs = [r for r in ledger(out) if r["round"] != 3]            # round 3 used the clients' data
    rewrite(out, recs, run_key(out), "patched")
    rc, line = _verify(out, capsys)
    assert rc == 1 and "round 3 used client data but has no ledger entry" in line, line
    before = digest(out)
    rc, err = _resume(out, capsys)
    assert rc == 2 and "round 3 used client data but has no ledger entry" in err and len(err.splitlines()) == 1
    assert digest(out) == before


def test_a_chain_rehashed_without_the_key_is_refused(tmp_path, capsys):
    out = interrupted_run(tmp_path)
    rewrite(out, ledger(out), b"\0" * 32, "patched")             # a guessed key; ledger.id kept
    rc, line = _verify(out, capsys)
    assert rc == 1 and ("hash chain broken" in line or "was edited" in line), line
    rc, err = _resume(out, capsys)
    assert rc == 2 and len(err.splitlines()) == 1


def test_the_key_lives_outside_the_folder_private(tmp_path):
    out = interrupted_run(tmp_path)
    rid = (out / ledger_keys.RUN_ID_FILE).read_text().strip()
    cfg = load_config(out / "config.toml")
    path = ledger_keys.where(rid, cfg)
    assert path.is_file() and out.resolve() not in path.resolve().parents
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    key_hex = path.read_text().strip()
    assert len(bytes.fromhex(key_hex)) == 32
    for f in out.rglob("*"):                                     # nothing in the folder holds the key
        if f.is_file():
            assert key_hex.encode() not in f.read_bytes() and bytes.fromhex(key_hex) not in f.read_bytes()


@pytest.mark.experiment
def test_the_printed_head_is_checked(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--quiet", "--out", str(out), *[a for s in SETS for a in ("--set", s)]]) == 0
    printed = [x for x in capsys.readouterr().out.splitlines() if x.startswith("ledger head: ")]
    assert len(printed) == 1
    head = printed[0].split()[2]
    assert head == ledger(out)[-1]["hash"]
    rc, line = _verify(out, capsys, "--head", head)
    assert rc == 0 and f"is entry {len(ledger(out))} of {len(ledger(out))}" in line, line
    rewrite(out, ledger(out), run_key(out), "patched")            # the same entries, new times: a new chain
    rc, line = _verify(out, capsys, "--head", head)
    assert rc == 0                                                # (rewriting the same figures is no forgery)
    recs = ledger(out)
    recs[0]["time"] += 1.0
    rewrite(out, recs, run_key(out), "patched")
    rc, line = _verify(out, capsys, "--head", head)
    assert rc == 1 and "not the one its anchor outside the folder holds" in line, line   # the anchor (issue 35)
    anchor = ledger_keys.where(ledger_keys.read_run_id(out), load_config(out / "config.toml")).with_suffix(".anchor")
    anchor.unlink()                               # an insider who holds the key folder too: the written-down head
    rc, line = _verify(out, capsys, "--head", head)
    assert rc == 1 and "not in the ledger" in line, line
    rc, line = _verify(out, capsys, "--head", "zz")
    assert rc == 1 and "not a 64-digit hex" in line


@pytest.mark.experiment
def test_without_the_key_verify_says_so_and_still_re_derives(tmp_path, capsys):
    out = interrupted_run(tmp_path)
    key = ledger_keys.where(ledger_keys.read_run_id(out), load_config(out / "config.toml"))
    hidden = key.with_name("elsewhere")
    key.rename(hidden)
    rc, line = _verify(out, capsys)
    assert rc == 0 and "HMACs NOT checked" in line and "reduced assurance" in line and len(line.splitlines()) == 1
    assert "booked figures re-derived" in line
    before = digest(out)
    rc, err = _resume(out, capsys)                                # a keyed ledger is extended only with its key
    assert rc == 2 and "key" in err and digest(out) == before
    recs = _quartered(out)                                        # links kept, HMACs not recomputable: re-derived
    hidden.rename(key)
    rewrite(out, recs, run_key(out), "patched")
    key.rename(hidden)
    rc, line = _verify(out, capsys)
    assert rc == 1 and "sensitivity" in line


def test_a_keyed_ledger_rewritten_as_legacy_is_refused_while_its_key_is_here(tmp_path, capsys):
    """The downgrade with every figure unchanged (no ledger.id, a SHA-256 chain): the key folder knows a
    keyed run of this config, so the folder's claim to be legacy is refused by verify and by resume."""
    out = interrupted_run(tmp_path, after=4)
    to_legacy(out)
    before = digest(out)
    rc, line = _verify(out, capsys)
    assert rc != 0 and "rewritten as unkeyed" in line, line
    rc, err = _resume(out, capsys)
    assert rc != 0 and "rewritten as unkeyed" in err, err
    assert digest(out) == before


@pytest.mark.experiment
def test_a_legacy_unkeyed_folder_still_verifies_and_resumes(tmp_path, capsys, monkeypatch):
    """A folder written before keyed ledgers (here: checked on a machine that holds no keyed run of its
    config) verifies as legacy and resumes."""
    out = interrupted_run(tmp_path, after=4)
    to_legacy(out)
    monkeypatch.setenv("OTAFL_LEDGER_KEYS", str(tmp_path / "another-machine-keys"))
    rc, line = _verify(out, capsys)
    assert rc == 0 and "unkeyed (legacy)" in line and "booked figures re-derived" in line, line
    rc, err = _resume(out, capsys)
    assert rc == 0, err
    rc, line = _verify(out, capsys)
    assert rc == 0 and "unkeyed (legacy)" in line and "12 ledger entries" in line, line


def test_verify_recomputes_epsilon_with_dp_accounting(tmp_path, capsys):
    """The verdict's eps_pld is the PLD composition of the ledger's data rounds, rechecked here directly."""
    out = interrupted_run(tmp_path)
    rc, line = _verify(out, capsys)
    assert rc == 0
    data = [r for r in ledger(out) if r["uses_data"]]
    pld = None
    for r in data:
        one = pld_lib.from_gaussian_mechanism(r["sigma_eff"] / r["sensitivity"], value_discretization_interval=1e-4)
        pld = one if pld is None else pld.compose(one)
    eps = pld.get_epsilon_for_delta(1e-5)
    said = float(line.split("eps_pld ")[1].split()[0])
    assert abs(said - eps) <= 0.02 * eps


def test_read_chain_without_the_key_checks_a_keyed_folders_links_and_a_legacy_ledger_strictly(tmp_path):
    from otafl_sdr.errors import UserError
    from otafl_sdr.privacy.ledger import read_chain
    out = interrupted_run(tmp_path, after=2)
    entries, torn = read_chain(out / "privacy_ledger.jsonl")         # keyed folder, no key: the links
    assert len(entries) == 2 and not torn
    with pytest.raises(UserError, match="edited"):                   # strict: SHA-256 is not the chain's hash
        read_chain(out / "privacy_ledger.jsonl", macs=True)
    assert len(read_chain(out / "privacy_ledger.jsonl", key=run_key(out))[0]) == 2
    to_legacy(out)
    assert len(read_chain(out / "privacy_ledger.jsonl")[0]) == 2     # legacy: SHA-256 checked

