"""Mechanism -> dp-accounting DpEvent, shared by the ``rdp`` and ``pld`` accountants.

One round of the over-the-air aggregate is a Gaussian mechanism with L2 sensitivity ``mech.sensitivity``
and per-coordinate noise std ``mech.sigma_eff`` (paper 000, eq. (16) and Appendix A), i.e. noise
multiplier z = sigma_eff / sensitivity; with client participation probability q < 1 it is the
Poisson-subsampled Gaussian. Neighbouring relation: dp-accounting's ADD_OR_REMOVE_ONE (needed for its
Poisson-subsampling analysis). For q = 1 the Gaussian's privacy profile depends only on z, so the numbers
equal the replace-one analysis of paper 000 whenever ``sensitivity`` is the replace-one sensitivity."""
from __future__ import annotations

import dp_accounting

from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import costs_nothing


def dp_event(mech: Mechanism) -> dp_accounting.DpEvent:
    if costs_nothing(mech):
        return dp_accounting.NoOpDpEvent()
    if mech.sigma_eff == 0:
        return dp_accounting.NonPrivateDpEvent()                 # data sent without noise
    gauss = dp_accounting.GaussianDpEvent(noise_multiplier=mech.sigma_eff / mech.sensitivity)
    if mech.sampling_prob < 1:
        return dp_accounting.PoissonSampledDpEvent(sampling_probability=mech.sampling_prob, event=gauss)
    return gauss


def event_key(mech: Mechanism) -> tuple:
    """What determines the round's privacy cost (for caches): (kind, z, q)."""
    if costs_nothing(mech):
        return ("noop",)
    if mech.sigma_eff == 0:
        return ("nonprivate",)
    return ("gauss", mech.sigma_eff / mech.sensitivity, float(mech.sampling_prob))
