"""The pre-equalised gain/phase reference shared by all clients (preamble and pilots).

A receiver cannot un-mix a superposition, so it may correct only what is common to the sum: its own
timing, frequency offset and phase noise. To measure those, client i sends the reference (Zadoff-Chu
preamble and pilots, unit modulus) scaled by ref_gain_i = c / h_i, pre-equalised with the channel it
knows (perfect CSI in loopback, calibrated estimates in the lab). Through the channel every sender's
reference arrives as c, so the receiver sees the sum A = |S| c (``ref_amplitude``, known from the
plan), rotated only by the receiver's own impairments; it divides by A and reads phase and gain.

Power: the reference costs client i the energy |c|^2 N_ref / |h_i|^2 (N_ref = preamble + pilot
symbols, pilots counted with their boost; unit-energy pulses keep symbol energy = sample energy). With a common c, a client in a deep
fade would need a huge reference (or force a tiny c on all). So each sender may spend at most a budget
B_i = max(2%, N_ref / n) of its per-round power limit P_i (``reference_budget``: at d >= 100,000 that is
2%, <= 0.09 dB above the payload's eq.-11 limit and the same order as the channel-use overhead; for
short frames the reference symbols get no more than the payload's average allowance P_i / n each),
which gives
c <= |h_i| sqrt(B_i / N_ref). Senders are the k clients with the largest |h_i|^2 B_i, with k chosen to
maximise the received amplitude A = k c_k, c_k = min over those k of |h_i| sqrt(B_i / N_ref). Clients
left out (deep fades) send zeros in the reference slots; they still send their payload. Which clients
send the reference does not change the payload, and it is decided from planned quantities only (P_i,
or without a finite P_i the planned bound |alpha_i|^2 W^2 of ``reference_design.allowance``, never the
payload's energy), so it costs no privacy."""
from __future__ import annotations

import numpy as np

REF_ENERGY_FRACTION = 0.02      # share of a client's per-round energy budget spent on the reference
PAYLOAD_NORM_BOUND = 1.0        # W: ||u_i / tau|| <= 1, the clip every payload row is normalised by


def reference_gains(h_known: np.ndarray, budget: np.ndarray, n_reference: float) -> tuple[np.ndarray, complex]:
    """Best common reference amplitude under per-client energy budgets.

    h_known: (K,) complex channel each client believes it has; budget: (K,) energy each may spend on the
    reference (0 = does not send, e.g. silent clients); n_reference: energy of the unit reference
    (``FrameLayout.reference_energy``: preamble symbols + boosted pilots).
    Returns (ref_gain (K,) complex128 with c / h_i for senders and 0 otherwise, ref_amplitude = k c)."""
    h_known = np.asarray(h_known, dtype=np.complex128)
    budget = np.asarray(budget, dtype=np.float64)
    K = len(h_known)
    gains = np.zeros(K, dtype=np.complex128)
    ok = (budget > 0) & np.isfinite(budget) & (np.abs(h_known) > 0)
    if not ok.any() or n_reference <= 0:
        return gains, 0.0
    cap = np.where(ok, np.abs(h_known) * np.sqrt(np.where(ok, budget, 0.0) / n_reference), 0.0)
    order = np.argsort(-cap)                       # strongest first
    n_ok = int(ok.sum())
    c_k = cap[order[:n_ok]]                        # c allowed when the k strongest send
    amp = np.arange(1, n_ok + 1) * c_k
    k = int(np.argmax(amp)) + 1
    c = float(c_k[k - 1])
    senders = order[:k]
    gains[senders] = c / h_known[senders]
    return gains, float(k * c)


def reference_budget(allowance: np.ndarray, n_reference: float, n_symbols: int, *,
                     fraction: float = REF_ENERGY_FRACTION) -> np.ndarray:
    """Energy each client may spend on the reference: max(fraction, N_ref / n) x its allowance, the
    per-round power limit P_i of eq. 11 of paper 000 or, without a finite limit, the planned bound on its
    payload energy (``reference_design.allowance``: one rule for every air, never the payload's own
    energy); 0 for a client that does not transmit. The second term lets short frames keep the
    reference symbols at the payload's average power allowance P_i / n per symbol.
    ``n_reference``: ``FrameLayout.n_reference`` (reference energy in symbol units)."""
    a = np.asarray(allowance, dtype=np.float64)
    share = max(float(fraction), float(n_reference) / max(int(n_symbols), 1))
    return np.where(np.isfinite(a) & (a > 0), share * a, 0.0)
