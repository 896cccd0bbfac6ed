"""The accountant interface (after Opacus' ``IAccountant``): bookkeeping here, mathematics in the
modules that implement each accountant. An accountant consumes Mechanism records (what was actually
transmitted) and reports epsilon at a delta."""
from __future__ import annotations

from ..transmission import Mechanism


class Accountant:
    """name: registry name. ``step`` composes one round; ``epsilon`` reports; ``would_exceed`` asks
    without changing state; ``state_dict``/``load_state_dict`` survive a restart."""

    name = "base"

    def __init__(self, delta: float, **context):
        self.delta = delta
        self.context = context        # e.g. dataset sizes, model dim: anything a closed form needs
        self.history: list[Mechanism] = []

    def step(self, mech: Mechanism) -> None:
        self.history.append(mech)

    def epsilon(self, delta: float | None = None) -> float:
        raise NotImplementedError

    def would_exceed(self, mech: Mechanism, eps_budget: float) -> bool:
        clone = type(self)(self.delta, **self.context)
        clone.load_state_dict(self.state_dict())
        clone.step(mech)
        return clone.epsilon() > eps_budget

    def applies(self, mech: Mechanism) -> bool:
        """False when this accountant's analysis does not cover the mechanism (then it reports None)."""
        return True

    def state_dict(self) -> dict:
        return {"history": [m.__dict__ for m in self.history]}

    def load_state_dict(self, state: dict) -> None:
        self.history = []
        for m in state.get("history", []):
            self.step(Mechanism(**m))
