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
inferred) and the equal split (the personalised shares come from unreleased angles: power/lapa_public.py).
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
privacy.targeting = "target" (LapaPolicy.calibrate_to: a Gaussian privacy filter fixes each round's aggregate
noise z_t sens, not the paper's sigma_k = c Delta s_k / eps_k): the environment counts, per round, max(the
filter's requirement, the channel noise with no device noise) (PowerEnv.req_var), and a round whose learned
amplitudes would leave more channel noise than z_t sens (the filter can add noise, never remove it; that round
would under-spend) raises every device's level by one common factor, up to channel inversion at full power, to
the least that meets it (DDPGPolicy._filter_floor). Without both, the powers learned for the paper's much
larger requirement sat ~20 dB below inversion and a target run spent a tenth of its eps."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from otafl_sdr import seeding
from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.ddpg_agent import DDPGAgent, DDPGConfig, TrainResult, greedy_rollout, train_ddpg
from otafl_sdr.power.ddpg_env import RANGE_DB, PowerEnv, action_amplitude, forecast_budgets, inversion_amplitudes, project_powers
from otafl_sdr.power.lapa import LapaOptions, LapaPolicy
from otafl_sdr.power.lapa_replay import restore_ddpg
from otafl_sdr.power.lapa_maths import ota_alpha_u


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
    small_run = ("power.options={episodes = 1, steps = 2}",)       # training is minutes at the defaults
    ofdm_reason = "is LAPA (paper 004) with DDPG-chosen powers: one received amplitude per device, not one per subcarrier"

    def restore_recorded_inputs(self, entries: list[dict], where: str) -> None:
        """LAPA's PID error and the deployed DDPG action, as recorded (power/lapa_replay.py)."""
        restore_ddpg(self, entries, where)

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
        shares = None      # the equal split: the personalised one uses unreleased angles (lapa_public)
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
            # privacy.targeting = "target": the filter fixes each round's aggregate noise (z_t sens)^2, not the
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
        """privacy.targeting = "target": the filter sets this round's aggregate noise to z_t sens by adding
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

    def plan(self, round_index, payload, h, h_cj, rng, csi=None):
        h_known = h if csi is None else csi
        o = self.options
        trained = None
        self.release_labels(rng)           # the weights the environment uses come from the released counts
        if self.agent is None or (o.retrain_every > 0 and self.t > 0 and self.t % o.retrain_every == 0):
            self._finalise(rng)            # so that the forecast sees the last round
            res = self.optimise(h_known)
            trained = {"objective": float(res.objective), "T_th": float(res.T_th),
                       "initial_reward": float(res.initial_reward), "power_fraction": self.frac.tolist(),
                       "action": self.action.tolist()}     # the powers' input: re-derived by power/lapa_replay
        plan = super().plan(round_index, payload, h, h_cj, rng, csi)
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
