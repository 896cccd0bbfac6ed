"""The rules that tie config keys together, stated where they apply (`config --explain KEY`): read from
configure/validation.py itself, every ``_require(condition, "KEY", message)`` whose message names another key
(phy.ofdm_cp's delay extent of channel.multipath at uhd.rate, data.iid_devices <= data.clients, ...). The
message is the rule as the refusal says it after "config key 'KEY': "; the values it would print are '...'."""
from __future__ import annotations

import ast
import inspect
import re
from functools import lru_cache


def _text(node) -> str | None:
    """A message's literal text, formatted values as '...'; None when it is not a string literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "..." for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


@lru_cache(maxsize=1)
def key_rules() -> dict[str, list[str]]:
    """{key: [the rules that tie it to other keys]}."""
    from otafl_sdr.configure import validation
    tree = ast.parse(inspect.getsource(validation))
    sections = "|".join(("run", "data", "model", "train", "algorithm", "power", "privacy", "channel", "air", "phy",
                         "loopback", "uhd", "net", "calibration"))
    dotted = re.compile(rf"\b(?:{sections})\.\w+")
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_require" and len(node.args) == 3):
            continue
        key, message = node.args[1], _text(node.args[2])
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or not message:
            continue
        others = {k for k in dotted.findall(message) if k != key.value}
        message = re.sub(r",? got \.\.\.$", "", message)
        if others and message not in out.get(key.value, []):
            out.setdefault(key.value, []).append(message)
    return out
