"""The server's check of the IQ links of a zmq attempt, and the bound on attacked rounds.

Both ends of every IQ link report each burst (``iq_report``: the samples pushed / received and the
burst's tag, radio/zmq_channel.burst_tag, keyed per link so that only the two ends can compute it). A
link whose reader got fewer samples than its sender pushed (another reader took them), or whose tags
differ (samples injected, altered or replayed from another attempt), makes the attempt *attacked*: it is
lost, its aggregate is discarded, and the log and the round's notes name it. Every attempt that was sent
stays booked (the release rule). Once ``net.max_attacked_rounds`` rounds have been attacked the run stops
with that reason (exit 1; checkpoint and ledger kept) instead of paying for ever more retries. The count
is the whole run's: each attacked attempt is appended to ``DIR/iq_attacks.jsonl`` (fsync'ed before the run
goes on) and a ``--resume`` counts the rounds already there; the journal's line count is anchored outside the
folder (privacy/ledger_anchor.py), so a resume of a folder whose journal lost lines is refused."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from otafl_sdr.errors import UserError

log = logging.getLogger("otafl.net")

ATTACKED = "IQ link attacked"
JOURNAL = "iq_attacks.jsonl"
MAX_JOURNAL_BYTES = 16 << 20


def link_problems(reports: dict[tuple[str, str], dict], dropped=frozenset()) -> list[str]:
    """``reports``: (link 'SENDER>READER', side 'sent' | 'got') -> the report's fields (``samples``: how
    many the sender pushed / the reader got; ``complete``: all of the burst; ``tag``: of the whole burst).
    One line per link that shows an attack: the sender pushed its whole burst and the reader got less
    (another reader took samples), or the reader got a whole burst whose tag is not the sender's
    (injected, altered or replayed from another attempt). A link is judged only when both ends reported
    and its sender was not dropped; a slow link (the sender could not push it all) is not an attack."""
    out = []
    for (link, side), got in sorted(reports.items()):
        sent = reports.get((link, "sent"))
        if side != "got" or sent is None:
            continue
        sender, reader = link.split(">", 1)
        if sender in dropped:
            continue
        n_s, n_g = int(sent["samples"]), int(got["samples"])
        if got["complete"] and sent["tag"] and got["tag"] and sent["tag"] != got["tag"]:
            out.append(f"{link}: the burst {reader} got fails its integrity tag (samples injected, altered "
                       f"or from another attempt)")
        elif sent["complete"] and n_g < n_s:
            out.append(f"{link}: {reader} got {n_g} of the {n_s} samples {sender} pushed (taken by another "
                       f"reader, or the link is broken)")
    return out


class IqGuard:
    """Counts the rounds whose attempts were attacked; ``judge`` returns the reason to stop, or ''."""

    def __init__(self, max_attacked_rounds: int):
        self.max = int(max_attacked_rounds)
        self.rounds: dict[int, list[str]] = {}
        self.journal: Path | None = None
        self.anchor = None                  # privacy/ledger_anchor.LedgerAnchor of the run (None: not anchored)
        self.lines = 0                      # complete lines in the journal

    def persist(self, out, anchor=None) -> None:
        """Record attacked attempts in ``out``/iq_attacks.jsonl, and count those of the run's earlier
        sessions (a resume). A torn last line (a crash while writing it) is left out; any other damage is
        refused in one line (exit 2), as a count that cannot be read cannot bound the run. ``anchor``: the
        run's anchor (or a function that finds it once the run has its key), told the journal's line count
        after each append."""
        self.journal = Path(out) / JOURNAL
        self.anchor = anchor
        try:
            if not self.journal.exists():
                return
            if not self.journal.is_file() or self.journal.stat().st_size > MAX_JOURNAL_BYTES:
                raise UserError(f"{self.journal}: not a file of at most {MAX_JOURNAL_BYTES} bytes")
            text = self.journal.read_text(errors="strict")
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{self.journal}: cannot read the IQ attack journal: {e}") from None
        lines = text.split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                round_index, problems = e["round"], e["problems"]
                if type(round_index) is not int or round_index < 1 or not isinstance(problems, list):
                    raise ValueError("bad fields")
            except (ValueError, KeyError, TypeError, RecursionError):
                if n == len(lines) and not text.endswith("\n"):
                    continue                     # torn while being written: that attempt's stop never ran
                raise UserError(f"{self.journal}: line {n} is not an attacked attempt (damaged); the run's "
                                f"IQ attack count cannot be read") from None
            self.rounds.setdefault(round_index, []).extend(str(p) for p in problems)
            self.lines += 1

    def _record(self, round_index: int, attempt: int, problems: list[str], release: str) -> str:
        """Append one attacked attempt to the journal (fsync); a failure is a reason to stop."""
        if self.journal is None:
            return ""
        line = json.dumps({"round": int(round_index), "attempt": int(attempt), "release": release,
                           "problems": list(problems)}) + "\n"
        try:
            with open(self.journal, "a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            return (f"{ATTACKED} in round {round_index}, and it cannot be recorded in {self.journal} ({e.strerror}); "
                    f"stopped, checkpoint and ledger kept")
        self.lines += 1
        if callable(self.anchor):
            self.anchor = self.anchor()
        if self.anchor is not None:
            try:
                self.anchor.journaled(JOURNAL, self.lines)
            except UserError as e:
                return f"{ATTACKED} in round {round_index}, and {e}; stopped, checkpoint and ledger kept"
        return ""

    def judge(self, round_index: int, attempt: int, reception, notes: list, release: str = "") -> str:
        problems = reception.extra.get("attacked") if isinstance(reception.extra, dict) else None
        if not problems:
            return ""
        self.rounds.setdefault(round_index, []).extend(problems)
        notes.append(f"round {round_index}: attempt {attempt} attacked on the IQ plane ({'; '.join(problems)}); "
                     f"booked, aggregate discarded")
        log.error("round %d attempt %d: %s: %s", round_index, attempt, ATTACKED, "; ".join(problems))
        failed = self._record(round_index, attempt, problems, release)
        if failed:
            return failed
        if len(self.rounds) >= self.max:
            return (f"{ATTACKED} in {len(self.rounds)} round(s) ({', '.join(map(str, sorted(self.rounds)))}; "
                    f"net.max_attacked_rounds = {self.max}): {problems[0]}; stopped, checkpoint and ledger kept "
                    f"(every attempt sent is booked)")
        return ""
