"""What a uhd round puts on the air and how its capture is read (pure numpy, no device objects): the
clients' pre-equalised bursts (paper 000 eq. 10), the jammer's Gaussian burst (eq. 15), the clients' clip to
the DAC's full scale, the jammer's DAC check and the demodulation of the capture into the aggregate (eq. 16). Used by the in-process air (uhd_air.py) and
by the testbed's uhd nodes alike."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy import Modem, pack_reals, unpack_reals
from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.phy.reference import reference_budget, reference_gains
from otafl_sdr.phy.reference_design import allowance
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE


def known_channel(plan: RoundPlan) -> np.ndarray:
    """The channel the clients pre-compensate with (the air never knows the true h in a lab):
    ``plan.extra['csi']`` if the policy left its CSI there (as the loopback air reads it), else
    h_i = alpha_u target_gain_i / alpha_i (what the plan's eq.-16 gains imply), else plan.h."""
    csi = plan.extra.get("csi") if isinstance(plan.extra, dict) else None
    if csi is not None:
        return np.asarray(csi, dtype=np.complex128)
    alpha = np.asarray(plan.alpha, dtype=np.complex128)
    tg = np.asarray(plan.target_gain, dtype=np.float64)
    h = np.asarray(plan.h, dtype=np.complex128).copy()
    ok = (alpha != 0) & (tg != 0)
    h[ok] = plan.alpha_u * tg[ok] / alpha[ok]
    return h


def client_reference(plan: RoundPlan, modem: Modem) -> tuple[np.ndarray, complex, np.ndarray]:
    """(ref_gain (K,) complex: c / h_known_i for the reference's senders, 0 otherwise; the reference amplitude
    the receiver expects; sending (K,) bool: the clients that transmit). Planned quantities only."""
    n_sym = symbols_for(plan.dim)
    sending = np.array([m != "silent" for m in plan.mode]) & (np.asarray(plan.alpha) != 0)
    n_ref = modem.layout(n_sym).n_reference
    budget = reference_budget(allowance(plan, sending), n_ref, n_sym)     # planned only, as every air
    ref_gain, ref_amp = reference_gains(known_channel(plan), budget, n_ref)
    return ref_gain, ref_amp, sending


def client_bursts(plan: RoundPlan, modem: Modem) -> tuple[list[np.ndarray | None], complex]:
    """Per client the burst it transmits (None if silent) and the reference amplitude the receiver
    expects: x_i = modulate(alpha_i s(u_i), ref_gain_i), ref_gain_i = c / h_known_i (phy.reference)."""
    ref_gain, ref_amp, sending = client_reference(plan, modem)
    bursts: list[np.ndarray | None] = []
    amp = (plan.extra.get("tx_amp") if isinstance(plan.extra, dict) else None) or [1.0] * plan.clients
    for i in range(plan.clients):          # tx_amp: the planned scale x PA correction (radio/uhd_power.py)
        if not sending[i]:
            bursts.append(None)
            continue
        bursts.append(modem.modulate(plan.alpha[i] * amp[i] * pack_reals(plan.payload[i]), ref_gain[i]))
    return bursts, ref_amp


def jammer_burst(modem: Modem, n_symbols: int, alpha_cj: float, rng: np.random.Generator) -> np.ndarray:
    """The jammer's burst, aligned with the clients': alpha_cj n in the payload slots of the frame,
    n ~ CN(0, 2) per symbol (unit variance per real coordinate, eq. 15 of paper 000), silent in the
    reference slots (they carry no data; a strong jammer would bury the preamble), RRC-shaped like the
    clients so it lands in their band. Energy alpha_cj^2 x 2 n_symbols ~ alpha_cj^2 d per round."""
    noise = rng.standard_normal(n_symbols) + 1j * rng.standard_normal(n_symbols)
    return modem.modulate(alpha_cj * noise, ref_gain=0.0)


def clip_to_dac(burst: np.ndarray | None, level: float = DAC_FULL_SCALE) -> np.ndarray | None:
    """A client's burst with every sample's magnitude clipped to ``level``, a fixed, planned level (the
    DAC's full scale), so that the burst fits the DAC whatever the data: no refusal or fault decided on a
    client's payload. This is the projection onto the convex set {x : |x_n| <= level for every n}: it is
    non-expansive (||P x - P x'|| <= ||x - x'||), so the L2 distance between what a client transmits on two
    neighbouring data sets, and the booked sensitivity, are kept; it is the identity on every burst that fits
    (bit-identical samples), in particular whenever the image of the payload's clip ball fits."""
    if burst is None or burst.size == 0:
        return burst
    mag = np.abs(burst)
    over = mag > level
    if not over.any():
        return burst
    out = np.array(burst, copy=True)
    out[over] *= level / mag[over]
    return out


def undelivered_noise(tx_faults: dict) -> dict:
    """Per transmitter ('jammer', 'client 0', ...) with a fault in its burst (late, underflow, no ack):
    'jammer' / 'client-0' -> the faults by name (Reception.undelivered; the release rule charges it)."""
    from otafl_sdr.radio.uhd_events import FAULT_LABELS
    out = {}
    for role, counts in tx_faults.items():
        bad = sorted(k for k, v in counts.items() if v and k != "burst_ack")
        if bad:
            out[role.replace(" ", "-")] = ", ".join(FAULT_LABELS.get(k, k) for k in bad)
    return out


def dac_faults(bursts: list[np.ndarray | None]) -> dict[str, int]:
    """{'dac_clip': count} of bursts whose peak exceeds the DAC full scale (UHD would clip them)."""
    n = sum(1 for b in bursts if b is not None and b.size and float(np.max(np.abs(b))) > DAC_FULL_SCALE)
    return {"dac_clip": n} if n else {}


def finish_round(plan: RoundPlan, modem: Modem, samples: np.ndarray, ref_amplitude: complex,
                 faults: dict[str, int], *, wall_s: float = 0.0, record_meta: dict | None = None) -> Reception:
    """The receiver's side of a round from a capture and the fault counts of its radios.

    A round with any fault is returned lost (``ok=False``, reason like ``"uhd: late command x2"``,
    ``faults`` = the counts) without demodulating; a capture with no preamble is lost with the
    modem's reason; otherwise the aggregate unpack(y) / alpha_u. ``record_meta``: when given (the
    air's ``record_iq``), the capture and this metadata go into ``extra["iq"]`` / ``extra["iq_meta"]``."""
    from otafl_sdr.radio.uhd_events import summarise

    n_sym = symbols_for(plan.dim)
    uses = modem.channel_uses(n_sym)
    faults = {k: int(v) for k, v in faults.items() if v and k != "burst_ack"}
    extra: dict = {}
    if record_meta is not None and samples is not None and np.size(samples):
        extra["iq"] = np.asarray(samples, dtype=np.complex64)
        extra["iq_meta"] = dict(record_meta, extra=dict(record_meta.get("extra") or {}, faults=faults))
    ok, reason = summarise(faults)
    if not ok:
        return Reception(None, ok=False, reason=reason, faults=faults, channel_uses=uses, wall_s=wall_s,
                         extra=extra)
    res = modem.demodulate(np.asarray(samples), n_sym, ref_amplitude)
    extra.update({"timing": res.timing, "cfo": res.cfo, "cfo_std": res.cfo_std, "rho": res.rho, "gain": res.gain,
                  "nmse_pilots": res.nmse_pilots, "reference": res.reference})
    if not res.ok:
        return Reception(None, ok=False, reason=res.reason, channel_uses=uses, wall_s=wall_s, extra=extra)
    from otafl_sdr.radio.uhd_power import tx_scale                    # the payload went out scaled by the planned f
    agg = unpack_reals(res.symbols, plan.dim) / (plan.alpha_u * tx_scale(plan))
    return Reception(agg, ok=True, channel_uses=uses, wall_s=wall_s, extra=extra)
