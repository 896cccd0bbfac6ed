"""The privacy ledger: every accountant of a run, an append-only JSONL file, refusal before a round.

The orchestrator asks ``check(mech)`` before a round goes on the air (BudgetExceeded when the enforcing
accountant, ``privacy.accountant``, would pass ``privacy.eps``), and ``record(mech)`` BEFORE it releases
the model: the round is composed into every accountant and one JSON line is appended to the ledger file,
flushed and fsync'ed before ``record`` returns. ``PrivacyLedger.resume`` replays that file, so spend is
never forgotten across a restart (a torn last line from a crash is dropped with a warning: that round's
``record`` never returned, so its model was never released).

One line per recorded round:
  {"round", "attempt", "sensitivity", "sigma_eff", "uses_data", "sampling_prob", "extra",
   "eps": {accountant: eps or null}, "delta", "eps_budget", "accountant", "time"}
A round is identified by (round, extra["attempt"] or 0): a retransmission of the same round with fresh
noise is a new release and must carry a new ``attempt``. Recording an identical record again is a no-op
(idempotent on resume); a different record under a recorded key is refused (ValueError). A line that books
a release on the air also carries its ``release`` id, and ``privacy_ledger.sent`` journals each id right
before its burst, so a resume knows which bookings went out (rounds/accounting.release).

Tamper evidence: each line also carries ``prev`` (the previous line's hash; for the first line the hash of
the run's config, ``genesis``, under the key: ``keyed_genesis``) and ``hash`` = HMAC-SHA256 of the line's
canonical JSON without ``hash``, under a per-run key kept outside the results folder
(privacy/ledger_keys.py; legacy ledgers: SHA-256, unkeyed). A deleted, reordered, edited or foreign line
breaks the chain (``read_chain`` names the line); without the key nobody can rehash a rewritten chain.

A raised budget (`run --resume DIR --extend N --eps E`) is a line of its own, chained and keyed like the
others (``raise_budget``): {"kind": "budget_raise", "round": the last iteration before it, "eps_budget": E,
"eps_budget_before", "from_round", "client_rounds", "extension", "calibration", "eps", "time", ...}, with
sensitivity and sigma_eff 0; it composes nothing, and every line after it books against E (``budget``).
The checkpoint stores the entry count and head hash, so a shortened or emptied ledger is caught on
resume; the head is printed at the end of a run for the operator (``verify --head``)."""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import time
import warnings
from pathlib import Path

from otafl_sdr.errors import BudgetExceeded, UserError
from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import mech_from_dict, mech_to_dict, validate

STANDARD = ("paper", "rdp", "pld")
RAISE = "budget_raise"                  # the kind of a raised budget's line (raise_budget)      # result_fields() always carries eps_<these> (None if not kept)
_MECH_KEYS = ("round", "sensitivity", "sigma_eff", "uses_data", "sampling_prob", "extra")


def _key(mech: Mechanism) -> tuple[int, int, bool]:
    """(round, attempt, is a fault charge): a fault's charge (rounds/accounting.fault_charge) is a second
    line under its attempt."""
    extra = mech.extra or {}
    return int(mech.round), int(extra.get("attempt", 0)), bool(extra.get("fault"))


def is_raise(line: dict) -> bool:
    """A raised budget's line (``PrivacyLedger.raise_budget``): composes nothing, changes the budget."""
    return isinstance(line, dict) and line.get("kind") == RAISE


def line_hash(line: dict, key: bytes | None = None) -> str:
    """The canonical JSON of a ledger line without its own ``hash``: HMAC-SHA256 under the run's ledger key
    (privacy/ledger_keys.py), or SHA-256 for a legacy, unkeyed ledger (``key`` None)."""
    body = json.dumps({k: v for k, v in line.items() if k != "hash"}, sort_keys=True, allow_nan=True).encode()
    if key is not None:
        return hmac.new(key, body, hashlib.sha256).hexdigest()
    return hashlib.sha256(body).hexdigest()


def keyed_genesis(genesis_hash: str, key: bytes | None) -> str:
    """The first line's ``prev`` of a keyed ledger: the config's genesis under the run's key (unchanged
    without a key, for legacy ledgers)."""
    if key is None:
        return genesis_hash
    return hmac.new(key, ("otafl-sdr keyed ledger\n" + genesis_hash).encode(), hashlib.sha256).hexdigest()


def genesis(config_text: str = "") -> str:
    """The ``prev`` of a ledger's first line: bound to the run's config."""
    return hashlib.sha256(("otafl-sdr ledger\n" + config_text).encode()).hexdigest()


