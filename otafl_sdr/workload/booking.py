"""How the ledger books a plan's mechanism, for every air and every node alike: the plan restated with the
calibrated-CSI gain margin, the calibrated jammer path's lower bound and the jammer noise the air measured
as delivered (``ledger_mechanism``). The server's round (rounds/pipeline.py) and the run-level privacy
targeting (workload/targeting.py) both use it, so a node solving the target books what the server books."""
from __future__ import annotations

import dataclasses

import numpy as np

from otafl_sdr.airs import air_capabilities
from otafl_sdr.errors import UserError
from otafl_sdr.transmission import Mechanism


def csi_gain_margin(csi) -> float:
    """The largest 3-sigma gain margin of the calibrated channel estimates; refused when unbounded."""
    margin = float(np.max(csi.gain_margin()))
    if not np.isfinite(margin):
        raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                        "(h_std >= |h| / 3); recalibrate with more pilot energy")
    return margin


def ledger_mechanism(plan, csi, air_name: str, delivered_jammer_gain: float | None) -> Mechanism:
    """The plan's mechanism as the ledger books it. With perfect CSI (csi None): as planned. With
    estimated CSI a client pre-inverting with h_hat_i arrives with up to ``gain_margin`` times the planned
    gain (3-sigma bound of the calibration), so the sensitivity is scaled by the largest margin; where the
    air's jammer path is calibrated, the jammer is counted at its lower 3-sigma bound; where the air
    measured the jammer's delivered noise, the smaller of that and the plan's jammer noise is booked
    (privacy/delivered_jammer.py), recorded as ``extra["jammer_noise"]``; an OFDM plan that booked its jammer
    per subcarrier (``extra["jammer_subcarriers"]``, power/ofdm_plan.py) is not restated again. With ``channel.multipath`` on, the
    sensitivity is first stretched by the round's ``plan.extra["multipath_gain"]`` (every tap carries
    client data: channel/multipath_rx.sensitivity_gain bounds the links' operator norm). Where the plan is
    booked at the capture (``plan.extra["multipath_capture"]``: single carrier on an air whose modem's
    estimates see the payload's ISI, RunParts.multipath_at_capture) the stretch is channel/capture_bound's
    and the noise is the channel's alone, sqrt(sigma_c2) / alpha_u: the jammer's and the clients' noise are
    independent additions to the capture, not counted (module docstring there)."""
    m = plan.mechanism
    stretch = float(plan.extra.get("multipath_gain", 1.0))       # channel/multipath_rx.sensitivity_gain
    capture = bool(plan.extra.get("multipath_capture", False)) and m.uses_data
    if (stretch > 1.0 or capture) and m.uses_data:
        m = dataclasses.replace(m, sensitivity=m.sensitivity * stretch, extra={**m.extra, "multipath_gain": stretch})
    if capture:
        sigma_c2 = min(float(plan.sigma_c2), float(plan.extra.get("air_sigma_c2", plan.sigma_c2)))
        m = dataclasses.replace(m, sigma_eff=min(m.sigma_eff, float(np.sqrt(sigma_c2)) / plan.alpha_u),
                                extra={**m.extra, "multipath_capture": True})
        if csi is not None:                   # the jammer is not counted: only the CSI gain margin applies
            margin = csi_gain_margin(csi)
            m = dataclasses.replace(m, sensitivity=m.sensitivity * margin, extra={**m.extra, "csi_gain_margin": margin})
        return m
    if csi is None or not m.uses_data:
        return m
    margin = csi_gain_margin(csi)
    sigma = m.sigma_eff
    extra = {**m.extra, "csi_gain_margin": margin}
    if "jammer_subcarriers" in m.extra:       # OFDM: the jammer already at its per-subcarrier lower bound
        return dataclasses.replace(m, sensitivity=m.sensitivity * margin, extra=extra)
    jam = (abs(plan.h_cj) * plan.alpha_cj / plan.alpha_u) ** 2 if plan.alpha_cj > 0 else 0.0
    if air_capabilities(air_name).calibrated_jammer_path and plan.alpha_cj > 0:
        jam_cal = (csi.jammer_lower() * plan.alpha_cj / plan.alpha_u) ** 2
        sigma = float(np.sqrt(max(sigma ** 2 - jam, 0.0) + jam_cal))
        extra["jammer_gain_lower"] = csi.jammer_lower()
        jam = jam_cal
    if delivered_jammer_gain is not None and plan.alpha_cj > 0:
        from otafl_sdr.privacy.delivered_jammer import book_jammer_noise
        sigma, extra["jammer_noise"] = book_jammer_noise(sigma, jam, delivered_jammer_gain, plan.alpha_cj,
                                                         plan.alpha_u)
    return dataclasses.replace(m, sensitivity=m.sensitivity * margin, sigma_eff=min(sigma, m.sigma_eff), extra=extra)
