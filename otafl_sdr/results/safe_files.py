"""Reading files a results folder, a sweep or a recording holds, as a reader that trusts none of them:
every failure (missing, a folder in place of a file, unreadable, too large, not UTF-8, not JSON, nested
deeper than any file otafl-sdr writes, the wrong type) is a one-line UserError naming the file, never a
traceback (RecursionError, MemoryError, OSError) in the code that reads it."""
from __future__ import annotations

import json
from pathlib import Path

from otafl_sdr.errors import UserError

MAX_BYTES = 1 << 30          # 1 GiB: no file otafl-sdr writes as text comes near it
MAX_DEPTH = 64               # JSON nesting: the deepest file otafl-sdr writes is about 5 levels deep


def describe_os_error(e: OSError) -> str:
    """'No space left on device' (the errno's text, or the exception's type when it has none)."""
    return e.strerror or type(e).__name__


def read_bytes(path: Path | str, what: str = "file", max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``; a folder, a missing or unreadable file or one over ``max_bytes`` is a UserError."""
    path = Path(path)
    try:
        if path.is_dir():
            raise UserError(f"{what} '{path}' is a folder, not a file")
        size = path.stat().st_size
        if size > max_bytes:
            raise UserError(f"{what} '{path}' is {size} bytes, more than the {max_bytes} a reader accepts")
        with open(path, "rb") as f:
            return f.read(max_bytes + 1)[:max_bytes]
    except FileNotFoundError:
        raise UserError(f"{what} '{path}' not found") from None
    except OSError as e:
        raise UserError(f"cannot read {what} '{path}' ({describe_os_error(e)})") from None


def read_text(path: Path | str, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    """``read_bytes`` decoded as UTF-8 (anything else is a UserError naming the file)."""
    try:
        return read_bytes(path, what, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{what} '{path}' is not UTF-8 text; it is corrupt") from None


def depth(obj, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of lists and dicts in ``obj``, counted without recursion; stops once past ``limit``."""
    deepest, stack = 0, [(obj, 0)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            d += 1
            if d > deepest:
                deepest = d
                if d > limit:
                    return d
            stack.extend((x, d) for x in (o.values() if isinstance(o, dict) else o))
    return deepest


def loads(text: str | bytes, where: str, max_depth: int = MAX_DEPTH):
    """``json.loads`` that raises UserError('WHERE is not valid JSON ...') for garbage, nesting deeper than
    ``max_depth`` (before Python's recursion limit can be reached by anyone walking the result), numbers
    too long to convert, or a text too large for memory."""
    try:
        obj = json.loads(text)
    except RecursionError:
        raise UserError(f"{where} is nested deeper than {max_depth} levels; it is not a file otafl-sdr wrote") from None
    except MemoryError:
        raise UserError(f"{where} is too large to read") from None
    except (ValueError, TypeError) as e:
        reason = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        raise UserError(f"{where} is not valid JSON ({reason})") from None
    if depth(obj, max_depth) > max_depth:
        raise UserError(f"{where} is nested deeper than {max_depth} levels; it is not a file otafl-sdr wrote")
    return obj


def load_json(path: Path | str, what: str = "file", expect: type | None = dict, max_bytes: int = MAX_BYTES):
    """The JSON value in ``path`` (of type ``expect`` unless None), or a one-line UserError naming the file."""
    obj = loads(read_text(path, what, max_bytes), f"{what} '{path}'")
    if expect is not None and not isinstance(obj, expect):
        kind = {dict: "a JSON object", list: "a JSON array"}.get(expect, expect.__name__)
        raise UserError(f"{what} '{path}' holds {type(obj).__name__}, not {kind}; it is corrupt")
    return obj


def load_toml(path: Path | str, what: str = "TOML file", max_bytes: int = 64 << 20) -> dict:
    """A TOML file as dicts; garbage, nesting too deep for the parser or a non-text file is a UserError."""
    import tomllib
    text = read_text(path, what, max_bytes)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} '{path}' is not valid TOML: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise UserError(f"{what} '{path}' is nested deeper than {MAX_DEPTH} levels") from None
    except (MemoryError, ValueError) as e:
        raise UserError(f"{what} '{path}' cannot be read as TOML ({type(e).__name__})") from None
    if depth(data) > MAX_DEPTH:
        raise UserError(f"{what} '{path}' is nested deeper than {MAX_DEPTH} levels")
    return data
