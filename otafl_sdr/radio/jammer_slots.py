"""Every uhd round measures the noise its jammer delivered (issue 34, item 5): two slots in the round's capture.

A round's capture (uhd air in process and on the node testbed, single carrier) is laid out, in samples at
``uhd.rate``:

    | QUIET_SAMPLES quiet | LEAD | the round's frame: clients + jammer (n) | JAMMER_SAMPLES jammer only | LEAD |

(a coherent round, radio/uhd_coherent_round.py, has its sounding before the frame, so its quiet slot comes
last: | LEAD | sounding | frame | jammer only | quiet | LEAD |)

- the **quiet slot**: nothing transmits (every burst starts at t0): the receiver's own noise floor;
- the **jammer-only slot**: the clients' bursts have ended, the jammer goes on sending alpha_cj n,
  n ~ CN(0, 2) per symbol, RRC-shaped, drawn as its round noise is (eq. 15 of paper 000; fresh samples, never
  the payload's: nothing about the payload's noise is revealed by it).

Both are read through the receiver's matched filter at the worst of the ``sps`` sample phases, as the
calibration's jammer step reads its test signal (calibration/jammer_noise.delivered_in_slots): v, the
variance the jammer added per real coordinate of the received symbols, and its standard error. In the
units the ledger books it (a share of sigma_eff^2, per real coordinate of unpack(y) / alpha_u, eq. 16) the
round's jammer delivered

    D = v / alpha_u^2,     s.e.(D) = s.e.(v) / alpha_u^2,

against the booked share J_b = G_booked alpha_cj^2 / alpha_u^2 (privacy/jammer_shortfall.booked_jammer_share).
A payload scaled down for the DAC (``tx_scale`` f < 1) has the aggregate's noise 1/f^2 larger than D: D
understates it (the comparison is the plan's units, as the booking's).

A capture with a fault (an overflow's lost samples, a timeout's zero fill) is not measured: the round keeps its
booking, as before this measurement existed. JAMMER_SAMPLES (2^15, as the calibration's test signal) gives
about 1 % standard error at sps 2: the lower bound D - 3 s.e. then sits within about 3 % of what is
delivered. The slots cost 41 ms of airtime a round at 1 MS/s.

A jammer whose slot is not steady is not measured either: it is charged away. The slot is read in
SEGMENTS equal parts at the slot's worst phase; their mean powers (jammer and floor together: the floor's
error is common to all and cancels) must agree within their standard errors, chi-square with SEGMENTS - 1
degrees of freedom at P = STEADY_P. A burst with a gap (a radio's underflow; in the simulated lab a stream
the hub's capture read past, zero-filled: on CI's loaded host a slot read 0.75 of its power, three quarters
of it there) fails, and so does foreign energy in part of the slot. Such a slot says nothing about the noise
the frame carried, so ``attach`` puts the jammer in the attempt's ``undelivered``: the release rule charges
its share away (rounds/accounting.fault_charge, as for a jammer's underflow event) and the round is retried."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.phy.pulse_shaping import shape

JAMMER_SAMPLES = 1 << 15          # the jammer-only slot after the frame
QUIET_SAMPLES = 1 << 13           # the quiet slot before it
SEGMENTS = 4                      # parts of the jammer's slot whose powers must agree (module doc)
STEADY_P = 1e-6                   # the chi-square test's false-alarm probability per round


def clean(faults: dict) -> bool:
    """No fault in the capture's counts (a missing burst ack alone, which the simulator never sends, is none)."""
    return not any(v for k, v in (faults or {}).items() if k != "burst_ack")


def guard(modem, jammer_delay: float = 0.0) -> int:
    """Samples left out at each slot's edges: two filter spans and the jammer's calibrated delay."""
    return 2 * len(modem.taps) + int(math.ceil(abs(float(jammer_delay)))) + 8


def slot_noise(modem, alpha_cj: float, rng: np.random.Generator, n_samples: int = JAMMER_SAMPLES) -> np.ndarray:
    """The jammer-only slot's samples: alpha_cj shape(n), n ~ CN(0, 2) per symbol (fresh draws from ``rng``,
    the round's noise source: OS entropy on the uhd air)."""
    n_sym = int(n_samples) // modem.sps
    z = rng.standard_normal(n_sym) + 1j * rng.standard_normal(n_sym)
    return (float(alpha_cj) * shape(z, np.asarray(modem.taps, dtype=np.float64), modem.sps))[:int(n_samples)]


