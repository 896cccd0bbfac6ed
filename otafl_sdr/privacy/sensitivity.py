"""How far one neighbouring change can move a client's payload: the sensitivity the ledger books, for
each ``privacy.unit``, in payload units (a client sends u_i / tau, so every payload has norm <= 1).

Units (neighbouring data sets) and the bound b_i on ||u_i/tau - u_i'/tau|| that the code enforces:

* ``client`` (default): remove one client (user-level DP, McMahan et al. 2018). Its payload vanishes from
  the superposition: b_i = 1, enforced by clipping the update to tau.
* ``client_replace``: replace one client's whole data: both payloads lie in the unit ball, b_i = 2.
* ``sample``: replace one training sample of one client. Without per-sample clipping the only bound the
  code enforces is the ball's, b_i = 2. With per-sample gradient clipping to C (``train.sample_clip``,
  DP-SGD style) the local schedule gives a tighter bound, derived below.
* ``sample_paper``: paper 000's premise Delta = 1/(s_i |D|), i.e. b_i = 1/|D_i| (with p_i = |D_i|/|D|).
  Nothing in local training enforces it (one sample moves a multi-step update by far more); it is kept to
  reproduce the paper's figures and is labelled as the paper's premise wherever it is printed.

Derivation of the ``sample`` bound (per client, its own schedule). Local training runs T = E ceil(n/B)
steps of SGD with momentum beta, learning rate eta and proximal weight mu on mini-batch means of per-sample
gradients each clipped to norm C. Replace one sample x by x'. The batch order is the same for both data
sets (seeded by round and client, independent of the data), so the two trajectories coincide until the
first step whose batch holds x; the worst case is step 1, with batch size b_1 = min(B, n). Let D_t be the
parameter difference and M_t the momentum-buffer difference after step t (D_0 = M_0 = 0). At step 1 only
x's clipped gradient differs: ||g_1 - g_1'|| <= 2C / b_1. At a later step every clipped per-sample
gradient may differ (the parameters differ), each by at most 2C, so their mean by at most G = 2C; the
proximal term mu (w - w_bar) adds mu D_{t-1}. Hence, by the triangle inequality,
    M_t <= beta M_{t-1} + G_t + mu D_{t-1},     D_t <= D_{t-1} + eta M_t,     G_1 = 2C/b_1, G_t = 2C (t > 1).
The final clip to tau is a projection onto a convex ball (non-expansive), and both clipped updates lie in
it, so ||u - u'|| <= min(D_T, 2 tau) and b_i = min(D_T, 2 tau) / tau. For one full-batch step (E = 1,
B >= n) this is 2 eta C / (n tau): paper 000's 1/|D_i| scaling made true up to the factor 2 of a
replacement. For several steps the bound grows like 2 eta C T / (1 - beta) and soon reaches 2 (the ball):
per-sample clipping alone does not make multi-step local training sample-private without per-step noise.

In the aggregate, client i's payload enters with gain g_i = p_i / s_i (h_i alpha_i / alpha_u), so a
policy's round sensitivity is max_i g_i b_i."""
from __future__ import annotations

import math

import numpy as np

UNITS = ("client", "client_replace", "sample", "sample_paper")
PREMISE_UNITS = ("sample_paper",)
DESCRIPTIONS = {
    "client": "remove one client (enforced by clipping updates to tau)",
    "client_replace": "replace one client's data (enforced by clipping updates to tau)",
    "sample": "replace one sample (enforced by per-sample gradient clipping and the local schedule)",
    "sample_paper": "paper 000's premise 1/(s_i |D|): NOT enforced by local training, not a guarantee",
}


def sample_replace_bound(n: int, batch_size: int, epochs: int, lr: float, momentum: float, mu: float,
                         clip: float, tau: float) -> float:
    """Bound on ||u - u'|| (update units) when one of a client's n samples is replaced; see the module
    docstring. ``clip`` = 0 (no per-sample clipping): 2 tau, the only bound then enforced."""
    if clip <= 0:
        return 2.0 * tau
    steps = epochs * math.ceil(n / batch_size)
    b1 = min(batch_size, n)
    D = M = 0.0
    for t in range(1, steps + 1):
        G = 2.0 * clip / b1 if t == 1 else 2.0 * clip
        M = momentum * M + G + mu * D
        D = D + lr * M
        if D >= 2.0 * tau:
            return 2.0 * tau
    return min(D, 2.0 * tau)


def payload_bounds(unit: str, sizes, *, batch_size: int = 1, epochs: int = 1, lr: float = 0.0,
                   momentum: float = 0.0, mu: float = 0.0, sample_clip: float = 0.0, tau: float = 1.0) -> np.ndarray:
    """(K,) b_i: the bound on how far client i's payload u_i / tau moves under ``unit``."""
    sizes = np.asarray(sizes, dtype=float)
    if unit == "client":
        return np.ones_like(sizes)
    if unit == "client_replace":
        return np.full_like(sizes, 2.0)
    if unit == "sample_paper":
        return 1.0 / sizes
    if unit == "sample":
        return np.array([sample_replace_bound(int(n), batch_size, epochs, lr, momentum, mu, sample_clip, tau) / tau
                         for n in sizes])
    raise ValueError(f"unknown privacy unit {unit!r}; allowed: {', '.join(UNITS)}")


def payload_bounds_for(cfg, sizes, mu: float) -> np.ndarray:
    """``payload_bounds`` with the run's schedule (train.*, the algorithm's proximal weight ``mu``)."""
    t = cfg.train
    return payload_bounds(cfg.privacy.unit, sizes, batch_size=t.batch_size, epochs=t.local_epochs, lr=t.lr,
                          momentum=t.momentum, mu=mu, sample_clip=t.sample_clip, tau=t.tau)


def basis(unit: str) -> str:
    """What the run's epsilon rests on, for summaries and tables."""
    if unit in PREMISE_UNITS:
        return f"{unit}: paper premise, not a guarantee"
    return f"{unit}: enforced bound"
