"""Local training of all K clients at once (paper 000, sec. II-A and V).

Client i starts from the global model w_bar and runs ``train.local_epochs`` epochs of mini-batch SGD with
momentum ``train.momentum`` on its local objective
    g_i(w; w_bar) = F_i(w; D_i) + (mu/2) ||w - w_bar||^2          (FedProx / Upcycled-FL; mu = 0: FedAvg)
then reports the update w_i - w_bar clipped in L2 to ``train.tau`` (Assumption 1 of paper 000).
Optional per-step clipping of the mini-batch gradient of F_i to ``grad_clip`` (paper 002, Alg. 1), before
the proximal gradient mu (w - w_bar) is added.

The clients are trained together: parameters are stacked as (K, ...) tensors and each SGD step is one
batched computation. MLPs / softmax regression (``Sequential`` of ``Linear`` and ``ReLU``) use hand-written
batched matmuls (``torch.baddbmm``) with an analytic backward pass; other models use
``torch.func.vmap(grad(functional_call))``. Clients whose data ran out (unequal sizes) or padded samples
of a last, short batch are masked. ``train_round_reference`` is the plain per-client loop
(``nn.Module`` + ``torch.optim.SGD``) and gives the same result for the same seed.

Batch order: client k's permutation for each epoch of round m is drawn from
``seeding.torch_generator(seed, "train", m, k)``, independent of which other clients take part, and
identical after a resume.

Non-finite input never reaches the update: a sample with NaN/inf features (loaders refuse them; data
changed after loading) is stored as zeros with weight 0, and a per-sample gradient that is non-finite at
a step (overflow) is clipped to ZERO, never NaN; so the clipped update is finite and within tau for every
input (``_finish`` zeroes a row still non-finite: defence in depth). Finite inputs: bit-identical."""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from otafl_sdr import seeding
from otafl_sdr.learning.federated_data import FederatedData
from otafl_sdr.learning.sample_grads import CLIP_EPS, clipped_grad_sum, make_vmap_grad, make_vmap_sample_grad, zero_rows

_EVAL_CHUNK = 8192