def measure(samples: np.ndarray, frame_end: int, modem, alpha_u: float, jammer_delay: float = 0.0,
            quiet: int = QUIET_SAMPLES, jammer: int = JAMMER_SAMPLES, quiet_at: int = 0) -> dict | None:
    """The round's delivered jammer noise from its capture (module doc): ``samples`` the whole capture,
    ``frame_end`` the index where the jammer-only slot begins (the frame's last sample + 1), the quiet slot
    ``quiet`` samples from ``quiet_at``. Returns {'delivered', 'delivered_std'} in the ledger's units, with
    'floor' (the receiver's own noise per real coordinate, capture units), 'jammer_var' (v) and 'symbols';
    None when the capture is too short to hold the slots (a lost capture)."""
    g = guard(modem, jammer_delay)
    y = np.asarray(samples)
    if alpha_u <= 0 or len(y) < max(frame_end + jammer, quiet_at + quiet) - g or quiet <= 2 * g + len(modem.taps):
        return None
    from otafl_sdr.calibration.jammer_noise import delivered_in_slots
    jam = y[frame_end + g:frame_end + jammer - g]
    v, se, floor, per_phase, n = delivered_in_slots(y[quiet_at + g:quiet_at + quiet - g], jam, modem.taps, modem.sps)
    a2 = float(alpha_u) ** 2
    out = {"delivered": v / a2, "delivered_std": se / a2, "jammer_var": v, "floor": floor, "symbols": n}
    unsteady = unsteady_slot(jam, modem, int(np.argmin(per_phase)), floor)
    if unsteady:
        out["gap"] = unsteady
    return out


def unsteady_slot(jam: np.ndarray, modem, phase: int, floor: float) -> str:
    """'' when the jammer's slot ``jam`` (samples) holds one power throughout, else what was seen (module doc):
    its SEGMENTS parts' mean |y|^2 / 2 at sample phase ``phase`` of the matched filter, as a share of the whole
    slot's (the jammer's added variance, ``floor`` subtracted), e.g. "its slot is not steady: 1.00 / 1.01 /
    0.99 / 0.01 of its noise by quarter (chi-square 9000; a gap in its burst)"."""
    from otafl_sdr.calibration.jammer_noise import mean_power
    taps = np.asarray(modem.taps, dtype=np.float64)
    jam = np.asarray(jam, np.complex128)
    jam = jam - np.mean(jam)
    step = len(jam) // (SEGMENTS * modem.sps) * modem.sps           # whole symbols: every part keeps the phase
    parts = [mean_power(jam[i * step:(i + 1) * step], taps, modem.sps) for i in range(SEGMENTS)]
    if any(n < 1 for _, n in parts):
        return ""
    m = np.array([float(p[phase]) for p, _ in parts])
    se = np.array([max(p[phase], 1e-300) / np.sqrt(n) for p, n in parts])      # each mean's s.e. (its value / sqrt n)
    return unsteady_parts(m, se, floor, "its slot")


def unsteady_parts(means: np.ndarray, se: np.ndarray, floor: float, what: str) -> str:
    """'' when the SEGMENTS parts' mean powers ``means`` (jammer and floor together) agree within their standard
    errors ``se`` (chi-square, SEGMENTS - 1 degrees of freedom, at P = STEADY_P), else the line saying how they
    differ, each as a share of the jammer's noise (``floor`` subtracted): "``what`` is not steady: ...". Also the
    OFDM slot's test (radio/ofdm_jammer_slot.py)."""
    from scipy.stats import chi2

    m, se = np.asarray(means, np.float64), np.asarray(se, np.float64)
    w = 1.0 / np.maximum(se, 1e-300) ** 2
    mean = float(np.sum(w * m) / np.sum(w))
    stat = float(np.sum((m - mean) ** 2 * w))
    if stat <= chi2.isf(STEADY_P, len(m) - 1):
        return ""
    share = (m - floor) / max(float(np.mean(m)) - floor, 1e-300)
    return (f"{what} is not steady: {' / '.join(f'{x:.2f}' for x in share)} of its noise by "
            f"{'quarter' if len(m) == 4 else 'part'} (chi-square {stat:.0f}; a gap in its burst)")


def attach(rec, measured: dict | None) -> None:
    """The round's jammer measurement into ``rec.extra['jammer_slots']``; an unsteady slot also puts the jammer
    in ``rec.undelivered`` (module doc: charged away by the release rule, the attempt retried)."""
    rec.extra["jammer_slots"] = measured
    if measured and measured.get("gap"):
        rec.undelivered = {**(rec.undelivered or {}), "jammer": measured["gap"]}
