"""Every uhd OFDM round measures the noise its jammer delivered on each data subcarrier (issue 34): a
jammer-only slot right after the frame, read on the frame's own symbol grid.

The jammer's burst (phy/ofdm_burst.jammer_stream: alpha_cj CN(0, 2) on the payload slots) goes on for
``SLOT_SYMBOLS`` more OFDM symbols once the frame ends, alpha_cj CN(0, 2) on the round's data carriers (fresh
draws from the round's noise source, OS entropy on a real air; never the payload's), nothing on the comb
pilots' positions; the clients are silent by then (their channels' tails end inside the first slot symbol's
prefix). The receiver reads the slot's M windows with the frame's timing and backoff (phy/ofdm.OfdmLayout.read:
the unitary FFT, so a subcarrier's reading is in the payload's units) and takes, per real coordinate,

    P_k = sum_m |Y_mk|^2 / (2 M)           (k a data carrier: the jammer's alpha_cj^2 |H_cj,k|^2 plus the floor)
    f   = sum_{m, p} |Y_mp|^2 / (2 M n_p)  (the pilot positions: nothing sent, the receiver's own floor)
    v_k = P_k - f,   s.e.(v_k)^2 = P_k^2 / M + f^2 / (M n_p)

(|Y|^2 / 2 of a circular Gaussian of variance V per real coordinate is V Exp(1): mean V, standard deviation V).
In the ledger's units (a share of sigma_eff^2 per real coordinate of unpack(y) / alpha_u, as
radio/jammer_slots.py) the jammer delivered D_k = v_k / alpha_u^2 on subcarrier k.

M = 400 symbols (32,000 samples at the default layout, the single-carrier slot's 2^15) gives each subcarrier
about 5 % standard error, all of them together (48 data carriers) about 0.7 %: privacy/ofdm_jammer_shortfall.py
says how the charge uses them. A capture with a fault measures nothing (the round keeps its booking).

A slot that does not hold one power throughout (a gap in the jammer's burst: a radio's underflow, a stream the
simulated hub's capture read past) is not measured but charged away, as the single-carrier slot's
(radio/jammer_slots.py): ``measure`` adds 'gap', and ``radio/jammer_slots.attach`` puts the jammer in the
attempt's ``undelivered``; the release rule charges its share away and retries the round."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy.ofdm_burst import OfdmFrame, jammer_draws, jammer_stream

SLOT_SYMBOLS = 400


def jammer_burst_with_slot(frame: OfdmFrame, alpha_cj: float, rng: np.random.Generator,
                           slot: int = SLOT_SYMBOLS) -> np.ndarray:
    """The jammer's time-domain burst: its frame stream (payload slots) with ``slot`` jammer-only symbols
    inserted right after the frame's last payload symbol (then the frame's silent tail), all from ``rng``."""
    lay = frame.lay
    grid = jammer_stream(frame, alpha_cj, jammer_draws(frame, rng))
    if slot > 0:
        z = rng.standard_normal((int(slot), len(frame.carriers))) + 1j * rng.standard_normal((int(slot), len(frame.carriers)))
        extra = np.zeros((int(slot), lay.used), np.complex128)
        extra[:, frame.carriers] = float(alpha_cj) * z
        end = frame.frame_rows().stop
        grid = np.concatenate([grid[:end], extra, grid[end:]])
    return lay.to_time(grid)


def slot_start(frame: OfdmFrame, timing: int) -> int:
    """Where the slot's first prefix starts in the capture from t0, given the frame's detected ``timing``."""
    return int(timing) + frame.lay.frame_symbols(frame.n_ofdm) * frame.lay.symbol_len


def measure(y: np.ndarray, timing: int, frame: OfdmFrame, alpha_u: float, backoff: int,
            slot: int = SLOT_SYMBOLS) -> dict | None:
    """The slot's per-subcarrier delivered jammer noise (module doc) from ``y`` (the capture from t0 on) and
    the frame's detected ``timing``: {'carriers' (the data carriers read), 'delivered_k' D_k, 'delivered_k_std',
    'floor' f (capture units), 'symbols' M}; None when the capture does not hold the slot or the layout has
    no pilot position to read the floor on."""
    lay = frame.lay
    start = slot_start(frame, timing)
    need = start + int(slot) * lay.symbol_len
    pilots = np.asarray(lay.pilot_pos, np.int64)
    if alpha_u <= 0 or slot < 2 or len(y) < need or len(pilots) == 0:
        return None
    Y = lay.read(np.asarray(y, np.complex128), start, int(slot), backoff)              # (M, U)
    power = np.abs(Y) ** 2 / 2.0
    carriers = np.asarray(frame.carriers, np.int64)
    P = power[:, carriers].mean(axis=0)
    f = float(power[:, pilots].mean())
    M = int(slot)
    se = np.sqrt(P ** 2 / M + f ** 2 / (M * len(pilots)))
    a2 = float(alpha_u) ** 2
    out = {"carriers": [int(k) for k in carriers], "delivered_k": [float(v) for v in (P - f) / a2],
           "delivered_k_std": [float(v) for v in se / a2], "floor": f, "symbols": M}
    unsteady = unsteady_slot(power[:, carriers].mean(axis=1), f)
    if unsteady:
        out["gap"] = unsteady
    return out


def unsteady_slot(per_symbol: np.ndarray, floor: float) -> str:
    """'' when the slot held one power throughout, else what was seen (radio/jammer_slots.unsteady_parts, the
    single-carrier slot's test): ``per_symbol`` (M,) the slot's symbols' mean |Y_mk|^2 / 2 over the data carriers,
    cut into SEGMENTS parts of whole symbols; each part's mean has standard error sigma / sqrt(its symbols), sigma
    the median of the parts' own standard deviations (the subcarriers' multipath makes a symbol's spread the
    channel's, not the mean's; the median: a gap inside one part does not widen every part's error)."""
    from otafl_sdr.radio.jammer_slots import SEGMENTS, unsteady_parts
    s = np.asarray(per_symbol, np.float64)
    step = len(s) // SEGMENTS
    if step < 2:
        return ""
    parts = [s[i * step:(i + 1) * step] for i in range(SEGMENTS)]
    sigma = float(np.median([np.std(p, ddof=1) for p in parts]))
    m = np.array([float(np.mean(p)) for p in parts])
    return unsteady_parts(m, np.full(SEGMENTS, max(sigma, 1e-300) / np.sqrt(step)), floor, "its slot")

