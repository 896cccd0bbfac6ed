"""The ledger's anchor: what a run's results folder held last, kept beside its ledger key OUTSIDE the folder
(``key_dir(cfg)/<run id>.anchor``, privacy/ledger_keys.py), so that whoever can rewrite the folder cannot roll
it back to an earlier, valid state (a chain prefix, the rows and sent-journal lines of those rounds dropped,
the checkpoint's counters rewritten, summary.json deleted) and have a resume release those rounds again.

The anchor is append-only JSON lines, each fsync'ed before the run goes on:
  {"entries": N, "head": HEX}     after the ledger's N-th line was written (PrivacyLedger.record)
  {"sent": ID}                    after the sent-journal's line for release ID (PrivacyLedger.mark_sent)
  {"withdrawn": ID}               before the journal withdraws release ID (PrivacyLedger.mark_unsent)
  {"extension": N}                before extension.json says N client rounds were added (--extend, a re-run)
  {"journal": NAME, "lines": N}   after an append-only journal of the folder (net/iq_guard's
                                  iq_attacks.jsonl: the attacked rounds a resume counts) reached N lines
The order (the folder first, then the anchor; a withdrawal and an extension the other way round) makes a
crash between the two writes leave the folder at or ahead of its anchor, never behind it.

``problems(folder state)`` is the check `verify` and `run --resume` share (workload/ledger_checks.py): a
folder with fewer ledger entries than its anchor, another entry where the anchor's head was, a release the
anchor holds as sent that the folder's journal lacks (or withdraws), another extension count, or an anchored
journal with fewer lines than the anchor counts, is refused."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from otafl_sdr.errors import UserError

SUFFIX = ".anchor"
MAX_BYTES = 64 << 20


@dataclass
class AnchorState:
    """What the anchor holds: the ledger's latest (entries, head), each release's last word (True: sent,
    False: withdrawn), the extension's client rounds (``extensions``: every value in order) and whether its
    last line is an extension (a crash may have come before extension.json was rewritten)."""
    entries: int = 0
    head: str | None = None
    releases: dict = field(default_factory=dict)
    extensions: list = field(default_factory=list)
    last_is_extension: bool = False
    journals: dict = field(default_factory=dict)      # file name in the folder -> lines it held

    @property
    def extension(self) -> int:
        return self.extensions[-1] if self.extensions else 0


class LedgerAnchor:
    """The anchor file at ``path`` (see the module docstring; a run's: privacy/ledger_keys.anchor)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.is_file()

    # -- writing (each line fsync'ed) ------------------------------------------------------------------
    def start(self, entries: int = 0, head: str | None = None) -> None:
        """Create the anchor (a new run: 0 entries; a keyed run from before anchors: its state now)."""
        self._append({"entries": int(entries), "head": head}, create=True)

    def appended(self, entries: int, head: str) -> None:
        self._append({"entries": int(entries), "head": str(head)})

    def sent(self, release: str) -> None:
        self._append({"sent": str(release)})

    def withdrawn(self, release: str) -> None:
        self._append({"withdrawn": str(release)})

    def extended(self, client_rounds: int) -> None:
        self._append({"extension": int(client_rounds)})

    def journaled(self, name: str, lines: int) -> None:
        self._append({"journal": str(name), "lines": int(lines)})

    def _append(self, line: dict, create: bool = False) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if create else 0)
        try:
            if not create and not self.path.is_file():
                raise FileNotFoundError(2, "No such file or directory")
            fd = os.open(self.path, flags, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise UserError(f"cannot write the ledger's anchor '{self.path}' ({e.strerror or type(e).__name__}); "
                            f"nothing more was released") from None

    # -- reading -----------------------------------------------------------------------------------------
    def read(self) -> AnchorState | None:
        """The anchor's state (None: no anchor). A torn last line (a crash while appending it: what it
        anchors was not yet relied on) is left out; any other damage is one UserError."""
        try:
            if not self.path.exists():
                return None
            if not self.path.is_file() or self.path.stat().st_size > MAX_BYTES:
                raise UserError(f"the ledger's anchor '{self.path}' is not a file of at most {MAX_BYTES} bytes")
            text = self.path.read_text(encoding="utf-8")
        except PermissionError:
            return None                                  # not this user's: as a key that is not here
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"the ledger's anchor '{self.path}' is unreadable "
                            f"({getattr(e, 'strerror', None) or type(e).__name__})") from None
        state, lines = AnchorState(), text.split("\n")
        for n, ln in enumerate(lines, 1):
            if not ln.strip():
                continue
            try:
                d = json.loads(ln)
                if not isinstance(d, dict):
                    raise ValueError
                state.last_is_extension = False
                if "entries" in d:
                    if type(d["entries"]) is not int or d["entries"] < 0:
                        raise ValueError
                    state.entries, state.head = d["entries"], d.get("head")
                elif "sent" in d or "withdrawn" in d:
                    state.releases[str(d.get("sent", d.get("withdrawn")))] = "sent" in d
                elif "journal" in d:
                    if type(d.get("lines")) is not int or d["lines"] < 0 or "/" in str(d["journal"]):
                        raise ValueError
                    state.journals[str(d["journal"])] = d["lines"]
                elif "extension" in d:
                    if type(d["extension"]) is not int or d["extension"] < 0:
                        raise ValueError
                    state.extensions.append(d["extension"])
                    state.last_is_extension = True
                else:
                    raise ValueError
            except (ValueError, KeyError, RecursionError):
                if n == len(lines) and not text.endswith("\n"):
                    continue                             # torn while being appended
                raise UserError(f"the ledger's anchor '{self.path}' line {n} is corrupt") from None
        return state


