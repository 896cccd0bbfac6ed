"""One ledger entry against the mechanism re-derived for it (workload/rederive.py): the figures every
accountant reads (uses_data, sensitivity, sigma_eff, sampling_prob) and the whole ``extra`` the family's
accountant may read (paper 001's ``rdp_order``, paper 002's ``extra["fdp"]``, paper 003's ``extra["otafd"]``,
paper 004's ``eps_k`` / ``eps_k_eff`` / ``delta_round``, ...), compared key by key; a mismatch is refused
in one line naming the entry. The keys the release rule adds after planning (rounds/accounting.py: the
attempt, a fault's charge) are the entry's own: a fault's charge may only lower sigma_eff; a jammer
shortfall's charge (privacy/jammer_shortfall.py) must charge exactly what its recorded measurement and the
re-derived booking give (``check_charge``)."""
from __future__ import annotations

import math

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.base import mech_to_dict

REL = 1e-9
RELEASE_KEYS = ("attempt", "fault", "charged", "planned_sigma_eff",      # rounds/accounting.fault_charge
                "jammer_shortfall")                                      # privacy/jammer_shortfall.shortfall_charge


def close(a, b) -> bool:
    """Numbers equal to REL (inf and nan only to themselves); anything else exactly."""
    if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return a == b
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= REL * max(1.0, abs(a), abs(b))


def first_difference(got, want, path: str = "extra") -> str | None:
    """Where two JSON values differ ('extra.fdp.weight'), or None."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return path
        for k in sorted(set(got) | set(want), key=str):
            if k not in got or k not in want:
                return f"{path}.{k}"
            d = first_difference(got[k], want[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return path
        for i, (g, w) in enumerate(zip(got, want)):
            d = first_difference(g, w, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if close(got, want) else path


def _at(obj, path: str):
    for part in path.replace("]", "").replace("[", ".").split(".")[1:]:
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def match_entry(where: str, rec: dict, mech, jammer_share: float = 0.0, plan=None) -> None:
    """Refuse ``rec`` (a ledger line) unless it books ``mech`` (the re-derived Mechanism; ``jammer_share``:
    the jammer's share of its sigma_eff^2, privacy/jammer_shortfall.booked_jammer_share; ``plan`` the
    round's re-derived plan, for an OFDM round's per-subcarrier charge)."""
    want = mech_to_dict(mech)
    extra = rec.get("extra") if isinstance(rec.get("extra"), dict) else {}
    fault = bool(extra.get("fault"))
    shortfall = "jammer_shortfall" in extra
    if shortfall:
        from otafl_sdr.privacy.jammer_shortfall import FAULT
        from otafl_sdr.privacy.ofdm_jammer_shortfall import check_any_charge
        why = check_any_charge(rec, mech, jammer_share, plan) if extra.get("fault") == FAULT else "not marked as its charge"
        if why:
            raise UserError(f"{where}: a jammer shortfall's charge: {why} (the ledger was rewritten)")
    for k in ("uses_data", "sensitivity", "sigma_eff", "sampling_prob"):
        got = rec.get(k)
        if shortfall and k == "sigma_eff":
            continue                                       # checked above, as what it charges
        if fault and k == "sigma_eff" and isinstance(got, (int, float)) and 0 <= got <= want[k] * (1 + REL):
            continue                                       # a fault's charge: less noise, never more
        if isinstance(got, bool) != isinstance(want[k], bool) or not close(got, want[k]):
            raise UserError(f"{where}: {k} is {got!r} but the config and the round's plan give {want[k]!r} "
                            f"(the ledger was rewritten)")
    own = {k: v for k, v in extra.items() if k not in RELEASE_KEYS}
    planned = {k: v for k, v in want["extra"].items() if k not in RELEASE_KEYS}
    if fault and isinstance(extra.get("planned_sigma_eff"), (int, float)) and \
            not close(extra["planned_sigma_eff"], want["sigma_eff"]):
        raise UserError(f"{where}: extra.planned_sigma_eff is {extra['planned_sigma_eff']!r} but the config and "
                        f"the round's plan give {want['sigma_eff']!r} (the ledger was rewritten)")
    diff = first_difference(own, planned)
    if diff:
        raise UserError(f"{where}: {diff} is {_at(own, diff)!r} but the config and the round's plan give "
                        f"{_at(planned, diff)!r} (the ledger was rewritten)")
