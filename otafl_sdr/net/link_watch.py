"""The uhd testbed's per-round link health, judged (issue 25, item 2): each demodulated round's reference
statistics (calibration/link_health.py, no client data) are logged and compared with the ``air.drift_*``
limits, and an OFDM round's per-client sounding (``air.coherence = "measure"``) against its alarms
(calibration/coherence_loop.alarms); a figure beyond its limit asks the server for a recalibration
(``server.drift_seen``)."""
from __future__ import annotations

import logging

from otafl_sdr.calibration.link_health import DriftLimits, drift

log = logging.getLogger("otafl.net")


def judge_health(server, round_index: int, attempt: int) -> None:
    """Log round ``round_index``'s link health; note a drift beyond the limits in ``server.drift_seen``."""
    h = server.air.health
    if h is None:
        return
    log.info("round %d attempt %d: link health gain %+.2f dB, phase %+.3f rad, cfo %.3g +- %.2g, timing %+d, "
             "pilot NMSE %.3g", round_index, attempt, h["gain_db"], h["phase_rad"], h["cfo"],
             h.get("cfo_std") if h.get("cfo_std") is not None else float("nan"), h["timing_offset"],
             h["nmse_pilots"] if h["nmse_pilots"] is not None else float("nan"))
    for c in h.get("clients") or []:
        if c:
            log.info("round %d attempt %d: client %d phase %+.3f +- %.3f rad, offset %+.2f +- %.2f Hz, gain %+.2f dB%s",
                     round_index, attempt, c["client"], c["phase_rad"], c["phase_std"], c["cfo_hz"], c["cfo_std_hz"],
                     c["gain_db"], f" ({c['event']})" if c.get("event") else "")
    over = drift(h, DriftLimits.from_config(server.cfg.air)) + list(getattr(server.air, "coherence_alarms", []))
    if over:
        server.drift_seen = "; ".join(over)
        log.warning("round %d: link drift beyond its limits: %s", round_index, server.drift_seen)
