"""Algorithm ``otafd``: over-the-air federated distillation (paper 003; extract part a).

Every device i keeps its own model theta_i (no model averaging). Round t:
  1. payload: device i's per-class average soft prediction on its local data (inferred eq. (a1))
         q_i^k = (1 / B_i^k) sum_{b in class k} softmax(G_theta_i(u_b))      (C numbers in the simplex)
     the C x C matrix (q_i^1, ..., q_i^C) flattened: d = C^2 reals (``DeviceModels.payload``);
  2. the transceiver (power policy ``otafd_prop1``) sends it over the air; the server receives the
     global targets r^k = sum_i (B_i^k / B^k) q_i^k + noise (the ledger records the round first: release);
  3. local training on the DP targets (inferred from eqs. (2), (4), (5) of the supplement):
         F_i(theta; {r^k}) = CE_i(theta) + (gamma / B) sum_b || softmax(G_theta(u_b)) - r^{v_b} ||_2^2
     ``train.local_epochs`` epochs of mini-batch SGD (``train.batch_size``, ``train.lr``, ``train.momentum``,
     fresh momentum every round), all devices at once (``torch.func.vmap`` over stacked parameters).
Options (``algorithm.options``): gamma (distillation weight, the paper's gamma; 1.0), warmup_epochs (local
cross-entropy epochs before round 1, so the first payload is not from untrained models; 0 as in the
paper; nothing is released by it), targets: "raw" (the received r^k, as in the paper) or "simplex"
(projected onto the probability simplex: post-processing, no privacy cost). A lost round trains on the
last received targets (post-processing of an earlier release), or on cross-entropy alone before any.

Test accuracy of a run is the mean over the devices' models on the pooled test set (min and max beside).
Its round is the common one (rounds/pipeline.py) with the ``distillation`` workload; this module is
pure torch and never imports the orchestrator."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parameters_to_vector

from otafl_sdr import seeding
from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import ALGORITHMS
from otafl_sdr.learning.algorithms import FLAlgorithm
from otafl_sdr.learning.federated_data import FederatedData

_CHUNK = 4096


@dataclass
class OtafdOptions:
    gamma: float = 1.0
    warmup_epochs: int = 0
    targets: str = "raw"

    def check(self) -> None:
        g = self.gamma
        if not (isinstance(g, (int, float)) and not isinstance(g, bool) and math.isfinite(g) and g >= 0):
            raise ConfigError("algorithm.options.gamma", f"must be a number >= 0, got {g!r}")
        w = self.warmup_epochs
        if not (isinstance(w, int) and not isinstance(w, bool) and w >= 0):
            raise ConfigError("algorithm.options.warmup_epochs", f"must be an integer >= 0, got {w!r}")
        if self.targets not in ("raw", "simplex"):
            raise ConfigError("algorithm.options.targets", f"must be 'raw' or 'simplex', got {self.targets!r}")


@ALGORITHMS.register("otafd", "paper 003: over-the-air federated distillation (per-class soft predictions, "
                              "C^2 numbers per device) with DP; power.policy = otafd_prop1")
class Otafd(FLAlgorithm):
    name = "otafd"
    Options = OtafdOptions
    testbed_ready = False
    workload = "distillation"
    small_run = ("power.policy=otafd_prop1", "data.partition=dominant_class", "algorithm.options={gamma = 2.0, targets = 'simplex'}")

    def __init__(self, cfg):
        super().__init__(cfg)                         # options typed and check()ed by options.build_options
        self.design_rounds: int | None = None       # set by the experiment when the transceiver picks T

    def iterations(self, rounds: int) -> int:
        return self.design_rounds or rounds

    def server_step(self, w, aggregate, round_index):
        raise NotImplementedError("otafd has no server model step; the distillation workload steps the devices instead")


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex (Duchi et al. 2008)."""
    v = np.asarray(v, dtype=np.float64)
    u = -np.sort(-v, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    k = np.arange(1, v.shape[-1] + 1)
    cond = u - css / k > 0
    rho = cond.shape[-1] - 1 - np.argmax(cond[..., ::-1], axis=-1)
    theta = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1)
    return np.maximum(v - theta, 0.0)


def label_counts(data: FederatedData) -> np.ndarray:
    """(K, C) B_i^k."""
    return np.stack([np.bincount(np.asarray(y), minlength=data.num_classes) for y in data.client_y]).astype(np.int64)