def journal_releases(path: Path) -> dict | None:
    """The sent-journal's last word on each release id (True: sent, False: withdrawn); None: no journal.
    A torn last line is left out; an unreadable journal is one UserError."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            raise UserError(f"'{path}' is not a file of at most {MAX_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"'{path}' is unreadable ({getattr(e, 'strerror', None) or type(e).__name__})") from None
    out, lines = {}, text.split("\n")
    for n, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            d = json.loads(ln)
            if not isinstance(d, dict) or not isinstance(d.get("release"), str):
                raise ValueError
        except (ValueError, RecursionError):
            if n == len(lines) and not text.endswith("\n"):
                continue
            raise UserError(f"'{path}' line {n} is not a sent-journal line; it is corrupt") from None
        out[d["release"]] = not d.get("withdrawn", False)
    return out


def complete_lines(path: Path) -> int:
    """The complete (newline-ended, non-blank) lines of an append-only journal (0: no file)."""
    path = Path(path)
    try:
        if not path.is_file():
            return 0
        text = path.read_bytes()[:MAX_BYTES]
    except OSError:
        return 0
    return sum(1 for ln in text.split(b"\n")[:-1] if ln.strip())


def problems(anchor: AnchorState, records: list, journal: dict | None, extension: int,
             journal_lines: dict | None = None) -> str:
    """'' when the folder (its ledger ``records``, its sent ``journal``, its ``extension``, its anchored
    journals' ``journal_lines``: name -> complete lines) is at or ahead of its ``anchor``; else what it lacks,
    in a few words (the caller names the folder)."""
    if len(records) < anchor.entries:
        return (f"its ledger holds {len(records)} entries but its anchor outside the folder holds {anchor.entries} "
                f"(the folder was rolled back)")
    if anchor.entries and records[anchor.entries - 1].get("hash") != anchor.head:
        return f"its ledger's entry {anchor.entries} is not the one its anchor outside the folder holds"
    for rid, sent in anchor.releases.items():
        if sent and not (journal or {}).get(rid, False):
            round_index = next((r.get("round") for r in records if r.get("release") == rid), "?")
            what = "is missing" if journal is None else ("withdraws" if rid in journal else "lacks")
            return (f"its sent-journal {what} release {rid[:12]} (round {round_index}), which its anchor outside the folder "
                    f"holds as sent (the folder was rolled back)")
    allowed = {anchor.extension} | ({anchor.extensions[-2] if len(anchor.extensions) > 1 else 0}
                                    if anchor.last_is_extension else set())
    if extension not in allowed:
        return (f"its extension.json adds {extension} client rounds but its anchor outside the folder says "
                f"{anchor.extension}")
    for name, lines in anchor.journals.items():
        have = (journal_lines or {}).get(name, 0)
        if have < lines:
            return (f"its {name} holds {have} lines but its anchor outside the folder counts {lines} (lines were "
                    f"removed)")
    return ""
