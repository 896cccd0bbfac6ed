"""The accountant interface (after Opacus' ``IAccountant`` and Flower's ``RdpAccountant``): bookkeeping
here, mathematics in the module of each accountant (or in dp-accounting). An accountant consumes
Mechanism records (what was actually transmitted) and reports epsilon at a delta.

Contract for an implementation (register it in ``registry.ACCOUNTANTS``):

* ``step(mech)``: compose one round. Call ``super().step(mech)`` first (it keeps ``history``, from which
  ``state_dict``/``load_state_dict`` rebuild the accountant exactly by replay).
* ``epsilon(delta=None) -> float | None``: epsilon of everything composed so far; ``None`` when some
  composed round is not covered by this accountant's analysis (see ``applies``).
* ``peek(mech) -> float | None``: epsilon after also composing ``mech``, WITHOUT changing state.
  The default deep-copies the accountant; override it when that is expensive.
* ``applies(mech) -> bool``: False when the analysis does not cover the mechanism; once such a round is
  composed the accountant reports ``None`` from then on (it cannot vouch for the composition).
* ``_reset()``: clear the mathematical state (called by ``__init__`` and ``load_state_dict``)."""
from __future__ import annotations

import copy
import json
import math
import numbers

from otafl_sdr.transmission import Mechanism



def costs_nothing(mech: Mechanism) -> bool:
    """A round that releases nothing about the data: no client data used, zero sensitivity, or no client
    can participate. Post-processing of earlier releases (Lemma 1 of paper 000)."""
    return (not mech.uses_data) or mech.sensitivity == 0 or mech.sampling_prob == 0


def validate(mech: Mechanism) -> None:
    """ValueError for a record that no accountant can interpret (a programming error upstream)."""
    if not isinstance(mech.round, numbers.Integral) or isinstance(mech.round, bool):
        raise ValueError(f"Mechanism.round must be an int, got {mech.round!r}")
    for key in ("sensitivity", "sigma_eff"):
        v = getattr(mech, key)
        if not (isinstance(v, numbers.Real) and math.isfinite(v) and v >= 0):
            raise ValueError(f"Mechanism.{key} must be a finite number >= 0, got {v!r} (round {mech.round})")
    q = mech.sampling_prob
    if not (isinstance(q, numbers.Real) and 0 <= q <= 1):
        raise ValueError(f"Mechanism.sampling_prob must be in [0, 1], got {q!r} (round {mech.round})")


def _plain(x):
    """json ``default``: numpy scalars/arrays to Python values."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")


def mech_to_dict(mech: Mechanism) -> dict:
    """A JSON-safe dict of the record (numpy values become Python values; floats round-trip exactly)."""
    d = {"round": int(mech.round), "sensitivity": float(mech.sensitivity), "sigma_eff": float(mech.sigma_eff),
         "uses_data": bool(mech.uses_data), "sampling_prob": float(mech.sampling_prob),
         "extra": json.loads(json.dumps(mech.extra, default=_plain))}
    return d


def mech_from_dict(d: dict) -> Mechanism:
    return Mechanism(round=int(d["round"]), sensitivity=float(d["sensitivity"]),
                     sigma_eff=float(d["sigma_eff"]), uses_data=bool(d.get("uses_data", True)),
                     sampling_prob=float(d.get("sampling_prob", 1.0)), extra=dict(d.get("extra") or {}))


class Accountant:
    """name: registry name; delta: the delta epsilon is reported at; context: anything a closed form
    needs (data set sizes, model dim, ``pld_value_discretization_interval``, ...). ``closed_form``: a
    paper's own closed form (paper 000 Thms. 1/3, paper 001 Thm. 1, paper 003 Thm. 2, paper 004's budget
    sum), reported beside the exact PLD value and flagged "not a valid bound" where it falls below it."""

    name = "base"
    closed_form = False

    def __init__(self, delta: float, **context):
        self.delta = delta
        self.context = context
        self.history: list[Mechanism] = []
        self._reset()

    def _reset(self) -> None:
        """Clear the mathematical state (subclasses extend)."""

    def step(self, mech: Mechanism) -> None:
        self.history.append(mech)

    def epsilon(self, delta: float | None = None) -> float | None:
        raise NotImplementedError

    def peek(self, mech: Mechanism, delta: float | None = None) -> float | None:
        clone = copy.deepcopy(self)
        clone.step(mech)
        return clone.epsilon(delta)

    def would_exceed(self, mech: Mechanism, eps_budget: float) -> bool:
        """True when composing ``mech`` would take epsilon strictly above ``eps_budget`` (reaching it
        exactly is allowed), or when this accountant cannot vouch for the result (``None``)."""
        eps = self.peek(mech)
        return eps is None or eps > eps_budget

    def applies(self, mech: Mechanism) -> bool:
        """False when this accountant's analysis does not cover the mechanism (then it reports None)."""
        return True

    def state_dict(self) -> dict:
        return {"name": self.name, "delta": self.delta, "history": [mech_to_dict(m) for m in self.history]}

    def load_state_dict(self, state: dict) -> None:
        """Rebuild exactly by replaying the recorded rounds in order."""
        self.history = []
        self._reset()
        for m in state.get("history", []):
            self.step(m if isinstance(m, Mechanism) else mech_from_dict(m))


class CoveredAccountant(Accountant):
    """An accountant whose analysis covers only the rounds ``applies`` accepts: the first data-using round
    it does not cover voids it (``uncovered_round``; its epsilon is None from then on); ``add`` composes a
    covered round."""

    def _reset(self) -> None:
        self.uncovered_round: int | None = None

    def step(self, mech: Mechanism) -> None:
        super().step(mech)
        if costs_nothing(mech):
            return
        if not self.applies(mech):
            if self.uncovered_round is None:
                self.uncovered_round = int(mech.round)
            return
        self.add(mech)

    def add(self, mech: Mechanism) -> None:
        raise NotImplementedError


def closed_form_names() -> tuple[str, ...]:
    """The registered accountants that are a paper's closed form (``Accountant.closed_form``)."""
    from otafl_sdr.registry import ACCOUNTANTS
    return tuple(n for n in ACCOUNTANTS.names() if getattr(ACCOUNTANTS.get(n), "closed_form", False))