class DeviceModels:
    """The K devices' own models as stacked flat parameters (K, d) (the run state), their payloads, local
    distillation training and evaluation. ``model`` gives the architecture and the common init w^0."""

    def __init__(self, cfg, data: FederatedData, model: nn.Module, gamma: float = 1.0):
        self.cfg = cfg
        self.data = data
        self.model = model
        self.gamma = float(gamma)
        self.K = data.clients
        self.C = int(data.num_classes)
        self.shapes = [tuple(p.shape) for p in model.parameters()]
        self.numels = [p.numel() for p in model.parameters()]
        self.dim = int(sum(self.numels))
        self.sizes = data.sizes
        self.counts = label_counts(data)
        F_, n_max = data.features, int(self.sizes.max())
        self.x_pad = torch.zeros(self.K, n_max, F_, dtype=torch.float32)
        self.y_pad = torch.zeros(self.K, n_max, dtype=torch.int64)
        for i in range(self.K):
            n = int(self.sizes[i])
            self.x_pad[i, :n] = data.client_x[i].reshape(n, F_)
            self.y_pad[i, :n] = data.client_y[i]
        from otafl_sdr.learning.trainer import finite_samples
        self.x_pad, self._finite = finite_samples(self.x_pad)    # a NaN/inf sample: zeros, no gradient
        self._names = [n for n, _ in model.named_parameters()]
        from torch.func import functional_call, grad, vmap

        def logits(params, x):
            return functional_call(model, dict(zip(self._names, params)), (x,))

        def loss_fn(params, xb, yb, wb, tb, gamma):
            out = logits(params, xb)
            ce = F.cross_entropy(out, yb, reduction="none")
            dist = ((torch.softmax(out, dim=-1) - tb) ** 2).sum(-1)              # ||G(u) - r^{v}||^2
            per = ce + gamma * dist
            return (per * wb).sum(), ce.detach()

        self._logits = vmap(logits)
        self._grad = vmap(grad(loss_fn, has_aux=True), in_dims=(0, 0, 0, 0, 0, None))

    # ------------------------------------------------------------------ state
    def get_flat(self) -> torch.Tensor:
        """(K, d): every device starts from the common initialisation of ``model``."""
        w0 = parameters_to_vector(self.model.parameters()).detach().to(torch.float32)
        return w0.unsqueeze(0).repeat(self.K, 1)

    def _split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        lead = flat.shape[:-1]
        return [t.reshape(*lead, *s) for t, s in zip(torch.split(flat, self.numels, dim=-1), self.shapes)]

    def _check(self, flat) -> torch.Tensor:
        flat = torch.as_tensor(flat).detach().to(torch.float32)
        if tuple(flat.shape) != (self.K, self.dim):
            raise ValueError(f"expected device models of shape ({self.K}, {self.dim}), got {tuple(flat.shape)}")
        return flat

    # ------------------------------------------------------------------ payload
    @torch.no_grad()
    def softmax_local(self, flat) -> torch.Tensor:
        """(K, n_max, C) softmax outputs of each device's model on its own (padded) data."""
        params = tuple(self._split(self._check(flat)))
        self.model.eval()
        out = []
        for s in range(0, self.x_pad.shape[1], _CHUNK):
            out.append(torch.softmax(self._logits(params, self.x_pad[:, s:s + _CHUNK]), dim=-1))
        return torch.cat(out, dim=1)

    def payload(self, flat) -> np.ndarray:
        """(K, C, C) q_i^k: row k = mean softmax over device i's class-k samples (zeros if it has none).
        Rows lie in the simplex (renormalised against rounding), so ||q - q'|| <= sqrt(2) (Lemma 1), for every
        input: a sample whose softmax is not finite (an overflowing input or model) counts as the uniform
        distribution, a fixed point of the simplex, so the payload is never NaN and the device still sends."""
        p = self.softmax_local(flat).double()
        bad = ~torch.isfinite(p).all(-1)
        if bool(bad.any()):
            p = torch.where(bad.unsqueeze(-1), torch.full_like(p, 1.0 / self.C), p)
        onehot = F.one_hot(self.y_pad, self.C).double()                          # (K, n, C)
        mask = (torch.arange(self.x_pad.shape[1])[None, :] < torch.as_tensor(self.sizes)[:, None]).double()
        sums = torch.einsum("knc,knj->kcj", onehot * mask[..., None], p)          # (K, C classes, C outputs)
        counts = torch.as_tensor(self.counts, dtype=torch.float64)
        q = sums / counts.clamp(min=1.0)[..., None]
        q = q.clamp(min=0.0)
        tot = q.sum(-1, keepdim=True)
        q = torch.where(tot > 0, q / tot.clamp(min=1e-300), q)
        return q.numpy()

    # ------------------------------------------------------------------ local training
    def _schedule(self, round_index: int, epochs: int):
        B = self.cfg.train.batch_size
        n = self.sizes
        S = int(np.ceil(n.max() / B))
        idx = torch.zeros(self.K, epochs, S * B, dtype=torch.int64)
        mask = torch.zeros(self.K, epochs, S * B, dtype=torch.float32)
        for i in range(self.K):
            g = seeding.torch_generator(self.cfg.run.seed, "otafd-train", round_index, i)
            for e in range(epochs):
                perm = torch.randperm(int(n[i]), generator=g)
                idx[i, e, :len(perm)] = perm
                mask[i, e, :len(perm)] = 1.0
        steps = torch.as_tensor(np.ceil(n / B).astype(np.int64))
        active = torch.arange(S)[:, None] < steps[None, :]
        return idx.view(self.K, epochs, S, B), mask.view(self.K, epochs, S, B), active

    def train_round(self, flat, targets: np.ndarray | None, round_index: int, epochs: int | None = None,
                    gamma: float | None = None) -> tuple[torch.Tensor, np.ndarray]:
        """Every device's local epochs on CE + gamma ||softmax - r^{label}||^2 (targets (C, C): row k = r^k;
        None: cross-entropy only). Returns (new (K, d) models, (K,) mean CE over the last epoch)."""
        t = self.cfg.train
        E = t.local_epochs if epochs is None else int(epochs)
        gam = self.gamma if gamma is None else float(gamma)
        if targets is None:
            gam = 0.0
            tgt = torch.zeros(self.C, self.C)
        else:
            tgt = torch.as_tensor(np.asarray(targets), dtype=torch.float32).reshape(self.C, self.C)
        params = [p.clone() for p in self._split(self._check(flat))]
        bufs = [torch.zeros_like(p) for p in params]
        if E == 0:
            return self._check(flat).clone(), np.full(self.K, np.nan)
        idx, mask, active = self._schedule(round_index, E)
        S = idx.shape[2]
        rows = torch.arange(self.K).unsqueeze(1)
        loss_sum = torch.zeros(self.K, dtype=torch.float64)
        self.model.train()
        with torch.no_grad():
            for e in range(E):
                for s in range(S):
                    on = active[s]
                    bi = idx[:, e, s]
                    mb = mask[:, e, s]
                    wb = mb / mb.sum(1, keepdim=True).clamp(min=1.0)
                    if self._finite is not None:           # a non-finite sample: weight 0, gradient 0
                        mb, wb = mb * self._finite[rows, bi], wb * self._finite[rows, bi]
                    yb = self.y_pad[rows, bi]
                    grads, ce = self._grad(tuple(params), self.x_pad[rows, bi], yb, wb, tgt[yb], gam)
                    fin = torch.stack([torch.isfinite(g.reshape(self.K, -1)).all(1) for g in grads]).all(0)
                    if not bool(fin.all()):                 # an overflowing step: clipped to 0 (never NaN)
                        grads = [torch.where(fin.view(-1, *([1] * (g.dim() - 1))), g, 0.0) for g in grads]
                        ce = torch.nan_to_num(ce, nan=0.0, posinf=0.0)
                    if e == E - 1:
                        loss_sum += (ce * mb).sum(1).double()
                    for j, g in enumerate(grads):
                        a = on.view((-1,) + (1,) * (g.dim() - 1))
                        bufs[j] = torch.where(a, bufs[j] * t.momentum + g, bufs[j])
                        params[j] = torch.where(a, params[j] - t.lr * bufs[j], params[j])
        new = torch.cat([p.reshape(self.K, -1) for p in params], dim=1)
        return new, loss_sum.numpy() / self.sizes

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, flat, x: torch.Tensor | None = None, y: torch.Tensor | None = None):
        """(accuracy (K,), mean cross-entropy (K,)) of every device's model on (x, y) (default: test set)."""
        x = self.data.test_x if x is None else x
        y = self.data.test_y if y is None else y
        params = tuple(self._split(self._check(flat)))
        self.model.eval()
        x = x.reshape(len(y), -1)
        correct = torch.zeros(self.K, dtype=torch.float64)
        loss = torch.zeros(self.K, dtype=torch.float64)
        for s in range(0, len(y), _CHUNK):
            xb = x[s:s + _CHUNK].unsqueeze(0).expand(self.K, -1, -1)
            out = self._logits(params, xb)                                       # (K, n, C)
            yb = y[s:s + _CHUNK]
            correct += (out.argmax(-1) == yb[None, :]).sum(1).double()
            loss += F.cross_entropy(out.reshape(-1, self.C), yb.repeat(self.K), reduction="none").view(
                self.K, -1).sum(1).double()
        return (correct / len(y)).numpy(), (loss / len(y)).numpy()
