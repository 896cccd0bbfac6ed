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
send the reference does not change the payload, so it costs no privacy."""
from __future__ import annotations

import numpy as np

REF_ENERGY_FRACTION = 0.02      # share of a client's per-round energy budget spent on the reference


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


def reference_budget(energy: np.ndarray, *args, fraction: float = REF_ENERGY_FRACTION) -> np.ndarray:
    """Energy each client may spend on the reference: max(fraction, N_ref / n) x its allowance, the
    per-round power limit P_i of eq. 11 of paper 000 (its payload energy when there is no finite
    limit; 0 for a client that does not transmit). The second term lets short frames keep the
    reference symbols at the payload's average power allowance P_i / n per symbol.

    Two call forms: ``reference_budget(allowance, n_reference, n_symbols)`` with the allowance already
    chosen (0 for silent clients), or ``reference_budget(payload_energy, power_limit, n_reference,
    n_symbols)`` which takes P_i where finite, else the payload energy, and 0 where the payload energy
    is 0. ``n_reference``: ``FrameLayout.n_reference`` (reference energy in symbol units)."""
    e = np.asarray(energy, dtype=np.float64)
    if len(args) == 3:
        power_limit, n_reference, n_symbols = args
        allowance = e.copy()
        if power_limit is not None:
            P = np.asarray(power_limit, dtype=np.float64)
            allowance = np.where(np.isfinite(P) & (P > 0), P, e)
        allowance = np.where(e > 0, allowance, 0.0)
    elif len(args) == 2:
        n_reference, n_symbols = args
        allowance = e
    else:
        raise TypeError("reference_budget(allowance, n_reference, n_symbols) or "
                        "reference_budget(payload_energy, power_limit, n_reference, n_symbols)")
    share = max(float(fraction), float(n_reference) / max(int(n_symbols), 1))
    return np.where(np.isfinite(allowance) & (allowance > 0), share * allowance, 0.0)
