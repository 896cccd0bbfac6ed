"""Noisy-FedAvg and Noisy-FedProx (paper 002, Algorithm 1 with eqs. 2 and 4), algorithms ``noisy_fedavg``
and ``noisy_fedprox``.

Round t (0-based; the orchestrator's iteration it = t + 1). Every client i starts from the global model
w_t and takes K = ``options.local_steps`` plain gradient steps, k = 0..K-1:
    g = grad f_i(w_{i,k,t}; batch) / max(1, ||grad|| / V)                 (per-step clipping to V)
    FedAvg : w_{i,k+1,t} = w_{i,k,t} - eta_{k,t} g                         (eq. 2)
    FedProx: w_{i,k+1,t} = w_{i,k,t} - eta_{k,t} [g + alpha (w_{i,k,t} - w_t)]   (eq. 4, alpha = algorithm.mu)
with eta_{k,t} from ``options.schedule`` and coefficient ``train.lr`` (``lr_schedules``). The batch is
``train.batch_size`` samples from a per-round permutation of the client's data (wrapping around;
batch_size >= |D_i| is the full local gradient). Momentum and ``train.local_epochs`` are not used: the
paper's analysis is for plain gradient steps. The client then uploads w_{i,K,t} + n_i with
n_i ~ N(0, sigma^2 I_d), sigma = ``options.sigma`` (model units), and the server averages (eq. 7 of paper
000 with weights p_i; p_i = 1/m is paper 002's plain average).

In this testbed the upload goes through a power policy and an air: the client's update u_i = w_{i,K,t} - w_t
travels as u_i / tau (``train.tau`` must be at least V sum_k eta_{k,0} so that it never clips: Lemma 21 does
not cover clipping after training), and the noise n_i / tau is added to its payload after the policy has
planned the round (``finish_plan``), so the server sees sum_i g_i (u_i + n_i) / tau + air noise.

* Algorithm 1 ("client" noise, ``sigma > 0``): use it with a near-ideal air (``channel.fading = "awgn"``,
  high ``power.max_snr_db``, ``power.jammer = false``, small ``channel.sigma_c2``), which makes the air a
  digital average. The client payload is then no longer of norm <= 1: radios would exceed their power,
  the sim air reports it in ``max_power_ratio``.
* Over-the-air variant (``sigma = 0``): the clients add nothing; the channel noise and the jammer of the
  power policy are the only noise. The accountant uses whatever noise the server sees.

``finish_plan`` rewrites the round's Mechanism for the ledger: ``sensitivity`` = Lemma 20's data
sensitivity 2 V max_i g_i sum_k eta_{k,t} / tau (Lemma 22's for FedProx): the replace-one (even
replace-one-client) sensitivity of one round started from the released w_t, so that the composition
accountants rdp/pld stay correct;
``sigma_eff`` = sqrt(sigma_air^2 + (sigma / tau)^2 sum_i g_i^2), and ``extra["fdp"]`` with the facts the
``fdp`` accountant needs (keys documented in ``otafl_sdr.privacy.fdp``).

privacy.targeting = "target" replaces ``options.sigma`` before round 1 by the sigma whose planned rounds
spend privacy.eps (``round_terms``/``round_sigma_eff`` give the ledger's mechanism as a function of sigma;
privacy/targeting.py solves it); "paper" keeps the configured sigma."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from otafl_sdr import seeding
from otafl_sdr.noise_source import protective_rng
from otafl_sdr.errors import ConfigError
from otafl_sdr.privacy import fdp_analysis
from otafl_sdr.privacy.knobs import ClientNoiseKnob
from otafl_sdr.registry import ALGORITHMS
from otafl_sdr.transmission import RoundPlan
from otafl_sdr.learning.algorithms import FLAlgorithm
from otafl_sdr.learning.lr_schedules import SCHEDULES, check_schedule, round_lrs
from otafl_sdr.learning.trainer import TrainResult, finite_samples


def need_option(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"algorithm.options.{key}", msg)


@dataclass
class NoisyOptions:
    """sigma: std of each client's Gaussian noise on its uploaded model (model units; 0 = over-the-air
    variant). clip: V. local_steps: K. schedule: constant | cyclic | stagewise | continuous.
    smoothness: L, the smoothness constant the fdp accountant assumes (the bound is only as good as it).
    sensitivity_mode: exact (Lemmas 20-23 from the rates used) | table3 (Table 3's closed forms).
    restore_lr: table3, cyclic/continuous: keep Lemma 20's factor lr that Table 3 drops (True) or not.
    c, z: table3 constants (0 = H_K/ln(K+1), H_K/ln 2)."""

    sigma: float = 0.01
    clip: float = 1.0
    local_steps: int = 10
    schedule: str = "constant"
    smoothness: float = 1.0
    sensitivity_mode: str = "exact"
    restore_lr: bool = True
    c: float = 0.0
    z: float = 0.0

    def check(self) -> None:
        num = (int, float)
        need_option(isinstance(self.sigma, num) and not isinstance(self.sigma, bool) and math.isfinite(self.sigma)
              and self.sigma >= 0, "sigma", f"must be a number >= 0, got {self.sigma!r}")
        need_option(isinstance(self.clip, num) and not isinstance(self.clip, bool) and math.isfinite(self.clip)
              and self.clip > 0, "clip", f"must be a number > 0, got {self.clip!r}")
        need_option(isinstance(self.local_steps, int) and not isinstance(self.local_steps, bool)
              and self.local_steps >= 1, "local_steps", f"must be an integer >= 1, got {self.local_steps!r}")
        need_option(self.schedule in SCHEDULES, "schedule",
              f"unknown learning-rate schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        need_option(isinstance(self.smoothness, num) and not isinstance(self.smoothness, bool)
              and math.isfinite(self.smoothness) and self.smoothness > 0, "smoothness",
              f"must be a number > 0, got {self.smoothness!r}")
        need_option(self.sensitivity_mode in ("exact", "table3"), "sensitivity_mode",
              f"must be 'exact' or 'table3', got {self.sensitivity_mode!r}")
        need_option(isinstance(self.restore_lr, bool), "restore_lr", "must be true or false")
        for k in ("c", "z"):
            v = getattr(self, k)
            need_option(isinstance(v, num) and not isinstance(v, bool) and v >= 0, k, f"must be a number >= 0, got {v!r}")


@ALGORITHMS.register("noisy_fedavg", "paper 002 Alg. 1: K clipped SGD steps (4 lr schedules), client noise N(0, sigma^2 I) on the upload")
class NoisyFedAvg(FLAlgorithm):
    name = "noisy_fedavg"
    method = "fedavg"
    Options = NoisyOptions
    testbed_ready = False                    # its clipped-SGD local step runs in process only

    def privacy_knob(self) -> ClientNoiseKnob:
        """privacy.targeting = "target": the clients' noise std sigma (privacy/targeting.solve_sigma)."""
        def put(sigma: float) -> None:
            self.options.sigma = sigma
        return ClientNoiseKnob(name="algorithm.options.sigma", set=put)

    @classmethod
    def validate_options(cls, options: dict) -> None:
        super().validate_options(options)
        try:
            opts = cls.Options(**options)
        except TypeError as e:
            raise ConfigError("algorithm.options", str(e)) from None
        opts.check()

    @classmethod
    def validate_config(cls, cfg) -> None:
        """Its options, and ``train.tau`` >= V sum_k eta_{k,0} (the largest over rounds: an update is never
        longer), so that Algorithm 1's upload is never clipped (Lemma 21 does not cover clipping after
        training)."""
        cls.validate_options(cfg.algorithm.options)
        o = cls.Options(**cfg.algorithm.options)
        bound = o.clip * float(np.sum(round_lrs(o.schedule, float(cfg.train.lr), 0, o.local_steps)))
        if float(cfg.train.tau) < bound * (1 - 1e-12):
            raise ConfigError("train.tau", f"must be >= V sum_k eta_k0 = {bound:.6g} for {cls.name} (an update is "
                                           "never longer), so that Algorithm 1's upload is not clipped")

    def __init__(self, cfg):
        self.validate_config(cfg)
        super().__init__(cfg)
        self.lr = float(cfg.train.lr)
        self.tau = float(cfg.train.tau)
        self._grad_fn = None
        self._padded = None

    @property
    def alpha(self) -> float:
        return 0.0

    def round_lrs(self, round_index: int) -> np.ndarray:
        """(K,) eta_{k,t} of iteration ``round_index`` (1-based; t = it - 1)."""
        return round_lrs(self.options.schedule, self.lr, round_index - 1, self.options.local_steps)

    # ------------------------------------------------------------------------ local training (Alg. 1)
    def _prepare(self, trainer) -> None:
        from torch.func import functional_call, grad, vmap
        data = trainer.data
        n = data.sizes
        feat = data.features
        x = torch.zeros(len(n), int(n.max()), feat, dtype=torch.float32)
        y = torch.zeros(len(n), int(n.max()), dtype=torch.int64)
        for i in range(len(n)):
            x[i, :n[i]] = data.client_x[i].reshape(int(n[i]), feat)
            y[i, :n[i]] = data.client_y[i]
        x, ok = finite_samples(x)                      # a NaN/inf sample: zeros, weight 0 (gradient 0)
        self._padded = (x, y)
        self._finite = ok
        model = trainer.model
        names = [k for k, _ in model.named_parameters()]

        def loss_fn(params, xb, yb, wb):
            out = functional_call(model, dict(zip(names, params)), (xb,))
            losses = F.cross_entropy(out, yb, reduction="none")
            return (losses * wb).sum(), losses.detach()

        self._grad_fn = vmap(grad(loss_fn, has_aux=True))

    def _batches(self, trainer, round_index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """idx (m, K, B), weights (m, K, B): client i's K batches of round ``round_index`` (a per-round permutation,
        wrapped around; a batch never repeats a sample unless B > |D_i|, then it is the full data)."""
        cfg = self.cfg
        sizes = trainer.data.sizes
        K = self.options.local_steps
        B_req = cfg.train.batch_size
        B = int(min(B_req, sizes.max()))
        m = len(sizes)
        idx = torch.zeros(m, K, B, dtype=torch.int64)
        wts = torch.zeros(m, K, B, dtype=torch.float32)
        for i in range(m):
            n = int(sizes[i])
            b = min(B, n)
            g = seeding.torch_generator(cfg.run.seed, "noisy_train", round_index, i)
            reps = -(-K * b // n) + 1
            order = torch.cat([torch.randperm(n, generator=g) for _ in range(reps)])
            idx[i, :, :b] = order[:K * b].view(K, b)
            wts[i, :, :b] = 1.0 / b
        return idx, wts

    def local_train(self, trainer, global_flat, round_index: int) -> TrainResult:
        """Algorithm 1's L-update for every client (eq. 2 / eq. 4), then u_i = w_{i,K,t} - w_t clipped to tau
        (never binding when train.tau >= V sum_k eta_k, checked at construction)."""
        if self._grad_fn is None:
            self._prepare(trainer)
        x, y = self._padded
        o = self.options
        lrs = self.round_lrs(round_index)
        V, alpha = float(o.clip), float(self.alpha)
        w_t = torch.as_tensor(global_flat).detach().to(torch.float32).reshape(-1)
        m = x.shape[0]
        shapes = [p.shape for p in trainer.model.parameters()]
        numels = [p.numel() for p in trainer.model.parameters()]
        anchors = [t.reshape(s) for t, s in zip(torch.split(w_t, numels), shapes)]
        params = [a.unsqueeze(0).repeat(m, *([1] * a.dim())).contiguous() for a in anchors]
        idx, wts = self._batches(trainer, round_index)
        rows = torch.arange(m).unsqueeze(1)
        loss_sum = torch.zeros(m, dtype=torch.float64)
        with torch.no_grad():
            for k in range(o.local_steps):
                bi = idx[:, k]
                wk = wts[:, k] if self._finite is None else wts[:, k] * self._finite[rows, bi]
                grads, losses = self._grad_fn(tuple(params), x[rows, bi], y[rows, bi], wk)
                loss_sum += torch.nan_to_num(losses * wk).sum(1).double()
                gn = torch.sqrt(sum(torch.linalg.vector_norm(g.reshape(m, -1), dim=1) ** 2 for g in grads))
                coef = 1.0 / torch.clamp(gn / V, min=1.0)            # g / max(1, ||g|| / V)
                if not bool(torch.isfinite(gn).all()):             # a NaN/inf step gradient is clipped to 0
                    ok = torch.isfinite(gn)
                    coef = torch.where(ok, coef, 0.0)
                    grads = [torch.where(ok.view(-1, *([1] * (g.dim() - 1))), g, 0.0) for g in grads]
                eta = float(lrs[k])
                for j, g in enumerate(grads):
                    step = g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
                    if alpha > 0:
                        step.add_(params[j] - anchors[j].unsqueeze(0), alpha=alpha)
                    params[j].sub_(step, alpha=eta)
        final = torch.cat([p.reshape(m, -1) for p in params], dim=1)
        delta = final - w_t.unsqueeze(0)
        norms = torch.linalg.vector_norm(delta.double(), dim=1).numpy()
        scale = np.minimum(1.0, self.tau / np.maximum(norms, 1e-300))
        updates = (delta * torch.as_tensor(scale, dtype=torch.float32).unsqueeze(1)).to(torch.float32)
        client_loss = loss_sum.numpy() / o.local_steps
        p = trainer.data.p
        return TrainResult(updates=updates, raw_norms=norms, train_loss=float(p @ client_loss),
                           clipped=norms > self.tau, client_loss=client_loss, clients=np.arange(m))

    # ------------------------------------------------------------------------ noise + mechanism
    def client_noise(self, round_index: int, i: int, d: int) -> np.ndarray:
        """n_i / tau: client i's noise N(0, sigma^2 I_d) of round ``round_index`` in payload units."""
        g = protective_rng(self.cfg, "client_noise", round_index, i)        # OS entropy at the node on zmq/uhd
        return g.standard_normal(d) * (self.options.sigma / self.tau)

    def round_terms(self, plan: RoundPlan, round_index: int) -> tuple:
        """(sending, gains g_i, lrs, max gain, sensitivity, sigma_air) of a planned round: the parts of its
        Mechanism that do not depend on sigma. Sensitivity = Lemma 20's 2 V max_i g_i sum_k eta_{k,t} / tau
        (Lemma 22's for FedProx); sigma_air the policy's effective air noise."""
        o = self.options
        sending = np.array([md == "update" for md in plan.mode])
        gains = np.where(sending, np.abs(np.asarray(plan.target_gain, dtype=float)), 0.0)
        lrs = self.round_lrs(round_index)
        weight = float(gains.max()) if gains.size else 0.0
        if self.alpha > 0:                                                     # Lemma 22 (exact), payload units
            gamma = fdp_analysis.fedprox_rho_gamma(lrs, self.alpha, o.smoothness, o.clip, weight)[1][0]
        else:                                                                  # Lemma 20
            gamma = fdp_analysis.fedavg_rho_gamma(lrs, o.smoothness, o.clip, weight)[1][0]
        return sending, gains, lrs, weight, float(gamma) / self.tau, float(plan.mechanism.sigma_eff)

    def booked_payload_bound(self, round_index: int) -> float:
        """b: how far one neighbour moves one client's payload (u_i + n_i) / tau, the data sensitivity the
        round books per unit gain (so ``round_terms``' sensitivity is max_i g_i b), whatever privacy.unit
        says. Lemma 20 (paper 002): every clipped step moves by at most eta_{k,t} V, so replacing one sample
        (present in every batch; or the client's whole data) moves w_{i,K,t} by at most 2 V sum_k eta_{k,t}:
        b = 2 V sum_k eta_{k,t} / tau (<= 2 by the train.tau check); Lemma 22's for FedProx. The audit's
        canary (audit/transport.py) sits at this bound."""
        o = self.options
        lrs = self.round_lrs(round_index)
        if self.alpha > 0:
            gamma = fdp_analysis.fedprox_rho_gamma(lrs, self.alpha, o.smoothness, o.clip, 1.0)[1][0]
        else:
            gamma = fdp_analysis.fedavg_rho_gamma(lrs, o.smoothness, o.clip, 1.0)[1][0]
        return float(gamma) / self.tau

    def round_sigma_eff(self, sigma_air: float, gain_sq: float, sigma: float) -> float:
        """sqrt(sigma_air^2 + (sigma / tau)^2 sum_i g_i^2): the server's noise on sum_i g_i (u_i + n_i) / tau."""
        return math.sqrt(sigma_air ** 2 + (sigma / self.tau) ** 2 * gain_sq)

    def finish_plan(self, plan: RoundPlan, tr: TrainResult, round_index: int) -> None:
        """Add each transmitting client's noise to its payload and restate the round's Mechanism
        (sensitivity, sigma_eff, extra['fdp']) for the ledger; call before the ledger records the round."""
        o = self.options
        sending, gains, lrs, weight, sens, sigma_air = self.round_terms(plan, round_index)
        if o.sigma > 0:
            plan.payload = np.array(plan.payload, dtype=np.float64, copy=True)
            for i in np.flatnonzero(sending):
                plan.payload[i] = plan.payload[i] + self.client_noise(round_index, int(i), plan.dim)
        sigma_eff = self.round_sigma_eff(sigma_air, float(np.sum(gains ** 2)), o.sigma)
        info = {
            "method": self.method, "V": float(o.clip), "L": float(o.smoothness), "lrs": [float(v) for v in lrs],
            "alpha": float(self.alpha), "weight": weight, "weight_sum": float(gains.sum()), "scale": self.tau,
            "all_clients": bool(sending.all()), "update_clipped": bool(np.any(tr.clipped)), "momentum": 0.0,
            "sensitivity_mode": o.sensitivity_mode, "schedule": o.schedule, "lr": self.lr, "t": round_index - 1,
            "K": int(o.local_steps), "restore_lr": bool(o.restore_lr), "c": float(o.c), "z": float(o.z),
            "noise": "client" if o.sigma > 0 else "air", "sigma_client": float(o.sigma),
            "sigma_air": sigma_air, "m": int(plan.clients),
        }
        mech = plan.mechanism
        if "ofdm" in plan.extra:    # phy.waveform = "ofdm": the noise rides each subcarrier's gain (privacy/subcarrier_mechanism.py)
            from otafl_sdr.privacy.subcarrier_mechanism import client_noise_mechanism
            plan.mechanism = client_noise_mechanism(plan, sens / weight if weight > 0 else 0.0, o.sigma / self.tau, sending,
                                                    fdp={**info, "waveform": "ofdm"}, policy_sensitivity=float(mech.sensitivity))
            return
        mech.extra = {**mech.extra, "fdp": info, "policy_sensitivity": float(mech.sensitivity)}
        mech.sensitivity = sens
        mech.sigma_eff = sigma_eff


@ALGORITHMS.register("noisy_fedprox", "paper 002 Alg. 1 with eq. (4): proximal local steps (alpha = algorithm.mu), client noise")
class NoisyFedProx(NoisyFedAvg):
    name = "noisy_fedprox"
    method = "fedprox"

    @property
    def alpha(self) -> float:
        return float(self.cfg.algorithm.mu)
