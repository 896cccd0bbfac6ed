"""Paper 004, sec. IV-B/C: transmit powers by DDPG so that LAPA's decaying artificial noise meets the channel
noise at the right round T_th (policy `ddpg` = `lapa` with DDPG-optimised powers, "Configuration 5").

Environment (``PowerEnv``): the objective of problem P1 (eq. 28), in its over-the-air form, simulated round by
round with the policy's dynamic noise control and averaged over env_channels fading sequences of channel.fading
(the paper's channels are static, ours may fade every round; channel.fading = 'awgn' gives one static channel),
    L(p) = sum_{m=1..T} w_m [ sigma_c2 / alpha_u,m(p)^2 + 1{m < T_th(p)} sum_k G_k^2 sigma_k^[m]2 ]
with sigma_k^[m] = c Delta s_k / eps_k^[m] (eq. 19) and alpha_u,m(p) the receive scaling the powers p allow
(lapa.ota_alpha_u: channel inversion, artificial noise inside each device's amplitude before T_th; after
T_th, capped so that channel noise alone meets every device's requirement). Weights: eq. (24) prints
A^m, i.e. the noise of the first rounds counts most, but its own recursion E_(t+1) <= A E_t + noise_t
contracts round m's noise T - m times: weighting = 'recency' (default, decision) uses w_m = A^(T-m),
'paper' the printed A^(m-1). With constant noise both equal eq. (28); the constant L lambda^2 / 2 is
dropped (it scales the reward only).
T_th(p) is the first round at which the switch rule (eq. 23; lapa.switch_ok) holds, T + 1 if never.
Budgets eps_k^[m] (the future is unknown when powers are chosen) come from ``forecast_budgets``: eq. (12)
with e^[m] = e_0 exp(-(m - t_0)/decay) (the exponential decay of the privacy risk that sec. III-B cites;
inferred) and the current split shares.
MDP (eqs. 29-31): state s_n = [p^(n-1)/sqrt(P), T_th(p^(n-1))/T, log(L(p^(n-1))/L_ref)]; action a_n in
[0,1]^K = each device's amplitude in dB (40 dB range) below its channel-inversion amplitude (PowerEnv), onto
P_min <= sum_k p_k^2 <= P_max; reward r_n = -log(L(p^(n))/L_ref), a monotone transform of the paper's -L
(same optimum; keeps the critic's targets bounded when a device's power nearly vanishes).
Agent (eqs. 32-36): actor mu(s) (sigmoid outputs), critic Q(s, a), target networks with soft updates
theta' <- tau theta + (1 - tau) theta', replay buffer, Gaussian exploration noise. The paper gives no
sizes or rates; defaults: 2 x 32 hidden units, Adam 1e-4 (actor) / 1e-3 (critic), discount 0.3, tau 0.005
(the paper's "typical" 0.001 is too slow for a few hundred steps), batch 64, 30 episodes x 16 steps,
2 gradient steps per environment step.
All randomness from seeding.torch_generator. Deployment: after each episode the greedy actor is rolled out
from the initial state; the best actor seen is kept, and its best action is applied in every round to that
round's channel (the action is relative to channel inversion, so it carries over when h fades; the
paper's channels are static). ``save``/``load`` keep the trained networks.
privacy.calibrate = "target" (LapaPolicy.calibrate_to: a Gaussian privacy filter fixes each round's aggregate
noise z_t sens, not the paper's sigma_k = c Delta s_k / eps_k): the environment counts, per round, max(the
filter's requirement, the channel noise with no device noise) (PowerEnv.req_var), and a round whose learned
amplitudes would leave more channel noise than z_t sens (the filter can add noise, never remove it; that round
would under-spend) raises every device's level by one common factor, up to channel inversion at full power, to
the least that meets it (DDPGPolicy._filter_floor). Without both, the powers learned for the paper's much
larger requirement sat ~20 dB below inversion and a target run spent a tenth of its eps."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .. import seeding
from ..channel.fading import BlockFading
from ..errors import ConfigError, UserError
from ..registry import POWER_POLICIES
from .base import SystemInfo
from .lapa import (LapaOptions, LapaPolicy, amplitude_bound, channel_sigma, ota_alpha_u, round_budget,
                   switch_ok)
from . import reliable_aggregation as ra


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
    req_var: np.ndarray | None = None   # (T,) privacy.calibrate = "target": the filter's aggregate noise variance
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
        filter of privacy.calibrate = "target") a round's aggregate noise is max(req_var, channel noise with
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
def _mlp(sizes: list[int], out_act: nn.Module | None, gen: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        bound = 1.0 / np.sqrt(sizes[i])
        nn.init.uniform_(lin.weight, -bound, bound, generator=gen)
        nn.init.uniform_(lin.bias, -bound, bound, generator=gen)
        layers.append(lin)
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    if out_act is not None:
        layers.append(out_act)
    return nn.Sequential(*layers)


@dataclass
class DDPGConfig:
    hidden: int = 32
    lr_actor: float = 1e-4
    lr_critic: float = 1e-3
    discount: float = 0.3              # Upsilon of eq. (33)
    soft_tau: float = 0.005            # tau of eq. (36)
    batch: int = 64                    # N of eqs. (34)-(35)
    buffer: int = 10000
    explore: float = 0.3               # std of the Gaussian exploration noise N_n (eq. 32), decays to 1/10
    warmup: int = 64                   # uniformly random actions before learning starts
    updates: int = 2                   # gradient steps per environment step


class DDPGAgent:
    """Actor mu(s | theta_mu), critic Q(s, a | theta_Q) and their targets (eqs. 32-36)."""

    def __init__(self, state_dim: int, action_dim: int, cfg: DDPGConfig, gen: torch.Generator):
        self.state_dim, self.action_dim, self.cfg, self.gen = state_dim, action_dim, cfg, gen
        h = cfg.hidden
        self.actor = _mlp([state_dim, h, h, action_dim], nn.Sigmoid(), gen)
        self.critic = _mlp([state_dim + action_dim, h, h, 1], None, gen)
        self.actor_t, self.critic_t = copy.deepcopy(self.actor), copy.deepcopy(self.critic)
        self.opt_a = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr_actor)
        self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr_critic)
        n = cfg.buffer
        self.S = np.zeros((n, state_dim), np.float32)
        self.A = np.zeros((n, action_dim), np.float32)
        self.R = np.zeros((n, 1), np.float32)
        self.S2 = np.zeros((n, state_dim), np.float32)
        self.size = self.ptr = 0

    def _noise(self, std: float) -> torch.Tensor:
        """Gaussian exploration noise N_n (eq. 32), half common to all devices and half per device: the
        over-the-air objective depends mostly on the common power level (alpha_u is a minimum over
        devices), which independent noise alone would bias downwards."""
        z = torch.randn(self.action_dim + 1, generator=self.gen)
        return std * (z[0] + z[1:]) / np.sqrt(2.0)

    def act(self, s: np.ndarray, noise: float = 0.0) -> np.ndarray:
        with torch.no_grad():
            a = self.actor(torch.as_tensor(s)[None])[0]
            if noise > 0:
                a = a + self._noise(noise)
        return a.clamp(0.0, 1.0).numpy().astype(np.float64)

    def random_action(self) -> np.ndarray:
        """Warm-up action: a uniform common level plus per-device jitter."""
        u = torch.rand(1, generator=self.gen)
        return (u + self._noise(0.1)).clamp(0.0, 1.0).numpy().astype(np.float64)

    def remember(self, s, a, r, s2) -> None:
        i = self.ptr
        self.S[i], self.A[i], self.R[i], self.S2[i] = s, a, r, s2
        self.ptr = (i + 1) % self.cfg.buffer
        self.size = min(self.size + 1, self.cfg.buffer)

    def update(self) -> tuple[float, float]:
        """One critic step (eqs. 33-34), one actor step (eq. 35), soft target updates (eq. 36)."""
        idx = torch.randint(0, self.size, (min(self.cfg.batch, self.size),), generator=self.gen).numpy()
        s, a = torch.as_tensor(self.S[idx]), torch.as_tensor(self.A[idx])
        r, s2 = torch.as_tensor(self.R[idx]), torch.as_tensor(self.S2[idx])
        with torch.no_grad():
            y = r + self.cfg.discount * self.critic_t(torch.cat([s2, self.actor_t(s2)], 1))
        q = self.critic(torch.cat([s, a], 1))
        loss_c = torch.mean((y - q) ** 2)
        self.opt_c.zero_grad()
        loss_c.backward()
        self.opt_c.step()
        loss_a = -self.critic(torch.cat([s, self.actor(s)], 1)).mean()
        self.opt_a.zero_grad()
        loss_a.backward()
        self.opt_a.step()
        tau = self.cfg.soft_tau
        with torch.no_grad():
            for net, tgt in ((self.actor, self.actor_t), (self.critic, self.critic_t)):
                for p, pt in zip(net.parameters(), tgt.parameters()):
                    pt.mul_(1 - tau).add_(tau * p)
        return float(loss_c.detach()), float(loss_a.detach())

    # -- persistence ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"state_dim": self.state_dim, "action_dim": self.action_dim, "cfg": self.cfg.__dict__,
                "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "actor_t": self.actor_t.state_dict(), "critic_t": self.critic_t.state_dict()}

    def load_state_dict(self, d: dict) -> None:
        for name in ("actor", "critic", "actor_t", "critic_t"):
            getattr(self, name).load_state_dict(d[name])

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path)

    @classmethod
    def load(cls, path: str | Path, gen: torch.Generator) -> "DDPGAgent":
        path = Path(path)
        if not path.is_file():
            raise UserError(f"DDPG policy file '{path}' not found")
        try:
            d = torch.load(path, weights_only=True)          # tensors and plain data only: no code runs
            agent = cls(d["state_dim"], d["action_dim"], DDPGConfig(**d["cfg"]), gen)
            agent.load_state_dict(d)
        except Exception as e:  # noqa: BLE001 - any unreadable file is the user's to fix
            raise UserError(f"DDPG policy file '{path}' is not a saved DDPG agent ({type(e).__name__})") from None
        return agent


@dataclass
class TrainResult:
    powers: np.ndarray            # (K,) amplitudes p_k of the deployed action
    objective: float              # L(p)/L_ref of the deployed action (reward = -log of it)
    T_th: float                   # (mean over the channel samples)
    episode_rewards: list         # greedy-rollout best reward after each episode
    initial_reward: float         # greedy-rollout best reward of the untrained actor
    action: np.ndarray | None = None   # (K,) the deployed action a (levels relative to channel inversion)


def greedy_rollout(agent: DDPGAgent, env: PowerEnv, steps: int) -> tuple[float, np.ndarray, int, np.ndarray]:
    """Best (reward, powers, T_th, action) of the noise-free actor over ``steps`` steps from reset."""
    s, _ = env.reset()
    best = (-np.inf, None, 0, None)
    for _ in range(steps):
        a = agent.act(s)
        s, r, p, T_th = env.step(a)
        if r > best[0]:
            best = (r, p, T_th, a)
    return best


def train_ddpg(env: PowerEnv, agent: DDPGAgent, episodes: int, steps: int) -> TrainResult:
    """E episodes x T_RL steps (eq. 38): act with exploration, store, update once per step. After each
    episode the greedy actor is evaluated; the best actor seen (the untrained one included) is kept."""
    init_r, p0, T0, a0 = greedy_rollout(agent, env, steps)
    best = (init_r, p0, T0, copy.deepcopy(agent.actor.state_dict()), a0)
    rewards = []
    n_total, n = episodes * steps, 0
    for _ in range(episodes):
        s, _ = env.reset()
        for _ in range(steps):
            frac = n / max(n_total - 1, 1)
            noise = agent.cfg.explore * (1.0 - 0.9 * frac)
            a = agent.random_action() if agent.size < agent.cfg.warmup else agent.act(s, noise)
            s2, r, _, _ = env.step(a)
            agent.remember(s, a, r, s2)
            if agent.size >= min(agent.cfg.warmup, agent.cfg.batch):
                for _ in range(agent.cfg.updates):
                    agent.update()
            s, n = s2, n + 1
        r, p, T_th, a = greedy_rollout(agent, env, steps)
        rewards.append(r)
        if r > best[0]:
            best = (r, p, T_th, copy.deepcopy(agent.actor.state_dict()), a)
    agent.actor.load_state_dict(best[3])
    return TrainResult(powers=best[1], objective=float(np.exp(-best[0])), T_th=best[2], episode_rewards=rewards,
                       initial_reward=init_r, action=best[4])


# ---------------------------------------------------------------------------------------------
@dataclass
class DDPGOptions(LapaOptions):
    """`lapa` options plus the DDPG power optimiser's (power_fraction is replaced by the learned powers)."""
    episodes: int = 30
    steps: int = 16                    # T_RL: steps per episode
    hidden: int = 32
    lr_actor: float = 1e-4
    lr_critic: float = 1e-3
    discount: float = 0.3
    soft_tau: float = 0.005
    batch: int = 64
    buffer: int = 10000
    explore: float = 0.3
    warmup: int = 64
    updates: int = 2                   # gradient steps per environment step
    p_min: float = 0.0                 # P_min / sum_k P_k  (P1)
    p_max: float = 1.0                 # P_max / sum_k P_k
    contraction: float = 0.95          # A of eq. (24)
    forecast_e0: float = 1.0           # e at round 1 of the budget forecast
    forecast_decay: float = 0.0        # rounds; 0 = rounds / 4
    retrain_every: int = 0             # re-optimise on the current channel every N rounds (0 = once)
    env_channels: int = 8              # fading sequences (one channel per round) the objective averages over
    weighting: str = "recency"         # recency (A^(T-m)) | paper (A^(m-1), eq. 24 as printed)
    load: str = ""                     # a saved agent: skip training
    save: str = ""                     # save the trained agent here

    def check(self) -> None:
        super().check()

        def req(cond, key, msg):
            if not cond:
                raise ConfigError(f"power.options.{key}", msg)
        req(self.episodes >= 1 and self.steps >= 1, "episodes", "episodes and steps must be >= 1")
        req(self.hidden >= 1 and self.batch >= 1 and self.buffer >= self.batch, "hidden",
            "hidden >= 1, batch >= 1, buffer >= batch")
        req(self.lr_actor > 0 and self.lr_critic > 0, "lr_actor", "learning rates must be > 0")
        req(0 <= self.discount < 1, "discount", "must be in [0, 1)")
        req(0 < self.soft_tau <= 1, "soft_tau", "must be in (0, 1]")
        req(self.explore >= 0 and self.warmup >= 0, "explore", "explore and warmup must be >= 0")
        req(self.updates >= 1, "updates", "must be >= 1")
        req(0 <= self.p_min <= self.p_max <= 1 and self.p_max > 0, "p_min",
            "need 0 <= p_min <= p_max <= 1, p_max > 0 (fractions of sum_k P_k)")
        req(0 < self.contraction < 1, "contraction", "A must be in (0, 1) (eq. 25)")
        req(self.forecast_e0 >= 0 and self.forecast_decay >= 0, "forecast_e0", "must be >= 0")
        req(self.retrain_every >= 0, "retrain_every", "must be >= 0")
        req(self.env_channels >= 1, "env_channels", "must be >= 1")
        req(self.weighting in ("recency", "paper"), "weighting", "must be 'recency' or 'paper'")