def config_genesis(cfg) -> str:
    """The genesis of a run's ledger: its config as config.hashed_toml writes it (the keys under their
    first names, so a renamed key keeps old folders' chains), also the checkpoint's ``config_hash``."""
    from otafl_sdr.config.schema import hashed_toml
    return genesis(hashed_toml(cfg))


def read_chain(path: Path | str, genesis_hash: str | None = None, key: bytes | None = None,
               macs: bool | None = None) -> tuple[list[dict], bool]:
    """Read a ledger file without changing it: (records, torn_tail). Raises UserError naming the file and
    line for a corrupt line before the last, a broken hash chain, or (``genesis_hash`` given) a first line
    that belongs to another config. ``torn_tail``: the last line was cut by an interrupted write. ``key``:
    the run's ledger key (HMAC chain); ``macs`` True: every line's hash is checked (under ``key``, SHA-256
    without one); False: a keyed ledger read without its key, only the links (``prev`` = the line before's
    ``hash``) are checked, not the hashes themselves; None: False for a keyed folder's ledger (a ``ledger.id``
    beside it) read without its key, else True. ``verify`` and ``--resume`` always say which."""
    path = Path(path)
    if macs is None:
        from otafl_sdr.privacy.ledger_keys import RUN_ID_FILE
        macs = key is not None or not (path.parent / RUN_ID_FILE).exists()
    if path.is_dir():
        raise UserError(f"privacy ledger '{path}' is a directory, not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"privacy ledger '{path}' is not UTF-8 text; it is corrupt") from None
    lines = text.split("\n")
    records, torn = [], False
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        last = all(not x.strip() for x in lines[i + 1:])
        try:
            rec = json.loads(ln)
            if not isinstance(rec, dict) or any(k not in rec for k in ("round", "sensitivity", "sigma_eff", "hash")):
                raise ValueError("not a ledger record")
        except (ValueError, RecursionError):       # RecursionError: a line nested deeper than JSON's parser goes
            if last:
                torn = True
                break
            raise UserError(f"privacy ledger '{path}' line {i + 1} is corrupt (not a ledger record)") from None
        prev = records[-1]["hash"] if records else genesis_hash
        if prev is not None and rec.get("prev") != prev:
            what = "belongs to another run's config" if not records else "does not follow the line before it " \
                   "(a line was deleted, reordered or inserted)"
            raise UserError(f"privacy ledger '{path}' line {i + 1} {what}: hash chain broken")
        if macs and not hmac.compare_digest(line_hash(rec, key), str(rec["hash"])):
            raise UserError(f"privacy ledger '{path}' line {i + 1} was edited: its hash does not match")
        for k in ("sensitivity", "sigma_eff"):
            v = rec.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise UserError(f"privacy ledger '{path}' line {i + 1}: {k} is {v!r}, not a finite number")
        records.append(rec)
    return records, torn


class PrivacyLedger:
    """``PrivacyLedger(privacy_cfg, path=None, context=None)``: ``privacy_cfg`` is a config.PrivacyConfig
    (eps, delta, accountant, report, enforce, unit); ``path`` the JSONL file (None: memory only, e.g. the
    ``account`` calculator); ``context`` is passed to every accountant (data set sizes, options)."""

    def __init__(self, privacy_cfg, path: Path | str | None = None, context: dict | None = None,
                 genesis_hash: str | None = None, key: bytes | None = None):
        self.cfg = privacy_cfg
        self.key = key                                        # the run's HMAC key (None: legacy SHA-256 chain)
        self.genesis = keyed_genesis(genesis_hash or genesis(), key)
        self.head = self.genesis
        self.path = Path(path) if path is not None else None
        self.context = dict(context or {})
        self.enforcing = privacy_cfg.accountant
        # the tight (PLD) epsilon is always reported, whatever the enforcing accountant and the report list
        names = [privacy_cfg.accountant] + [n for n in privacy_cfg.report] + ["pld"]
        self.names = list(dict.fromkeys(names))               # enforcing first, no duplicates
        self.accountants = {}
        for n in self.names:
            key = "privacy.accountant" if n == privacy_cfg.accountant else "privacy.report"
            self.accountants[n] = ACCOUNTANTS.get(n, key)(privacy_cfg.delta, **self.context)
        self._records: dict[tuple, dict] = {}                  # key -> JSON line (as a dict), raises included
        self.budget = float(privacy_cfg.eps)                   # privacy.eps, or the last raise's eps_budget
        self.raises: list[dict] = []                            # the raised budget's lines, in order
        self.anchor = None        # privacy/ledger_anchor.LedgerAnchor: kept outside the folder, after each write

    # -- asking ------------------------------------------------------------------------------------
    def would_exceed(self, mech: Mechanism) -> bool:
        """True when the enforcing accountant's epsilon after ``mech`` would be > privacy.eps (or it
        cannot account ``mech`` at all). Changes nothing."""
        validate(mech)
        prior = self._records.get(_key(mech))
        if prior is not None and self._same(prior, mech):
            return False                                      # already spent and recorded
        return self.accountants[self.enforcing].would_exceed(mech, self.budget)

    def check(self, mech: Mechanism) -> None:
        """Raise BudgetExceeded when enforcing and ``mech`` would exceed the budget."""
        if not self.cfg.enforce or not self.would_exceed(mech):
            return
        acc = self.accountants[self.enforcing]
        eps = acc.peek(mech)
        if eps is None:
            raise BudgetExceeded(
                f"round {mech.round}: accountant '{self.enforcing}' cannot account this round or an earlier "
                f"one (this round: sampling_prob={mech.sampling_prob:g}; its analysis needs 1); refusing it "
                f"under privacy.enforce")
        raise BudgetExceeded(
            f"round {mech.round} would raise eps to {eps:.6g} > budget privacy.eps={self.budget:g} "
            f"(accountant '{self.enforcing}', delta={self.cfg.delta:g}); round refused")

    # -- spending ----------------------------------------------------------------------------------
    def record(self, mech: Mechanism, release: str | None = None) -> dict[str, float | None]:
        """Compose ``mech`` into every accountant and append its line to the ledger file (fsync'ed
        before returning). Never refuses on budget: what was transmitted has been spent. ``release``: the
        id of the one release this line books (rounds/accounting.release), kept in the line as
        ``release``; an identical re-record stays a no-op and keeps the line's own id."""
        validate(mech)
        key = _key(mech)
        prior = self._records.get(key)
        if prior is not None:
            if self._same(prior, mech):
                return dict(prior["eps"])
            raise ValueError(f"privacy ledger: round {key[0]} (attempt {key[1]}) is already recorded with "
                             f"a different mechanism; refusing to record it twice")
        for acc in self.accountants.values():
            acc.step(mech)
        line = self._line(mech)
        if release is not None:
            line["release"] = str(release)
        line["prev"] = self.head
        line["hash"] = line_hash(line, self.key)
        if self.path is not None:
            self._append(line)
        self._records[key] = line
        self.head = line["hash"]
        if self.anchor is not None and self.path is not None:     # after the line is durable (ledger_anchor.py)
            self.anchor.appended(len(self._records), self.head)
        return dict(line["eps"])

    def _line(self, mech: Mechanism) -> dict:
        m = mech_to_dict(mech)
        return {"round": m["round"], "attempt": _key(mech)[1],
                **{k: m[k] for k in _MECH_KEYS if k != "round"},
                "eps": self.epsilons(), "delta": self.cfg.delta, "eps_budget": self.budget,
                "accountant": self.enforcing, "time": time.time()}

    def raise_budget(self, eps: float, fields: dict) -> dict:
        """Raise the budget to ``eps`` (> the current one) from now on: one more line, chained, keyed and
        fsync'ed like a round's (module docstring), anchored after it is durable. ``fields``: from_round,
        client_rounds, extension, calibration (what the orchestrator solved for the new target). Nothing is
        composed: the accountants go on from what the ledger already holds."""
        eps = float(eps)
        if not math.isfinite(eps) or eps <= self.budget:
            raise UserError(f"--eps {eps:g} must be above the run's current target eps {self.budget:g}")
        if self.path is None:
            raise UserError("a budget is raised only on a run's ledger file")
        line = {"kind": RAISE, "round": max((int(r["round"]) for r in self._records.values() if not is_raise(r)),
                                            default=0),
                "sensitivity": 0.0, "sigma_eff": 0.0, **fields, "eps_budget": eps, "eps_budget_before": self.budget,
                "eps": self.epsilons(), "delta": self.cfg.delta, "accountant": self.enforcing, "time": time.time()}
        line["prev"] = self.head
        line["hash"] = line_hash(line, self.key)
        self._append(line)
        self._records[(RAISE, len(self.raises))] = line
        self.raises.append(line)
        self.head = line["hash"]
        self.budget = eps
        if self.anchor is not None:
            self.anchor.appended(len(self._records), self.head)
        return line

    def _append(self, line: dict) -> None:
        try:
            self._write(line)
        except OSError as e:
            raise UserError(f"cannot write the privacy ledger '{self.path}' ({e.strerror or type(e).__name__}); "
                            f"round {line['round']} was not released") from None

    def _write(self, line: dict) -> None:
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, allow_nan=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if new:                                               # make the new directory entry durable
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # -- releases: which bookings went on the air (rounds/accounting.release) ----------------------------
    def next_attempt(self, round_index: int) -> int:
        """The first attempt number of round ``round_index`` that no ledger line books yet."""
        return max((int(x.get("attempt", 0)) for x in self._records.values()
                    if x["round"] == int(round_index) and not is_raise(x)), default=-1) + 1

    def has_round(self, round_index: int) -> bool:
        return any(x["round"] == int(round_index) and not is_raise(x) for x in self._records.values())

    @property
    def sent_path(self) -> Path | None:
        """The journal of releases sent (``privacy_ledger.sent`` beside the ledger): one JSON line per
        release id, fsync'ed right before its burst is handed to the air."""
        return None if self.path is None else self.path.with_name(self.path.stem + ".sent")

    def open_sent_journal(self) -> None:
        """Start the journal while no line books a release (a fresh ledger, or one written before release
        ids). A ledger whose lines name releases but has no journal (deleted) gets none: every one of its
        entries then counts as sent; ``unsent`` also needs the last line's own id."""
        p = self.sent_path
        if p is None or p.exists() or any("release" in r for r in self._records.values()):
            return
        try:
            with open(p, "a", encoding="utf-8") as f:
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise UserError(f"cannot write '{p}' ({e.strerror or type(e).__name__}); nothing was released") from None

    def mark_sent(self, release: str, round_index: int, attempt: int) -> None:
        """Journal that release ``release`` is about to go on the air (fsync'ed before the burst)."""
        p = self.sent_path
        if p is None or not p.exists():
            return                                 # no journal: every entry counts as sent anyway
        try:
            with open(p, "a", encoding="utf-8") as f:
                f.write(json.dumps({"release": str(release), "round": int(round_index), "attempt": int(attempt),
                                    "time": time.time()}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise UserError(f"cannot write '{p}' ({e.strerror or type(e).__name__}); round {round_index} was not "
                            f"released") from None
        if self.anchor is not None:                # after the journal's line: the folder never behind it
            self.anchor.sent(release)

    def mark_unsent(self, release: str, round_index: int, attempt: int) -> None:
        """Journal that release ``release``, marked sent, provably never went on the air (the transport
        refused it before any client was told, e.g. the uhd testbed's clock check): its booking may carry
        the next attempt (``unsent`` reads the journal's last word on each id)."""
        p = self.sent_path
        if p is None or not p.exists():
            return
        if self.anchor is not None:                # before the journal's line: the folder never behind it
            try:
                self.anchor.withdrawn(release)
            except UserError:
                return                             # not withdrawn: counts as sent (over-counts, never under)
        try:
            with open(p, "a", encoding="utf-8") as f:
                f.write(json.dumps({"release": str(release), "round": int(round_index), "attempt": int(attempt),
                                    "withdrawn": True, "time": time.time()}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            pass                                   # the booking then counts as sent: over-counts, never under

    def unsent(self, round_index: int) -> dict | None:
        """The ledger's LAST line when it books round ``round_index`` and the journal proves it never went on the air
        (a crash between the booking and the burst, or a send withdrawn by ``mark_unsent``): its id is not in
        a journal that exists and parses, or its last journal line withdraws it. Anything else (no journal,
        an unreadable one, a line before the last) is None: counted as sent."""
        p = self.sent_path
        if not self._records or p is None or not p.is_file():
            return None
        last = next(reversed(self._records.values()))
        rid = last.get("release")
        if int(last["round"]) != int(round_index) or not isinstance(rid, str) or not rid:
            return None
        try:
            if p.stat().st_size > 64 << 20:
                return None
            sent = False
            for ln in p.read_text(encoding="utf-8").splitlines():
                d = json.loads(ln) if ln.strip() else {}
                if d.get("release") == rid:
                    sent = not d.get("withdrawn", False)
            if sent:
                return None
        except (OSError, ValueError, AttributeError, RecursionError):
            return None
        return dict(last)

    @staticmethod
    def _same(line: dict, mech: Mechanism) -> bool:
        m = mech_to_dict(mech)
        return all(line.get(k) == m[k] for k in _MECH_KEYS)

    # -- reporting ---------------------------------------------------------------------------------
    def epsilons(self) -> dict[str, float | None]:
        return {n: acc.epsilon() for n, acc in self.accountants.items()}

    def result_fields(self) -> dict[str, float | None]:
        """{"eps_paper", "eps_rdp", "eps_pld", then eps_<name> of any other accountant}."""
        eps = self.epsilons()
        out = {f"eps_{n}": eps.get(n) for n in STANDARD}
        out.update({f"eps_{n}": v for n, v in eps.items() if n not in STANDARD})
        return out

    @property
    def epsilon(self) -> float | None:
        """The enforcing accountant's epsilon."""
        return self.accountants[self.enforcing].epsilon()

    @property
    def exceeded(self) -> bool:
        eps = self.epsilon
        return eps is None or eps > self.budget

    @property
    def rounds_recorded(self) -> int:
        """The ledger's lines (a raised budget's included: the checkpoint and the anchor count lines)."""
        return len(self._records)

    def records(self) -> list[dict]:
        return list(self._records.values())

    # -- persistence -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"records": [dict(r) for r in self._records.values()]}

    def load_state_dict(self, state: dict) -> None:
        """Rebuild the accountants exactly by replaying the records in their order."""
        self._records = {}
        self.budget, self.raises = float(self.cfg.eps), []
        for acc in self.accountants.values():
            acc.load_state_dict({"history": []})
        for line in state.get("records", []):
            if is_raise(line):
                eps = line.get("eps_budget")
                if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) \
                        or eps <= self.budget:
                    raise UserError(f"privacy ledger raises the budget to {eps!r}, not above {self.budget:g}; "
                                    f"it is corrupt")
                self._records[(RAISE, len(self.raises))] = dict(line)
                self.raises.append(dict(line))
                self.budget = float(eps)
                self.head = line.get("hash", self.head)
                continue
            mech = mech_from_dict(line)
            validate(mech)
            key = _key(mech)
            if key in self._records:
                if self._same(self._records[key], mech):
                    continue
                raise UserError(f"privacy ledger holds round {key[0]} (attempt {key[1]}) twice with "
                                f"different mechanisms; it is corrupt")
            for acc in self.accountants.values():
                acc.step(mech)
            self._records[key] = dict(line)
            self.head = line.get("hash", self.head)
        self._check_replay()

    def _check_replay(self) -> None:
        """The recomputed epsilons should equal the last recorded ones (same delta): warn otherwise."""
        if not self._records:
            return
        last = next(reversed(self._records.values()))
        if last.get("delta") != self.cfg.delta:
            warnings.warn(f"privacy ledger was written with delta={last.get('delta')}, now "
                          f"delta={self.cfg.delta}: epsilons are recomputed at the new delta", stacklevel=3)
            return
        now = self.epsilons()
        for n, old in (last.get("eps") or {}).items():
            new = now.get(n)
            if n in now and not _equal(old, new):
                warnings.warn(f"privacy ledger: accountant '{n}' replays to eps={new} but the file says "
                              f"{old} (accountant changed since the run?)", stacklevel=3)

    @classmethod
    def resume(cls, privacy_cfg, path: Path | str, context: dict | None = None,
               genesis_hash: str | None = None, key: bytes | None = None) -> "PrivacyLedger":
        """Rebuild from the JSONL file, checking its hash chain (``read_chain``). A torn last line (crash
        mid-write: that round's ``record`` never returned, so its model was never released) is cut from the
        file with a warning; the caller checks the count and head against its checkpoint."""
        path = Path(path)
        ledger = cls(privacy_cfg, path, context, genesis_hash, key)
        if not path.exists():
            return ledger
        good, torn = read_chain(path, ledger.genesis, key, macs=True)
        if torn:
            warnings.warn(f"privacy ledger '{path}': ignoring a truncated last line left by an interrupted write",
                          stacklevel=2)
            text = "".join(json.dumps(r, allow_nan=True) + "\n" for r in good)
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        elif good and not path.read_bytes().endswith(b"\n"):
            warnings.warn(f"privacy ledger '{path}': last line had no newline (interrupted write); kept it "
                          f"because it is a complete record", stacklevel=2)
            with open(path, "ab") as f:
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
        ledger.load_state_dict({"records": good})
        return ledger


def _equal(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == b or abs(a - b) <= 1e-12 * max(1.0, abs(a))
