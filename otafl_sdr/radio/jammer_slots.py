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
booking, as before this measurement existed. JAMMER_SAMPLES (2^15, as the calibration's test signal) gives about 1 % standard error at sps 2: the
lower bound D - 3 s.e. then sits within about 3 % of what is delivered. The slots cost 41 ms of airtime a
round at 1 MS/s."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.phy.pulse_shaping import shape

JAMMER_SAMPLES = 1 << 15          # the jammer-only slot after the frame
QUIET_SAMPLES = 1 << 13           # the quiet slot before it


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
    v, se, floor, _, n = delivered_in_slots(y[quiet_at + g:quiet_at + quiet - g], y[frame_end + g:frame_end + jammer - g],
                                            modem.taps, modem.sps)
    a2 = float(alpha_u) ** 2
    return {"delivered": v / a2, "delivered_std": se / a2, "jammer_var": v, "floor": floor, "symbols": n}
