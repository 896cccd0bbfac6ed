"""The one privacy-knob protocol: a power policy or an FL algorithm answers ``privacy_knob()`` with one of
these (None: it keeps its own rule), and privacy.targeting = "target" solves it before round 1
(workload/targeting.py driving privacy/targeting.py):

* ``PrivacyKnob``: one value the planned rounds' epsilon is monotone in, bisected (CDPB, h_min, OTA-FD, ...);
* ``ClosedFormKnob``: the mechanism maps the solved per-round noise multiplier to its knob in closed form
  (paper 000's jammer factor or alpha_u, power/cj_target.py; LAPA's privacy filter);
* ``ClientNoiseKnob``: the clients' own noise std sigma (paper 002, Lemmas 20 and 22), solved from the
  algorithm's ``round_terms``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class PrivacyKnob:
    """A mechanism's one privacy knob. ``name``: the config key it stands for (e.g. "power.options.rho");
    ``get``/``set`` read and apply a value on the policy; [``lo``, ``hi``] the values the hardware and the
    design allow (``limit`` says in words what bounds them, both ends, for the refusal messages); ``private_when``:
    "higher" if a larger value spends less epsilon, else "lower". ``hand_keys``: other power.options keys
    that set the knob by a rule under privacy.targeting = "paper" and that "target" would override (set by
    hand with a target they are refused, like the knob itself)."""

    name: str
    get: Callable[[], float]
    set: Callable[[float], None]
    lo: float
    hi: float
    private_when: str = "higher"
    limit: str = "its limit"
    hand_keys: tuple = ()


@dataclass
class ClosedFormKnob:
    """``solve(target, planned, sens_scale) -> summary fields``: the knob set for a privacy/targeting.Target
    of identical rounds on the planned rounds {iteration: (h_known, h_cj)} (``name``: what it sets, for
    messages)."""

    name: str
    solve: Callable[..., dict]
    hand_keys: tuple = ()


@dataclass
class ClientNoiseKnob:
    """The clients' noise std, the config key ``name`` (e.g. "algorithm.options.sigma"), solved from the
    algorithm's ``round_terms(plan, it)`` and set with ``set(sigma)``."""

    name: str
    set: Callable[[float], None]
