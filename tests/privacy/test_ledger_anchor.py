"""The anchor itself (privacy/ledger_anchor.py): what a folder behind it lacks is named, a crash between the
folder's write and the anchor's leaves the folder ahead (accepted), a damaged anchor is one line, a failed
start leaves no key behind, and the IQ attack journal (net/iq_guard.py) is anchored by its line count."""
import json

import pytest

from otafl_sdr.configure.load import default_experiment
from otafl_sdr.errors import UserError
from otafl_sdr.net.iq_guard import JOURNAL, IqGuard
from otafl_sdr.privacy import ledger_keys
from otafl_sdr.privacy.ledger_anchor import LedgerAnchor, complete_lines, problems
from otafl_sdr.transmission import Reception

RECS = [{"round": i, "hash": f"h{i}", "release": f"r{i}"} for i in (1, 2, 3)]


def _anchor(tmp_path, *lines):
    a = LedgerAnchor(tmp_path / "run.anchor")
    a.start()
    for i in (1, 2, 3):
        a.appended(i, f"h{i}")
        a.sent(f"r{i}")
    for kind, v in lines:
        getattr(a, kind)(v)
    return a


def test_a_folder_at_or_ahead_of_its_anchor_passes(tmp_path):
    state = _anchor(tmp_path).read()
    sent = {f"r{i}": True for i in (1, 2, 3)}
    assert problems(state, RECS, sent, 0) == ""
    assert problems(state, RECS + [{"round": 4, "hash": "h4"}], {**sent, "r4": True}, 0) == ""     # ahead


@pytest.mark.parametrize("records,journal,extension,words", [
    (RECS[:2], {"r1": True, "r2": True}, 0, "holds 2 entries but its anchor outside the folder holds 3"),
    (RECS[:2] + [{"round": 3, "hash": "forged"}], {f"r{i}": True for i in (1, 2, 3)}, 0, "entry 3 is not the one"),
    (RECS, {"r1": True, "r2": True}, 0, "lacks release r3"),
    (RECS, {"r1": True, "r2": True, "r3": False}, 0, "withdraws release r3"),
    (RECS, None, 0, "is missing release r1"),
    (RECS, {f"r{i}": True for i in (1, 2, 3)}, 2, "extension.json adds 2 client rounds but its anchor"),
])
def test_what_a_rolled_back_folder_lacks_is_named(tmp_path, records, journal, extension, words):
    assert words in problems(_anchor(tmp_path).read(), records, journal, extension)


def test_a_crash_between_the_anchor_and_the_folder_is_not_a_rollback(tmp_path):
    """Withdrawals and extensions are anchored first: the folder may still say sent, or the old count."""
    a = _anchor(tmp_path, ("withdrawn", "r3"), ("extended", 2))
    sent = {f"r{i}": True for i in (1, 2, 3)}
    assert problems(a.read(), RECS, sent, 0) == ""           # crashed before extension.json said 2
    assert problems(a.read(), RECS, sent, 2) == ""
    a.appended(3, "h3")                                       # a round ran since: the old count is a rollback
    assert "adds 0 client rounds" in problems(a.read(), RECS, sent, 0)


def test_a_torn_last_line_is_left_out_and_other_damage_is_one_line(tmp_path):
    a = _anchor(tmp_path)
    with open(a.path, "a") as f:
        f.write('{"entries": 4, "he')
    assert a.read().entries == 3
    a.path.write_text('{"entries": 1, "head": "h1"}\n{"what": 1}\n{"entries": 1, "head": "h1"}\n')
    with pytest.raises(UserError, match="line 2 is corrupt"):
        a.read()


def test_a_failed_start_leaves_no_key_behind(tmp_path, monkeypatch):
    # a key folder of this test's own: the session's is shared by every xdist worker, whose runs add keys to it
    monkeypatch.setenv("OTAFL_LEDGER_KEYS", str(tmp_path / "ledger-keys"))
    cfg = default_experiment(["air.name=sim"])
    (tmp_path / "earlier-run").mkdir()
    ledger_keys.create(tmp_path / "earlier-run", cfg, "c0ffee")   # a run that started: its key stays
    before = set(ledger_keys.key_dir(cfg).glob("*"))
    assert before
    (tmp_path / "not-a-folder").write_text("")
    with pytest.raises(UserError, match=r"cannot write '.*ledger.id'"):
        ledger_keys.create(tmp_path / "not-a-folder" / "run", cfg, "c0ffee")
    assert set(ledger_keys.key_dir(cfg).glob("*")) == before


def test_the_iq_attack_journal_is_anchored(tmp_path):
    anchor = LedgerAnchor(tmp_path / "run.anchor")
    anchor.start()
    guard = IqGuard(max_attacked_rounds=5)
    guard.persist(tmp_path, anchor)
    for it in (2, 4):
        assert guard.judge(it, 0, Reception(None, extra={"attacked": [f"link x>y in round {it}"]}), []) == ""
    state = anchor.read()
    assert state.journals == {JOURNAL: 2} and complete_lines(tmp_path / JOURNAL) == 2
    assert problems(state, [], None, 0, {JOURNAL: 2}) == ""
    lines = (tmp_path / JOURNAL).read_text().splitlines()
    (tmp_path / JOURNAL).write_text(lines[0] + "\n")          # the attacker erases one attacked round
    assert "iq_attacks.jsonl holds 1 lines but its anchor outside the folder counts 2" in problems(
        state, [], None, 0, {JOURNAL: complete_lines(tmp_path / JOURNAL)})
    resumed = IqGuard(max_attacked_rounds=5)                  # a resume counts what the journal holds
    resumed.persist(tmp_path, anchor)
    assert resumed.lines == 1 and json.loads(lines[1])["round"] == 4
