"""Paper 004, sec. IV-C (eqs. 32-36): the DDPG agent that learns transmit powers in power/ddpg_env.py's
PowerEnv: actor mu(s) (sigmoid outputs), critic Q(s, a), target networks with soft updates
theta' <- tau theta + (1 - tau) theta', replay buffer, Gaussian exploration noise. The paper gives no sizes
or rates; defaults: 2 x 32 hidden units, Adam 1e-4 (actor) / 1e-3 (critic), discount 0.3, tau 0.005, batch
64, 30 episodes x 16 steps, 2 gradient steps per environment step. All randomness from
seeding.torch_generator. ``train_ddpg`` keeps the best greedy actor seen after each episode."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from otafl_sdr.errors import UserError
from otafl_sdr.power.ddpg_env import PowerEnv


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