@POWER_POLICIES.register("ddpg", "paper 004 Configuration 5: LAPA + dynamic noise control with DDPG-optimised powers")
class DDPGPolicy(LapaPolicy):
    """LAPA whose per-device powers come from DDPG on the P1 objective, trained (or loaded) at the first
    round on that round's channel (the paper's channels are static); ``retrain_every`` re-optimises
    on later channels, warm-starting the networks. ``self.train_result`` holds the last training."""

    name = "ddpg"
    Options = DDPGOptions

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None, context: dict | None = None):
        super().__init__(cfg, info, options, context)
        o = self.options
        self.seed = int(getattr(getattr(cfg, "run", None), "seed", 0))
        self.gen = seeding.torch_generator(self.seed, "ddpg")
        self.dcfg = DDPGConfig(hidden=o.hidden, lr_actor=o.lr_actor, lr_critic=o.lr_critic, discount=o.discount,
                               soft_tau=o.soft_tau, batch=o.batch, buffer=o.buffer, explore=o.explore,
                               warmup=o.warmup, updates=o.updates)
        self.agent: DDPGAgent | None = None
        self.action = np.ones(info.clients)
        self.train_result: TrainResult | None = None
        self.trained_rounds: list[int] = []

    def make_env(self, h_known: np.ndarray) -> PowerEnv:
        o, info = self.options, self.info
        sel, _ = self.selection(h_known)
        G = np.where(sel, self.weights(sel), 0.0)
        past = np.stack([r["eps_k"] for r in self.log if "eps_k" in r]) if self.log else None
        shares = ra.gompertz(self.theta_s, o.beta) if (o.budget == "lapa" and self.theta_n.sum() > 0) else None
        if o.budget == "uniform":
            budgets = np.full((self.T, info.clients), self.eps_total / (self.T * info.clients))
        else:
            e0 = o.forecast_e0 if self.t == 0 else self.e_last
            budgets = forecast_budgets(self.eps_total, self.T, info.clients, shares, e0, o.forecast_decay,
                                       o.eps_k_max, past)
        K, T = info.clients, self.T
        fading = getattr(getattr(self.cfg, "channel", None), "fading", "rayleigh")
        if fading == "awgn":
            habs = np.abs(h_known)[None, :]                  # static channel (the paper's assumption)
        else:                                                # fading sequences; sample 0 starts with this round's h
            g = seeding.rng(self.seed, "ddpg-channels", self.t)
            habs = np.abs(BlockFading(fading)(g, o.env_channels * T * K)).reshape(o.env_channels, T, K)
            habs[0, 0] = np.abs(h_known)
        req_var = None
        if self.mu2_target is not None and o.budget != "none":
            # privacy.calibrate = "target": the filter fixes each round's aggregate noise (z_t sens)^2, not the
            # paper's sigma_k = c Ds_k / eps_k; the rounds ahead each need an even share of the mu^2 left
            z = self._z_required(self.t + 1, G)
            sens = self.sens_scale * float(np.max(G * self.ds))
            req_var = np.full(T, (z * sens) ** 2 if np.isfinite(z) else 0.0)
        return PowerEnv(G=G, habs=habs, power=np.asarray(info.power, float), ds=self.ds, c=self.c,
                        sigma_c2=info.sigma_c2, C=self.C, dim=info.dim, budgets=budgets,
                        contraction=o.contraction, p_min=o.p_min, p_max=o.p_max, switch_rule=o.switch_rule,
                        weighting=o.weighting, req_var=req_var)

    def optimise(self, h_known: np.ndarray) -> TrainResult:
        o = self.options
        env = self.make_env(h_known)
        torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            if self.agent is None and o.load:
                self.agent = DDPGAgent.load(o.load, self.gen)
                if self.agent.action_dim != env.K:
                    raise UserError(f"DDPG policy file '{o.load}' is for {self.agent.action_dim} devices, "
                                    f"this run has {env.K}")
                r, p, T_th, a = greedy_rollout(self.agent, env, o.steps)
                res = TrainResult(powers=p, objective=float(np.exp(-r)), T_th=T_th, episode_rewards=[],
                                  initial_reward=r, action=a)
            else:
                episodes = o.episodes if self.agent is None else max(1, o.episodes // 4)
                if self.agent is None:
                    self.agent = DDPGAgent(env.K + 2, env.K, self.dcfg, self.gen)
                res = train_ddpg(env, self.agent, episodes, o.steps)
                if o.save:
                    self.agent.save(o.save)
        finally:
            torch.set_num_threads(torch_threads)
        self.action = np.asarray(res.action, float)
        self.frac = np.clip(res.powers ** 2 / np.asarray(self.info.power, float), 0.0, 1.0)
        self.train_result = res
        self.trained_rounds.append(self.t + 1)
        return res

    def amplitudes(self, h_known: np.ndarray, G: np.ndarray) -> np.ndarray:
        """The learned action applied to this round's channel: p_k = q_k(h) 10^((a_k - 1) R/20), projected
        onto [P_min, P_max] (the action is relative to channel inversion, so it carries over when h fades)."""
        o, power = self.options, np.asarray(self.info.power, float)
        habs = np.abs(h_known)
        q = inversion_amplitudes(habs, power, G, self.C)
        level = action_amplitude(self.action, RANGE_DB)
        p = project_powers(level * q, power, o.p_min, o.p_max)
        if self.mu2_target is not None and o.budget != "none":
            p = self._filter_floor(habs, G, q, level, p)
        self.frac = p ** 2 / power
        return p

    def max_amplitudes(self, h_known: np.ndarray, G: np.ndarray) -> np.ndarray:
        """The most the learned powers may be raised to (_filter_floor): channel inversion at full power,
        projected onto [P_min, P_max]."""
        o, power = self.options, np.asarray(self.info.power, float)
        return project_powers(inversion_amplitudes(np.abs(h_known), power, G, self.C), power, o.p_min, o.p_max)

    def _filter_floor(self, habs: np.ndarray, G: np.ndarray, q: np.ndarray, level: np.ndarray,
                      p: np.ndarray) -> np.ndarray:
        """privacy.calibrate = "target": the filter sets this round's aggregate noise to z_t sens by adding
        device noise on top of the channel noise, but it cannot take channel noise away. If the learned
        amplitudes leave more channel noise than z_t sens (the round would spend less than its share and
        the shortfall piles up on the last rounds, or is never spent), every device's level is raised by one
        common factor (at most to channel inversion, then projected onto [P_min, P_max]) to the least that
        lets channel noise alone meet z_t sens; the filter then books what the round really releases."""
        o, power = self.options, np.asarray(self.info.power, float)
        on = G > 0
        sens = self.sens_scale * float(np.max(G * self.ds))
        z_req = self._z_required(G=G)
        if sens <= 0 or not np.any(on) or not np.isfinite(z_req):
            return p
        bound = np.full(len(G), self.C)

        def z_of(pk):
            return float(np.sqrt(self.info.sigma_c2) / ota_alpha_u(habs, pk, G, bound)) / sens

        if z_of(p) <= z_req:
            return p

        def raised(lam):
            return project_powers(np.minimum(lam * level, 1.0) * q, power, o.p_min, o.p_max)
        hi = float(1.0 / np.min(level[on]))
        p_hi = raised(hi)
        if z_of(p_hi) > z_req:            # even at channel inversion: as close as the power allows
            return p_hi
        lo = 1.0
        for _ in range(60):
            mid = float(np.sqrt(lo * hi))
            if z_of(raised(mid)) <= z_req:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-9 * hi:
                break
        return raised(hi)

    def plan(self, round, payload, h, h_cj, rng, csi=None):
        h_known = h if csi is None else csi
        o = self.options
        trained = None
        if self.agent is None or (o.retrain_every > 0 and self.t > 0 and self.t % o.retrain_every == 0):
            self._finalise(rng)            # so that the forecast sees the last round
            res = self.optimise(h_known)
            trained = {"objective": float(res.objective), "T_th": float(res.T_th),
                       "initial_reward": float(res.initial_reward), "power_fraction": self.frac.tolist()}
        plan = super().plan(round, payload, h, h_cj, rng, csi)
        if trained is not None:            # the training's outcome, in the ledger with the round it powers
            plan.mechanism.extra["ddpg_train"] = trained
        return plan

    def state_dict(self) -> dict:
        s = super().state_dict()
        s["agent"] = None if self.agent is None else self.agent.state_dict()
        s["action"] = self.action.copy()
        return s

    def load_state_dict(self, s: dict) -> None:
        super().load_state_dict(s)
        self.action = np.array(s.get("action", self.action), float)
        if s.get("agent") is not None:
            d = s["agent"]
            self.agent = DDPGAgent(d["state_dim"], d["action_dim"], DDPGConfig(**d["cfg"]), self.gen)
            self.agent.load_state_dict(d)