def finite_samples(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(x with every non-finite sample's features set to 0, (..., n) bool mask of finite samples, or None
    when all are finite). x: (..., n, F); a masked sample must also get weight 0 (its gradient is zero)."""
    ok = torch.isfinite(x).all(-1)
    if bool(ok.all()):
        return x, None
    return torch.where(ok.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device)), ok


@dataclass
class TrainResult:
    """updates: (K, d) float32, row i = clip_tau(w_i - w_bar) (zeros for clients not trained);
    raw_norms: (K,) ||w_i - w_bar|| before clipping; clipped: (K,) bool, raw_norm > tau;
    train_loss: p-weighted (renormalised over ``clients``) mean cross-entropy over each client's last
    local epoch (loss of F_i only, measured before each step); client_loss: (K,) those per-client means
    (nan for clients not trained); clients: indices that were trained."""

    updates: torch.Tensor
    raw_norms: np.ndarray
    train_loss: float
    clipped: np.ndarray
    client_loss: np.ndarray
    clients: np.ndarray


def mlp_layers(model: nn.Module) -> list[nn.Linear] | None:
    """The Linear layers if ``model`` is Sequential(Linear, ReLU, Linear, ..., Linear), else None."""
    if not isinstance(model, nn.Sequential):
        return None
    mods = list(model.children())
    if not mods or len(mods) % 2 == 0:
        return None
    for j, m in enumerate(mods):
        want = nn.Linear if j % 2 == 0 else nn.ReLU
        if type(m) is not want:
            return None
    layers = mods[0::2]
    return layers if all(lin.bias is not None for lin in layers) else None


def resolve_device(name: str) -> str:
    """run.device: "cpu", "cuda" (refused in one line where torch sees no GPU) or "auto" (cuda if torch sees
    a GPU, else cpu)."""
    from otafl_sdr.errors import ConfigError
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("run.device", "is 'cuda' but torch sees no GPU (torch.cuda.is_available() is False); "
                                        "use 'cpu' or 'auto'")
    if name not in ("cpu", "cuda"):
        raise ConfigError("run.device", f"must be one of cpu, cuda, auto, got {name!r}")
    return name


class LocalTrainer:
    """Trains the K clients of ``data`` on copies of ``model``; parameters travel as flat (d,) vectors in
    the order of ``parameters_to_vector(model.parameters())``. Sets torch's thread count to
    ``run.torch_threads``. mode: "primal" (stacked parameters), "dual" (first layer as D^T X_k, MLPs
    only) or "auto" (dual when every trained client holds fewer samples than there are inputs)."""

    def __init__(self, cfg, data: FederatedData, model: nn.Module, mode: str = "auto"):
        if mode not in ("auto", "primal", "dual"):
            raise ValueError(f"mode must be auto, primal or dual, got {mode!r}")
        self.mode = mode
        self.cfg = cfg
        self.data = data
        self.model = model
        self._eval_model = copy.deepcopy(model)    # evaluate() never touches ``model``
        torch.set_num_threads(cfg.run.torch_threads)
        self.shapes = [tuple(p.shape) for p in model.parameters()]
        self.numels = [p.numel() for p in model.parameters()]
        self.dim = int(sum(self.numels))
        self.K = data.clients
        self.sizes = data.sizes
        self.p = data.p
        self._layers = mlp_layers(model)
        F_ = data.features
        n_max = int(self.sizes.max())
        self.device = torch.device(resolve_device(getattr(cfg.run, "device", "cpu")))
        self.x_pad = torch.zeros(self.K, n_max, F_, dtype=torch.float32)
        self.y_pad = torch.zeros(self.K, n_max, dtype=torch.int64)
        for k in range(self.K):
            n = int(self.sizes[k])
            self.x_pad[k, :n] = data.client_x[k].reshape(n, F_)
            self.y_pad[k, :n] = data.client_y[k]
        # local training runs on run.device (the padded data live there); updates come back to the CPU
        self.x_pad, self.ok_pad = finite_samples(self.x_pad)     # ok_pad: None when every sample is finite
        self.x_pad, self.y_pad = self.x_pad.to(self.device), self.y_pad.to(self.device)
        if self.ok_pad is not None:
            self.ok_pad = self.ok_pad.to(self.device)
        self._vmap_sample_grad = None                            # built on first use (per-sample clip)
        if self._layers is None:
            self._vmap_grad = make_vmap_grad(self.model)

    # ------------------------------------------------------------------ flat <-> model
    def get_flat(self) -> torch.Tensor:
        """The parameters of ``model`` as a (d,) float32 vector (w^0 unless ``set_flat`` was called)."""
        return parameters_to_vector(self.model.parameters()).detach().clone()

    def set_flat(self, flat: torch.Tensor) -> None:
        vector_to_parameters(self._as_flat(flat), self.model.parameters())

    def _as_flat(self, flat) -> torch.Tensor:
        flat = torch.as_tensor(flat).detach().to(torch.float32).reshape(-1)
        if flat.numel() != self.dim:
            raise ValueError(f"expected a flat model of {self.dim} parameters, got {flat.numel()}")
        return flat

    def _split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """(..., d) -> tensors of shape (..., *shape_j)."""
        lead = flat.shape[:-1]
        return [t.reshape(*lead, *s) for t, s in zip(torch.split(flat, self.numels, dim=-1), self.shapes)]

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def _loss_acc(self, flat, pairs) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) over the (x, y) chunks in ``pairs``."""
        vector_to_parameters(self._as_flat(flat), self._eval_model.parameters())
        self._eval_model.eval()
        loss, correct, count = 0.0, 0, 0
        for x, y in pairs:
            x = x.reshape(len(y), -1)
            for s in range(0, len(y), _EVAL_CHUNK):
                out = self._eval_model(x[s:s + _EVAL_CHUNK])
                loss += float(F.cross_entropy(out, y[s:s + _EVAL_CHUNK], reduction="sum"))
                correct += int((out.argmax(1) == y[s:s + _EVAL_CHUNK]).sum())
            count += len(y)
        return correct / count, loss / count

    def evaluate(self, flat) -> tuple[float, float]:
        """(test accuracy, mean test cross-entropy) of the model ``flat``."""
        return self._loss_acc(flat, [(self.data.test_x, self.data.test_y)])

    def global_train_loss(self, flat) -> float:
        """sum_i p_i F_i(w; D_i) = mean cross-entropy over all clients' training samples."""
        return self._loss_acc(flat, zip(self.data.client_x, self.data.client_y))[1]

    # ------------------------------------------------------------------ batch schedule
    def _clients(self, clients) -> np.ndarray:
        if clients is None:
            return np.arange(self.K)
        c = np.unique(np.asarray(clients, dtype=np.int64).reshape(-1))
        if len(c) == 0 or c.min() < 0 or c.max() >= self.K:
            raise ValueError(f"clients must be a non-empty subset of 0..{self.K - 1}, got {clients!r}")
        return c

    def permutations(self, round_index: int, k: int) -> list[torch.Tensor]:
        """Client k's sample order for each local epoch of ``round``."""
        g = seeding.torch_generator(self.cfg.run.seed, "train", round_index, int(k))
        n = int(self.sizes[k])
        return [torch.randperm(n, generator=g) for _ in range(self.cfg.train.local_epochs)]

    def _schedule(self, round_index: int, clients: np.ndarray):
        """idx (Kc, E, S, B) sample indices, mask (Kc, E, S, B) float, active (S, Kc) bool: step s of an
        epoch exists for a client with more than s B samples."""
        B, E = self.cfg.train.batch_size, self.cfg.train.local_epochs
        n = self.sizes[clients]
        S = int(np.ceil(n.max() / B))
        idx = torch.zeros(len(clients), E, S * B, dtype=torch.int64)
        mask = torch.zeros(len(clients), E, S * B, dtype=torch.float32)
        for j, k in enumerate(clients):
            for e, perm in enumerate(self.permutations(round_index, k)):
                idx[j, e, :len(perm)] = perm
                mask[j, e, :len(perm)] = 1.0
        steps = torch.as_tensor(np.ceil(n / B).astype(np.int64))
        active = torch.arange(S)[:, None] < steps[None, :]
        return idx.view(len(clients), E, S, B), mask.view(len(clients), E, S, B), active

    # ------------------------------------------------------------------ gradients (batched)
    def _mlp_grad(self, params: list[torch.Tensor], xb, yb, wb, dual=None, clip: float = 0.0):
        """Analytic batched gradient of the masked mean cross-entropy for Sequential(Linear, ReLU, ...).

        params: [W1 (K,h,F), b1 (K,h), W2, b2, ...]; xb (K,B,F); yb (K,B); wb (K,B) = mask / count.
        dual = (P, G, bi): first layer in dual form, params[0] = D (K,n,h) with W1 = W1_0 + D^T X,
        P = X W1_0^T (K,n,h), G = X X^T (K,n,n), bi (K,B) batch indices (xb unused).
        clip > 0: each sample's gradient (all layers) is clipped to norm ``clip`` before the weighted sum
        (DP-SGD style): per-sample weight gradients are outer products dz_j a_j^T, so their norms are
        ||dz_j|| ||a_j|| and the clipping is a per-sample rescaling of dz (exact, no per-sample tensors).
        Returns (grads, per-sample losses (K,B), squared norm of the first-layer weight gradient
        (K,) in dual mode else None)."""
        L = len(params) // 2
        rows = torch.arange(wb.shape[0], device=wb.device).unsqueeze(1)
        if dual is not None:
            P, G, bi = dual
            Gb = G[rows, bi]                                           # (K,B,n)
            z = torch.baddbmm(P[rows, bi], Gb, params[0]).add_(params[1].unsqueeze(1))
        else:
            z = torch.baddbmm(params[1].unsqueeze(1), xb, params[0].transpose(1, 2))
        acts, pre = [xb], []
        for l in range(1, L):
            pre.append(z)
            a = torch.relu(z)
            acts.append(a)
            z = torch.baddbmm(params[2 * l + 1].unsqueeze(1), a, params[2 * l].transpose(1, 2))
        logp = torch.log_softmax(z, dim=-1)
        losses = -logp.gather(2, yb.unsqueeze(2)).squeeze(2)
        dz = logp.exp_()                                               # softmax - onehot
        dz.scatter_add_(2, yb.unsqueeze(2), torch.full_like(losses, -1.0).unsqueeze(2))
        ok = torch.isfinite(losses) & torch.isfinite(dz).all(-1)       # (K,B) an overflowing sample: gradient 0
        if not bool(ok.all()):
            dz, losses, acts = zero_rows(dz, ok), zero_rows(losses, ok), [zero_rows(a, ok) for a in acts]
        if clip > 0:
            dzs = [None] * L                                           # per-sample dz of every layer
            for l in range(L - 1, -1, -1):
                dzs[l] = dz
                if l > 0:
                    dz = torch.bmm(dz, params[2 * l]).mul_(pre[l - 1] > 0)
            if dual is not None:
                x_sq = torch.diagonal(dual[1], dim1=1, dim2=2).gather(1, dual[2])     # ||x_j||^2 from G
            else:
                x_sq = xb.pow(2).sum(-1)
            sq = sum(dzs[l].pow(2).sum(-1) * ((x_sq if l == 0 else acts[l].pow(2).sum(-1)) + 1.0) for l in range(L))
            coef = torch.clamp(clip / (torch.sqrt(sq) + CLIP_EPS), max=1.0) * wb
            dzs = [d * coef.unsqueeze(2) for d in dzs]
            fin = torch.isfinite(sq) & torch.isfinite(coef)               # NaN/inf per-sample gradient: clipped to 0
            if not bool(fin.all()):
                dzs, acts = [zero_rows(d, fin) for d in dzs], [zero_rows(a, fin) for a in acts]
        else:
            dz.mul_(wb.unsqueeze(2))
        grads: list = [None] * (2 * L)
        sq_w1 = None
        for l in range(L - 1, -1, -1):
            if clip > 0:
                dz = dzs[l]
            grads[2 * l + 1] = dz.sum(1)
            if l == 0 and dual is not None:
                gd = torch.zeros_like(params[0])
                gd.index_put_((rows.expand_as(bi), bi), dz, accumulate=True)
                grads[0] = gd                                          # dW1 = gd^T X
                Gbb = Gb.gather(2, bi.unsqueeze(1).expand(-1, bi.shape[1], -1))
                sq_w1 = (torch.bmm(dz, dz.transpose(1, 2)) * Gbb).sum((1, 2))   # ||dz^T X_b||_F^2
            else:
                grads[2 * l] = torch.bmm(dz.transpose(1, 2), acts[l])
            if l > 0 and clip <= 0:
                dz = torch.bmm(dz, params[2 * l]).mul_(pre[l - 1] > 0)
        return grads, losses, sq_w1

    def _vmap_clipped_grad(self, params, xb, yb, wb, clip: float):
        """Batched per-sample-clipped gradient sum for models outside the MLP fast path."""
        if self._vmap_sample_grad is None:
            self._vmap_sample_grad = make_vmap_sample_grad(self.model)
        return clipped_grad_sum(self._vmap_sample_grad, params, xb, yb, wb, clip)

    def use_dual(self, n_max: int) -> bool:
        """Dual first layer pays off when a client holds fewer samples than there are input features."""
        if self._layers is None or self.mode == "primal":
            return False
        return self.mode == "dual" or n_max < self.data.features

    # ------------------------------------------------------------------ the round
    def _finish(self, w_global: torch.Tensor, final_delta: torch.Tensor, clients: np.ndarray,
                loss_sum: np.ndarray) -> TrainResult:
        """Clip w_i - w_bar to tau (Assumption 1 of paper 000) and assemble the result."""
        tau = self.cfg.train.tau
        norms = torch.linalg.vector_norm(final_delta, dim=1)
        if not bool(torch.isfinite(norms).all()):     # defence in depth: a row that is still NaN/inf sends zeros
            bad = ~torch.isfinite(final_delta).all(1)
            final_delta[bad] = 0.0
            norms = torch.linalg.vector_norm(final_delta.double(), dim=1).float()   # finite rows: no overflow
            norms[bad] = float("inf")
        scale = torch.clamp(tau / torch.clamp(norms, min=1e-30), max=1.0)
        if len(clients) == self.K:                          # clients are sorted: all of them
            updates = final_delta.mul_(scale.unsqueeze(1))
        else:
            updates = torch.zeros(self.K, self.dim, dtype=torch.float32)
            updates[torch.as_tensor(clients)] = final_delta * scale.unsqueeze(1)
        raw = np.zeros(self.K)
        raw[clients] = norms.double().numpy()
        client_loss = np.full(self.K, np.nan)
        client_loss[clients] = loss_sum / self.sizes[clients]
        pw = self.p[clients] / self.p[clients].sum()
        return TrainResult(updates, raw, float(pw @ client_loss[clients]), raw > tau, client_loss, clients)

    def train_round(self, global_flat, round_index: int, mu: float = 0.0, clients=None,
                    grad_clip: float = 0.0, sample_clip: float | None = None) -> TrainResult:
        """All (or the given) clients train from ``global_flat`` at once; see the module docstring.
        sample_clip: per-sample gradient clip (default ``train.sample_clip``; 0 = off)."""
        if sample_clip is None:
            sample_clip = float(getattr(self.cfg.train, "sample_clip", 0.0))
        if mu < 0 or grad_clip < 0 or sample_clip < 0:
            raise ValueError(f"mu and grad_clip must be >= 0, got mu={mu}, grad_clip={grad_clip}")
        t = self.cfg.train
        clients = self._clients(clients)
        dev = self.device
        w_global = self._as_flat(global_flat)
        Kc, E = len(clients), t.local_epochs
        idx, mask, active = (a.to(dev) for a in self._schedule(round_index, clients))
        S = idx.shape[2]
        ci = torch.as_tensor(clients, device=dev)
        n_max = int(self.sizes[clients].max())
        xs, ys = self.x_pad[ci, :n_max], self.y_pad[ci, :n_max]
        oks = None if self.ok_pad is None else self.ok_pad[ci, :n_max].to(torch.float32)
        rows = torch.arange(Kc, device=dev).unsqueeze(1)
        dual = self.use_dual(n_max)

        g_parts = self._split(w_global.to(dev))
        params = [p.unsqueeze(0).repeat(Kc, *([1] * p.dim())) for p in g_parts]   # (Kc, *shape) each
        anchors = [p.unsqueeze(0) for p in g_parts]
        if dual:   # W1 = W1_0 + D^T X_k: every first-layer gradient lies in the span of the client's samples
            P = (xs.reshape(Kc * n_max, -1) @ g_parts[0].T).reshape(Kc, n_max, -1)
            G = torch.bmm(xs, xs.transpose(1, 2))
            params[0] = torch.zeros(Kc, n_max, g_parts[0].shape[0], device=dev)
            anchors[0] = torch.zeros(1, 1, 1, device=dev)
        bufs = [torch.zeros_like(p) for p in params]
        loss_sum = torch.zeros(Kc, dtype=torch.float64, device=dev)

        with torch.no_grad():   # torch.func.grad ignores an outer no_grad
            for e in range(E):
                for s in range(S):
                    on = active[s]
                    all_on = bool(on.all())
                    bi = idx[:, e, s]
                    mb = mask[:, e, s]
                    wb = mb / mb.sum(1, keepdim=True).clamp(min=1.0)
                    if oks is not None:                     # a non-finite sample: weight 0, gradient 0
                        mb = mb * oks[rows, bi]
                        wb = wb * oks[rows, bi]
                    yb = ys[rows, bi]
                    sq_w1 = None
                    if dual:
                        grads, losses, sq_w1 = self._mlp_grad(params, None, yb, wb, (P, G, bi), clip=sample_clip)
                    elif self._layers is not None:
                        grads, losses, _ = self._mlp_grad(params, xs[rows, bi], yb, wb, clip=sample_clip)
                    elif sample_clip > 0:
                        self.model.train()
                        grads, losses = self._vmap_clipped_grad(params, xs[rows, bi], yb, wb, sample_clip)
                    else:
                        self.model.train()
                        grads, losses = self._vmap_grad(list(params), xs[rows, bi], yb, wb)
                        grads = list(grads)
                    if e == E - 1:
                        loss_sum += (losses * mb).sum(1).double()
                    if grad_clip > 0:                       # paper 002: clip the mini-batch gradient
                        sq = [g.reshape(Kc, -1).pow(2).sum(1) for g in grads]
                        if sq_w1 is not None:
                            sq[0] = sq_w1
                        coef = torch.clamp(grad_clip / (torch.sqrt(sum(sq)) + CLIP_EPS), max=1.0)
                        grads = [g * coef.view(-1, *([1] * (g.dim() - 1))) for g in grads]
                    for j in range(len(params)):
                        g = grads[j]
                        if mu > 0:                          # gradient of (mu/2)||w - w_bar||^2
                            g = g.add(params[j] - anchors[j], alpha=mu)
                        if all_on:                          # SGD with momentum, as torch.optim.SGD
                            bufs[j].mul_(t.momentum).add_(g)
                            params[j].sub_(bufs[j], alpha=t.lr)
                        else:                               # clients whose epoch has ended wait
                            a = on.view((-1,) + (1,) * (g.dim() - 1))
                            bufs[j] = torch.where(a, bufs[j] * t.momentum + g, bufs[j])
                            params[j] = torch.where(a, params[j] - t.lr * bufs[j], params[j])
            if dual:
                params[0] = torch.bmm(params[0].transpose(1, 2), xs)     # Delta W1 = D^T X
            else:
                params[0] = params[0] - anchors[0]
            deltas = [params[0]] + [p - a for p, a in zip(params[1:], anchors[1:])]
            final_delta = torch.cat([d.reshape(Kc, -1) for d in deltas], dim=1).cpu()
        return self._finish(w_global, final_delta, clients, loss_sum.cpu().numpy())

    # ------------------------------------------------------------------ plain reference loop
    def train_round_reference(self, global_flat, round_index: int, mu: float = 0.0, clients=None,
                              grad_clip: float = 0.0, sample_clip: float | None = None) -> TrainResult:
        """One client after another with ``nn.Module`` autograd and ``torch.optim.SGD``; same batches.
        Per-sample clipping here is one backward pass per sample (slow, plain)."""
        t = self.cfg.train
        if sample_clip is None:
            sample_clip = float(getattr(t, "sample_clip", 0.0))
        clients = self._clients(clients)
        w_global = self._as_flat(global_flat)
        model = copy.deepcopy(self.model)
        model.train()
        anchor = [p.detach().clone() for p in self._split(w_global)]
        final = torch.zeros(len(clients), self.dim)
        loss_sum = np.zeros(len(clients))
        for j, k in enumerate(clients):
            vector_to_parameters(w_global.clone(), model.parameters())
            opt = torch.optim.SGD(model.parameters(), lr=t.lr, momentum=t.momentum)
            x, ok = finite_samples(self.data.client_x[k].reshape(int(self.sizes[k]), -1))
            y = self.data.client_y[k]
            for e, perm in enumerate(self.permutations(round_index, k)):
                for s in range(0, len(perm), t.batch_size):
                    b = perm[s:s + t.batch_size]
                    opt.zero_grad()
                    if ok is None or bool(ok[b].all()):
                        loss = F.cross_entropy(model(x[b]), y[b])
                    else:                                   # a non-finite sample's gradient is 0
                        loss = (F.cross_entropy(model(x[b]), y[b], reduction="none") * ok[b]).sum() / len(b)
                    if sample_clip > 0:
                        acc = [torch.zeros_like(p) for p in model.parameters()]
                        for jj in b:
                            if ok is not None and not bool(ok[jj]):
                                continue
                            gj = torch.autograd.grad(F.cross_entropy(model(x[jj:jj + 1]), y[jj:jj + 1]),
                                                     list(model.parameters()))
                            nj = torch.sqrt(sum(g.pow(2).sum() for g in gj))
                            if not bool(torch.isfinite(nj)):
                                continue                    # a NaN/inf per-sample gradient is clipped to 0
                            c = min(1.0, sample_clip / (float(nj) + CLIP_EPS))
                            for a_, g in zip(acc, gj):
                                a_.add_(g, alpha=c / len(b))
                        for p, a_ in zip(model.parameters(), acc):
                            p.grad = a_
                    else:
                        loss.backward()
                    if grad_clip > 0:
                        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                    if mu > 0:
                        with torch.no_grad():
                            for p, a in zip(model.parameters(), anchor):
                                p.grad.add_(p - a, alpha=mu)
                    opt.step()
                    if e == t.local_epochs - 1:
                        loss_sum[j] += float(loss.detach()) * len(b)
            final[j] = parameters_to_vector(model.parameters()).detach()
        return self._finish(w_global, final - w_global.unsqueeze(0), clients, loss_sum)
