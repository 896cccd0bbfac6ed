"""Per-round link health (issue 25, item 2): what a round's received reference says about the link, against
what the calibration it was sent with predicts.

A calibrated uhd round pre-equalises every client's reference by c / h_i (the calibrated channel) and
pre-compensates its carrier offset and delay, so on a link that still matches its calibration the
receiver's demodulator (phy/modem.py) measures the frame's reference at complex gain 1 (0 dB, 0 rad),
no residual carrier offset and the frame where it was scheduled (``lead`` samples into the capture). The
frame has one reference for the sum of the clients, so these figures see a common drift and, through the
sum's gain, a differential one; per client, a coherent round's sounding (``air.coherence``,
radio/uhd_coherent_round.py) adds ``clients`` (calibration/coherence_loop.py: each client's residual phase,
offset and gain with their standard errors, and its events).

The figures come from the reference preamble and pilots only, which carry no client data, so they may be
written to ``rounds.jsonl`` and sent anywhere:

  gain_db        20 log10 |g|, g the reference's complex gain relative to its planned amplitude
  phase_rad      arg g (the common phase at the preamble; 0 when the calibration still holds)
  cfo            residual carrier offset the receiver removed (cycles/sample; 0 after pre-compensation)
  cfo_std        its standard error (cycles/sample; phy/modem.cfo_precision: what a calm link's reading
                 scatters by, e.g. 7.5e-7 for a 1,351-sample burst at a reference SNR of 34 dB)
  timing_offset  detected frame start minus the scheduled one (samples)
  nmse_pilots    the pilots' error after phase tracking (noise and distortion on the reference)
  rho            the preamble's normalised correlation (1 = clean)
  subcarrier_gain_db  (OFDM rounds) [lowest, highest] 20 log10 |G_k| of the per-subcarrier reference
                 (phy/ofdm.reference_statistics): a calibration that still fits reads near [0, 0] dB
  subcarrier_std (OFDM rounds) one subcarrier's standard error on |G_k| / |g|: a calm link's weakest and
                 strongest subcarriers sit about 2.5 of these from 0 dB (52 subcarriers)
  reference      the received reference's constellation: at most REFERENCE_POINTS of the preamble's symbols,
                 received over sent ((m, 2) [re, im] lists, 4 decimals; phy/modem.DemodResult.reference), a
                 cluster at the reference's gain: the live view draws it (results/constellation.py)

:func:`drift` compares them with the ``air.drift_*`` limits (config/schema.py): any figure beyond its limit is a
drift, which the testbed answers as ``air.on_drift`` says (recalibrate before the next round, or stop)."""
from __future__ import annotations

import math
from dataclasses import dataclass

HEALTH_FIELDS = ("gain_db", "phase_rad", "cfo", "cfo_std", "timing_offset", "nmse_pilots", "rho")
CFO_SIGNIFICANCE = 3.0     # a carrier offset is a drift only this many standard errors beyond its limit
REFERENCE_POINTS = 128     # the row's constellation: this many preamble symbols at most (~2 kB a row)


@dataclass(frozen=True)
class DriftLimits:
    """The largest |figure| still taken as the calibration holding (``air.drift_*``)."""

    gain_db: float = 1.0
    phase_rad: float = 0.35
    cfo: float = 1e-5
    timing: float = 1.0

    @classmethod
    def from_config(cls, air) -> "DriftLimits":
        return cls(float(air.drift_gain_db), float(air.drift_phase_rad), float(air.drift_cfo),
                   float(air.drift_timing))


def link_health(extra: dict, lead: int) -> dict | None:
    """The round's link-health figures (module doc) from a Reception's ``extra`` (the modem's reference
    statistics, radio/uhd_round_signal.finish_round), or None when the frame was not demodulated."""
    g = extra.get("gain") if isinstance(extra, dict) else None
    if g is None:
        return None
    g = complex(g)
    mag = abs(g)
    out = {"gain_db": 20 * math.log10(mag) if mag > 0 else -300.0,
           "phase_rad": math.atan2(g.imag, g.real),
           "cfo": float(extra.get("cfo", 0.0)),
           "cfo_std": float(extra.get("cfo_std", float("nan"))),
           "timing_offset": int(extra.get("timing", lead)) - int(lead),
           "nmse_pilots": float(extra.get("nmse_pilots", float("nan"))),
           "rho": float(extra.get("rho", float("nan")))}
    out = {k: (v if isinstance(v, int) or math.isfinite(v) else None) for k, v in out.items()}
    spread = extra.get("subcarrier_gain_db")         # OFDM: the per-subcarrier reference's weakest and strongest
    if spread is not None:
        out["subcarrier_gain_db"] = [round(float(v), 3) for v in spread]
        out["subcarrier_std"] = float(extra.get("subcarrier_std", float("nan")))
    ref = extra.get("reference")
    if ref is not None and len(ref):
        out["reference"] = reference_points(ref)
    return out


def reference_points(reference, most: int = REFERENCE_POINTS) -> list[list[float]]:
    """(m,) complex received-over-sent reference symbols -> at most ``most`` of them, evenly spaced, as
    [re, im] pairs rounded to 4 decimals (JSON for the row; non-finite points left out)."""
    import numpy as np
    z = np.asarray(reference, dtype=np.complex128).ravel()
    if len(z) > most:
        z = z[np.linspace(0, len(z) - 1, most).round().astype(int)]
    z = z[np.isfinite(z)]
    return [[round(float(v.real), 4), round(float(v.imag), 4)] for v in z]


def drift(health: dict | None, limits: DriftLimits) -> list[str]:
    """Each figure of ``health`` beyond its limit, as one phrase (empty: the calibration holds)."""
    if not health:
        return []
    out = []
    if abs(health["gain_db"]) > limits.gain_db:
        out.append(f"reference gain {health['gain_db']:+.2f} dB (air.drift_gain_db = {limits.gain_db:g})")
    if abs(health["phase_rad"]) > limits.phase_rad:
        out.append(f"reference phase {health['phase_rad']:+.3f} rad (air.drift_phase_rad = {limits.phase_rad:g})")
    sigma = health.get("cfo_std") or 0.0             # None (older rows) or nan: no precision known
    sigma = sigma if math.isfinite(sigma) else 0.0
    if abs(health["cfo"]) > limits.cfo + CFO_SIGNIFICANCE * sigma:    # beyond the limit, not estimator noise
        out.append(f"residual carrier offset {health['cfo']:.3g} +- {sigma:.2g} cycles/sample "
                   f"(air.drift_cfo = {limits.cfo:g})")
    if abs(health["timing_offset"]) > limits.timing:
        out.append(f"frame {health['timing_offset']:+d} samples off its time (air.drift_timing = {limits.timing:g})")
    return out


__all__ = ["CFO_SIGNIFICANCE", "DriftLimits", "HEALTH_FIELDS", "REFERENCE_POINTS", "drift", "link_health",
           "reference_points"]
