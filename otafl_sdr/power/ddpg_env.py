"""Paper 004, sec. IV-B: the environment DDPG optimises transmit powers in (``PowerEnv``): the objective
of problem P1 (eq. 28) in its over-the-air form, simulated round by round with LAPA's dynamic noise control
and averaged over env_channels fading sequences of channel.fading,
    L(p) = sum_{m=1..T} w_m [ sigma_c2 / alpha_u,m(p)^2 + 1{m < T_th(p)} sum_k G_k^2 sigma_k^[m]2 ]
with sigma_k^[m] = c Delta s_k / eps_k^[m] (eq. 19) and alpha_u,m(p) the receive scaling the powers p allow
(lapa.ota_alpha_u). Weights: weighting = 'recency' (default, decision) uses w_m = A^(T-m), 'paper' the
printed A^(m-1) of eq. (24). T_th(p) is the first round at which the switch rule (eq. 23; lapa.switch_ok)
holds, T + 1 if never. Budgets eps_k^[m] come from ``forecast_budgets`` (eq. 12 with an exponentially
decaying privacy risk, inferred). The MDP (eqs. 29-31): state [p/sqrt(P), T_th/T, log(L/L_ref)], action in
[0,1]^K = each device's amplitude in dB (40 dB range) below channel inversion, projected onto
P_min <= sum_k p_k^2 <= P_max; reward -log(L/L_ref). See power/ddpg.py for the policy."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from otafl_sdr.power.lapa_maths import round_budget


RANGE_DB = 40.0


# ---------------------------------------------------------------------------------------------
def project_powers(p: np.ndarray, power: np.ndarray, p_min: float, p_max: float) -> np.ndarray:
    """Scale amplitudes p into P_min <= sum_k p_k^2 <= P_max (fractions of sum_k P_k), p_k <= sqrt(P_k)."""
    cap = np.sqrt(power)
    p = np.minimum(np.asarray(p, float), cap)
    tot = float(np.sum(power))
    lo, hi = p_min * tot, p_max * tot
    e = float(np.sum(p ** 2))
    if e > hi:
        p = p * np.sqrt(hi / e)
    elif lo > e > 0:                      # scale up, saturating at the per-device caps (bisection)
        on = p > 0
        s_lo, s_hi = 1.0, float(np.max(cap[on] / p[on]))
        for _ in range(60):
            s = 0.5 * (s_lo + s_hi)
            if np.sum(np.minimum(s * p, cap) ** 2) < lo:
                s_lo = s
            else:
                s_hi = s
        p = np.minimum(s_hi * p, cap)
    return p


def action_amplitude(a: np.ndarray, range_db: float) -> np.ndarray:
    """a in [0,1] -> amplitude fraction 10^((a - 1) range_db / 20) of the channel-inversion amplitude."""
    return 10.0 ** ((np.clip(np.asarray(a, float), 0.0, 1.0) - 1.0) * range_db / 20.0)


def inversion_amplitudes(habs: np.ndarray, power: np.ndarray, G: np.ndarray, C: float) -> np.ndarray:
    """q_k = alpha_max G_k C / |h_k|, alpha_max = min_j |h_j| sqrt(P_j) / (G_j C): the channel-inversion
    amplitudes at the largest common receive scaling (0 for G_k = 0)."""
    on = G > 0
    alpha_max = float(np.min(habs[on] * np.sqrt(power[on]) / (G[on] * C)))
    return np.where(on, alpha_max * G * C / np.where(on, habs, 1.0), 0.0)


def forecast_budgets(eps_total: float, T: int, K: int, shares: np.ndarray | None = None, e0: float = 1.0,
                     decay: float = 0.0, eps_k_max: float = 1.0, past: np.ndarray | None = None) -> np.ndarray:
    """(T, K) per-device budgets: rows of ``past`` (rounds already run) then eq. (12) with the forecast
    e^[m] = e0 exp(-(m - t0)/decay), split by ``shares`` (eq. 16) and capped at eps_k_max."""
    decay = decay if decay > 0 else max(T / 4.0, 1.0)
    shares = np.full(K, 1.0 / K) if shares is None else np.asarray(shares, float) / np.sum(shares)
    out = np.zeros((T, K))
    t0 = 0 if past is None else min(len(past), T)
    if t0:
        out[:t0] = past[:t0]
    spent = float(out.sum())
    for m in range(t0 + 1, T + 1):
        e = 0.0 if m == 1 else e0 * np.exp(-(m - max(t0, 1)) / decay)
        b = round_budget(e, eps_total, spent, T, m)
        out[m - 1] = np.minimum(b * shares, eps_k_max)
        spent += float(out[m - 1].sum())
    return out


@dataclass
class PowerEnv:
    """The P1 environment, simulated round by round. G, power, ds: (K,) weights, P_k, Delta s_k; budgets: (T, K);
    habs: channel magnitudes |h_k|, either (K,) (static, as in the paper), (S, K) (S static samples) or
    (S, T, K) (S fading sequences, one channel per round: the objective is averaged over them).

    Action (eq. 30, change of variables): in over-the-air aggregation a device's power above channel
    inversion is wasted (alpha_u is a minimum over devices), so a_k in [0, 1] sets device k's amplitude
    relative to its channel-inversion amplitude q_k = alpha_max G_k C / |h_k| at the largest common
    scaling alpha_max = min_j |h_j| sqrt(P_j) / (G_j C), in dB: p_k = q_k 10^((a_k - 1) range_db / 20)
    <= sqrt(P_k), then projected onto P_min <= sum_k p_k^2 <= P_max (fractions p_min, p_max of sum P_k).
    Each round applies the action to that round's channel, as the `ddpg` policy does."""

    G: np.ndarray
    habs: np.ndarray
    power: np.ndarray
    ds: np.ndarray
    c: float
    sigma_c2: float
    C: float
    dim: int
    budgets: np.ndarray
    contraction: float = 0.95           # A of eq. (24); < 1
    p_min: float = 0.0                  # P_min / sum_k P_k
    p_max: float = 1.0                  # P_max / sum_k P_k
    switch_rule: str = "per_device"
    range_db: float = RANGE_DB          # the action spans [-range_db, 0] dB below channel inversion
    weighting: str = "recency"          # recency: A^(T-m) | paper: A^(m-1) as printed in eq. (24)
    req_var: np.ndarray | None = None   # (T,) privacy.targeting = "target": the filter's aggregate noise variance
    L_ref: float = field(default=1.0)

    def __post_init__(self):
        self.T = self.budgets.shape[0]
        h = np.asarray(self.habs, float)
        if h.ndim == 1:
            h = h[None, :]
        if h.ndim == 2:
            h = np.repeat(h[:, None, :], self.T, axis=1)
        self.habs = h                                                                       # (S, T, K)
        self.S, _, self.K = h.shape
        self.on = self.G > 0
        on, G = self.on, self.G
        # channel-inversion amplitudes per sample and round (0 for G_k = 0)
        alpha_max = np.min(h[..., on] * np.sqrt(self.power[on]) / (G[on] * self.C), axis=-1)  # (S, T)
        self.q = np.where(on, alpha_max[..., None] * G * self.C / np.where(on, h, 1.0), 0.0)   # (S, T, K)
        eps = self.budgets
        self.sig_req = np.where(eps > 0, self.c * self.ds / np.maximum(eps, 1e-300), 0.0)   # (T, K), eq. 19
        self.art = np.sum(G[on] ** 2 * self.sig_req[:, on] ** 2, axis=1)                    # (T,)
        # cap after the switch: channel noise alone meets every device's requirement
        self.a_priv = np.min(np.sqrt(self.sigma_c2) / (G[on] * self.sig_req[:, on]), axis=1)  # (T,)
        self.bound = self.C + self.sig_req * (np.sqrt(self.dim) + 5.0)                     # (T, K)
        m = np.arange(1, self.T + 1)
        self.weights = self.contraction ** ((m - 1) if self.weighting == "paper" else (self.T - m))
        self.L_ref = 1.0
        self.L_ref = self.evaluate(np.full(self.K, self.initial_fraction()))[0]

    def initial_fraction(self) -> float:
        """Equal action a_k giving the middle of the allowed total energy ("average power") in the first round."""
        tot = float(np.sum(self.q[0, 0] ** 2))
        target = 0.5 * (self.p_min + self.p_max) * float(np.sum(self.power))
        frac = float(np.clip(np.sqrt(target / tot), 1e-6, 1.0)) if tot > 0 else 1.0
        return float(np.clip(1.0 + 20.0 * np.log10(frac) / self.range_db, 0.0, 1.0))

    def powers(self, a: np.ndarray) -> np.ndarray:
        """(S, T, K) amplitudes p_k = amplitude(a_k) q_k per sample and round, projected (eq. 30)."""
        p = action_amplitude(a, self.range_db) * self.q
        tot = float(np.sum(self.power))
        e = np.sum(p ** 2, axis=-1, keepdims=True)
        hi = self.p_max * tot
        p = np.where(e > hi, p * np.sqrt(hi / np.maximum(e, 1e-300)), p)
        if self.p_min > 0:
            low = np.sum(p ** 2, axis=-1) < self.p_min * tot
            for s, t in zip(*np.nonzero(low)):
                p[s, t] = project_powers(p[s, t], self.power, self.p_min, self.p_max)
        return p

    def evaluate(self, a: np.ndarray) -> tuple[float, float, np.ndarray]:
        """(mean L / L_ref, mean T_th, (S, T, K) powers): eq. (28), over-the-air form, simulated per round
        with the dynamic noise control of the `lapa` policy (module docstring). With ``req_var`` (the privacy
        filter of privacy.targeting = "target") a round's aggregate noise is max(req_var, channel noise with
        no device noise): the filter tops the channel noise up to its requirement with device noise, and
        cannot take away channel noise above it (that round under-spends); T_th = the first round whose
        channel noise alone meets the requirement."""
        on, G = self.on, self.G
        P = self.powers(a)
        hp = self.habs[..., on] * P[..., on] / G[on]                                        # (S, T, K_on)
        a_clean = np.min(hp, axis=-1) / self.C                                              # (S, T)
        if self.req_var is not None:
            ch = self.sigma_c2 / a_clean ** 2                                               # (S, T)
            ok = ch >= self.req_var[None, :]
            T_th = np.where(ok.any(axis=1), np.argmax(ok, axis=1) + 1, self.T + 1)
            L = np.sum(np.maximum(ch, self.req_var[None, :]) * self.weights[None, :], axis=1)
            return float(np.mean(L) / self.L_ref), float(np.mean(T_th)), P
        sig_ch = np.sqrt(self.sigma_c2) / (a_clean[..., None] * G[on])                      # (S, T, K_on)
        if self.switch_rule == "sum":
            ok = np.sum(sig_ch, axis=-1) >= np.sum(self.sig_req[:, on], axis=1)
        else:
            ok = np.all(sig_ch >= self.sig_req[None, :, on], axis=-1)                       # (S, T)
        T_th = np.where(ok.any(axis=1), np.argmax(ok, axis=1) + 1, self.T + 1)              # (S,)
        before = np.arange(1, self.T + 1)[None, :] < T_th[:, None]                          # (S, T)
        a_art = np.min(hp / self.bound[None, :, on], axis=-1)                               # (S, T)
        a_after = a_clean if self.switch_rule == "sum" else np.minimum(a_clean, self.a_priv[None, :])
        noise = np.where(before, self.sigma_c2 / a_art ** 2 + self.art[None, :], self.sigma_c2 / a_after ** 2)
        L = np.sum(noise * self.weights[None, :], axis=1)                                   # (S,)
        return float(np.mean(L) / self.L_ref), float(np.mean(T_th)), P

    def state(self, p: np.ndarray, L: float, T_th: float) -> np.ndarray:
        """s = [p/sqrt(P), T_th/T, log L] (eq. 29; p in the first round of sample 0, L relative to L_ref)."""
        return np.concatenate([p / np.sqrt(self.power), [T_th / self.T, np.log(L)]]).astype(np.float32)

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        L, T_th, P = self.evaluate(np.full(self.K, self.initial_fraction()))
        return self.state(P[0, 0], L, T_th), P[0, 0]

    def step(self, a: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, float]:
        """(next state, reward, powers in the first round of sample 0, T_th); reward = -log(L/L_ref), a
        monotone transform of eq. (31)'s -L with the same optimum and bounded critic targets."""
        L, T_th, P = self.evaluate(a)
        return self.state(P[0, 0], L, T_th), -float(np.log(L)), P[0, 0], T_th


# ---------------------------------------------------------------------------------------------
