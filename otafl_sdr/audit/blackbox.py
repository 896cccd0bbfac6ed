"""Black-box canaries (issue 24, item 5): crafted training samples instead of crafted payloads.

``BlackBoxTransport(inner, canaries, rng, kind)``: before round 1 the audit picks, with its private
generator, one client (the *carrier*: the largest per-sample payload bound b_i, i.e. the smallest data
set under the sample unit) and m of its samples (the canary slots, m <= |D_i|); a private coin per slot
(exactly half heads) decides whether that slot holds the crafted sample or the original one:

- ``mislabeled``: the same input with a wrong label (a uniformly drawn other class);
- ``nonfinite``: the same input with one feature set to NaN (the trainer must clip its per-sample
  gradient to zero and never let it silence the client or reach the aggregate: issue 24, item 1).

Crafted samples *replace* originals, so |D_i| is unchanged and a slot is exactly one "replace one sample"
neighbour (privacy.unit = "sample"): the ledger's booked sensitivity covers it, and the mechanism is run
untouched (its payloads are the clients' own training results; nothing is added to a payload).

Statistic (the released aggregate's projection on the canary's gradient direction): in client round t the
experimenter trains the carrier once more on its original data (the counterfactual, from the same global
model w_t), so the residual r_t = received - the noiseless aggregate with the carrier's counterfactual
payload holds the inserted canaries' effect plus the air's noise. Canary c's direction is
d_c = -(clip_C g(crafted_c; w_t) - clip_C g(original_c; w_t)) / norm (per-sample clipped cross-entropy
gradients at the released model w_t; clip_C g = 0 for a non-finite input): the exact direction of its
effect for one full-batch local step (the default experiment), an approximation otherwise (the statistic
stays valid, it only loses power). T_c = sum_t (s_t / sigma_t^2) <r_t, d_c> as for white-box canaries
(audit/runner.py). One client holds every canary: spreading 4,000 slots over all clients (tried) made each
projection carry the 2,000 inserted canaries' correlated gradients (mu_hat 0.03 against 0.25-0.5 with one
client's 200 slots). A non-finite release (never on an honest pipeline: it would tell nothing about one slot,
all slots being fixed for the run) is counted in audit.json (``nonfinite_releases``) and projects to 0."""
from __future__ import annotations

import numpy as np
import torch

from otafl_sdr.errors import UserError
from otafl_sdr.learning.algorithms import FLAlgorithm
from otafl_sdr.learning.trainer import finite_samples, mlp_layers
from otafl_sdr.audit.transport import AuditTransport, air_image

KINDS = ("mislabeled", "nonfinite")
CHUNK = 128              # canaries whose per-sample gradients (crafted and original) are computed at once


class BlackBoxTransport(AuditTransport):
    """The run's transport with crafted samples in the carrier's data set (module docstring)."""

    kind = "mislabeled"

    def __init__(self, inner, canaries: int, rng: np.random.Generator, kind: str | None = None, **kw):
        kw.setdefault("probe_fresh_noise", False)
        super().__init__(inner, canaries, rng, **kw)
        self.kind = kind or self.kind
        if self.kind not in KINDS:
            raise UserError(f"black-box canary kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        self.w = None                    # the round's global model (the gradients' point)
        self.delta_row = None            # the carrier's payload with canaries minus without (this round)
        self.nonfinite_releases = 0
        self.effect_norms = None         # this round's ||clip g(crafted_c) - clip g(original_c)||

    # -- the crafted data set ---------------------------------------------------------------------
    def bind(self, parts) -> None:
        super().bind(parts)
        if parts.workload.name != "updates" or not hasattr(parts.trainer, "y_pad"):
            raise UserError("black-box canaries need the FL updates workload (a trainer with its samples); "
                            f"this run's workload is '{parts.workload.name}': use --canary white-box")
        tr = parts.trainer
        b = np.asarray(parts.info.payload_bound(), float)
        self.fixed = int(np.argmax(b))
        n = int(tr.sizes[self.fixed])
        self.m = min(self.m, n)
        if self.m < 4:
            raise UserError(f"the carrier (client {self.fixed}) holds {n} samples: too few for black-box canaries")
        self.coins = np.zeros(self.m, bool)
        self.coins[self.rng.permutation(self.m)[: self.m // 2]] = True
        self.slots = np.sort(self.rng.choice(n, size=self.m, replace=False))
        self.x0 = tr.x_pad[self.fixed, self.slots].detach().cpu().clone()
        self.y0 = tr.y_pad[self.fixed, self.slots].detach().cpu().clone()
        C = int(parts.data.num_classes)
        shift = torch.as_tensor(self.rng.integers(1, C, size=self.m), dtype=torch.int64)
        self.y1 = (self.y0 + shift) % C if self.kind == "mislabeled" else self.y0.clone()
        self.x1 = self.x0.clone()
        if self.kind == "nonfinite":
            self.x1[torch.arange(self.m), torch.as_tensor(self.rng.integers(0, self.x0.shape[1], size=self.m))] = np.nan
        self.original = (tr.x_pad.clone(), tr.y_pad.clone(), tr.ok_pad)
        self._set_slots(self.coins)
        self.crafted = (tr.x_pad, tr.y_pad, tr.ok_pad)

    def _set_slots(self, which: np.ndarray) -> None:
        """The carrier's slots where ``which`` is True hold the crafted samples; the trainer's defence
        against non-finite samples (learning/trainer.py ``finite_samples``) applied as at load time."""
        tr = self.parts.trainer
        x, y = self.original[0].clone(), self.original[1].clone()
        sl = torch.as_tensor(self.slots[which])
        x[self.fixed, sl] = self.x1[torch.as_tensor(which)].to(x.device)
        y[self.fixed, sl] = self.y1[torch.as_tensor(which)].to(y.device)
        tr.x_pad, tr.ok_pad = finite_samples(x)
        tr.y_pad = y

    def _use(self, data) -> None:
        tr = self.parts.trainer
        tr.x_pad, tr.y_pad, tr.ok_pad = data

    # -- the round ---------------------------------------------------------------------------------
    def carrier(self, plan) -> int:
        return self.fixed

    def insert(self, plan, round_index: int):
        return plan, self.fixed               # nothing is added to a payload: the data set holds the canaries

    def local_round(self, round_index: int, w):
        local = super().local_round(round_index, w)
        self.w, self.delta_row, self.effect_norms = None, None, None
        if self.local is not None:
            self.w = torch.as_tensor(w).detach().clone()
            with_canaries = np.asarray(self.local.payload[self.fixed], np.float64)
            self.delta_row = with_canaries - self._counterfactual(w, round_index)
        return local

    def _counterfactual(self, w, round_index: int) -> np.ndarray:
        """The carrier's payload u_i / tau trained on its original data, from the same global model."""
        parts = self.parts
        self._use(self.original)
        try:
            alg = parts.algorithm
            if type(alg).local_train is FLAlgorithm.local_train:       # train the carrier alone
                tr = parts.trainer.train_round(w, round_index, mu=alg.local_mu, clients=[self.fixed])
            else:
                tr = alg.local_train(parts.trainer, w, round_index)
        finally:
            self._use(self.crafted)
        return np.divide(tr.updates[self.fixed].detach().numpy(), parts.cfg.train.tau, dtype=np.float64)

    def clean_payload(self, plan) -> np.ndarray:
        """The experimenter's noiseless payloads with the carrier's counterfactual row (no canaries)."""
        clean = super().clean_payload(plan).copy()
        if self.delta_row is not None and plan.mode[self.fixed] == "update":
            clean[self.fixed] = clean[self.fixed] - self.delta_row
        return clean

    def canary_image(self, plan, i: int, g: complex) -> np.ndarray:
        """What the inserted canaries added to the aggregate this round (exactly: with minus without)."""
        return air_image(g, self.delta_row) if self.delta_row is not None else np.zeros(plan.dim)

    def _observe(self, plan, round_index: int, attempt: int, i: int, received: np.ndarray, notes: list) -> None:
        super()._observe(plan, round_index, attempt, i, received, notes)
        g = abs(self.gains(plan)[i])
        # one inserted canary's move of the noiseless aggregate for one local step from w_t (the default
        # experiment's full-batch step): |g_i| lr ||clip g(crafted) - clip g(original)|| / (|D_i| tau), mean
        # over the inserted canaries; at most |g_i| 2 lr C / (|D_i| tau), the booked sensitivity
        norms = getattr(self, "effect_norms", None)
        if norms is not None and self.rounds and self.rounds[-1]["round"] == round_index:
            t = self.parts.cfg.train
            n = float(self.parts.trainer.sizes[self.fixed])
            self.rounds[-1]["shift"] = g * t.lr * float(np.mean(norms[self.coins])) / (n * t.tau)

    def project(self, back: np.ndarray, plan) -> np.ndarray:
        """(<back, d_c>)_c on the canaries' gradient directions at this round's model (module docstring)."""
        if not np.all(np.isfinite(back)):       # never on an honest pipeline (a NaN release): counted apart
            self.nonfinite_releases += 1
            return np.zeros(self.m)
        layers = mlp_layers(self.parts.trainer.model)
        if layers is not None:                  # closed form, no (m, d) gradient ever built
            proj, self.effect_norms = self.mlp_directions(len(layers), torch.as_tensor(back, dtype=torch.float64))
        else:
            proj, self.effect_norms = self.directions(torch.as_tensor(back, dtype=torch.float32))
        return proj

    def mlp_directions(self, L: int, back: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """``directions`` for Sequential(Linear, ReLU, ..., Linear) in closed form (float64): a sample's
        gradient is grad W_l = delta_l a_{l-1}^T, grad b_l = delta_l (delta_L = softmax - onehot,
        delta_l = W_{l+1}^T delta_{l+1} * 1[z_l > 0]), so <back, g> = sum_l delta_l^T B_l a_{l-1} + delta_l.beta_l,
        ||g||^2 = sum_l |delta_l|^2 (|a_{l-1}|^2 + 1) and <g, g'> = sum_l (delta_l.delta'_l)(a_{l-1}.a'_{l-1} + 1)."""
        tr = self.parts.trainer
        w = [t.reshape(s).to(torch.float64) for t, s in zip(torch.split(self.w.reshape(-1), tr.numels), tr.shapes)]
        bk = [t.reshape(s) for t, s in zip(torch.split(back, tr.numels), tr.shapes)]
        W, bias, BW, Bb = w[0::2], w[1::2], bk[0::2], bk[1::2]
        C = float(getattr(self.parts.cfg.train, "sample_clip", 0.0) or 0.0)

        def grads(x, y):
            ok = torch.isfinite(x).all(1)
            a = torch.where(ok[:, None], x, torch.zeros(())).to(torch.float64)
            acts, zs = [], []
            for layer in range(L):
                acts.append(a)
                z = a @ W[layer].T + bias[layer]
                zs.append(z)
                a = torch.relu(z)
            deltas = [None] * L
            deltas[-1] = torch.softmax(zs[-1], dim=1) - torch.nn.functional.one_hot(y, zs[-1].shape[1]).to(torch.float64)
            for layer in range(L - 2, -1, -1):
                deltas[layer] = (deltas[layer + 1] @ W[layer + 1]) * (zs[layer] > 0)
            sq = sum((deltas[j] ** 2).sum(1) * ((acts[j] ** 2).sum(1) + 1) for j in range(L))
            s = torch.clamp(C / (torch.sqrt(sq) + 1e-6), max=1.0) if C > 0 else torch.ones_like(sq)
            s = torch.where(ok & torch.isfinite(sq), s, torch.zeros(()))      # a non-finite sample: gradient 0
            pb = sum(((deltas[j] @ BW[j]) * acts[j]).sum(1) + deltas[j] @ Bb[j] for j in range(L))
            return deltas, acts, s, torch.nan_to_num(sq), torch.nan_to_num(pb)

        d1, a1, s1, sq1, pb1 = grads(self.x1, self.y1)
        d0, a0, s0, sq0, pb0 = grads(self.x0, self.y0)
        cross = sum((d0[j] * d1[j]).sum(1) * ((a0[j] * a1[j]).sum(1) + 1) for j in range(L))
        n2 = (s0 ** 2 * sq0 + s1 ** 2 * sq1 - 2 * s0 * s1 * cross).clamp(min=0.0)
        nrm = torch.sqrt(n2)
        proj = torch.where(nrm > 0, (s0 * pb0 - s1 * pb1) / nrm.clamp(min=1e-300), torch.zeros(()))
        return proj.numpy(), nrm.numpy()

    def directions(self, back: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """((<back, d_c>)_c, (||clip g(crafted_c) - clip g(original_c)||)_c) with the unit
        d_c = -(clip g(crafted) - clip g(original)) / norm at w (a zero difference projects to 0); the
        (m, d) directions are never held at once (CHUNK canaries at a time, float32)."""
        proj, norms = np.zeros(self.m), np.zeros(self.m)
        for a in range(0, self.m, CHUNK):
            sl = slice(a, min(a + CHUNK, self.m))
            b = sl.stop - sl.start
            g = self.clipped_grads(torch.cat([self.x1[sl], self.x0[sl]]), torch.cat([self.y1[sl], self.y0[sl]]))
            d = g[b:] - g[:b]                                   # -(crafted - original)
            nrm = d.norm(dim=1)
            p = (d @ back) / nrm.clamp(min=1e-30)
            proj[sl] = np.where(nrm.numpy() > 0, p.double().numpy(), 0.0)
            norms[sl] = nrm.double().numpy()
        return proj, norms

    def clipped_grads(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(B, d) float32 per-sample cross-entropy gradients at w, clipped to train.sample_clip (C = 0: not
        clipped); a non-finite input's gradient is 0, as the trainer makes it."""
        from torch.func import functional_call, grad, vmap
        tr = self.parts.trainer
        model = tr.model
        names = [nm for nm, _ in model.named_parameters()]
        params = [t.reshape(s) for t, s in zip(torch.split(self.w.to(torch.float32), tr.numels), tr.shapes)]
        ok = torch.isfinite(x).all(1)
        xs = torch.where(ok[:, None], x, torch.zeros(()))

        def one(plist, xi, yi):
            out = functional_call(model, dict(zip(names, plist)), (xi.unsqueeze(0),))
            return torch.nn.functional.cross_entropy(out, yi.unsqueeze(0))

        was = model.training
        model.eval()
        try:
            gs = vmap(grad(one), in_dims=(None, 0, 0))(params, xs, y)
        finally:
            model.train(was)
        g = torch.cat([t.reshape(len(y), -1) for t in gs], dim=1)
        C = float(getattr(self.parts.cfg.train, "sample_clip", 0.0) or 0.0)
        if C > 0:
            g = g * torch.clamp(C / (g.norm(dim=1, keepdim=True) + 1e-6), max=1.0)
        return torch.where(ok[:, None] & torch.isfinite(g).all(1, keepdim=True), g, torch.zeros((), dtype=g.dtype))

    def describe(self) -> dict:
        return {"canary": self.kind, "canary_carrier": self.fixed, "canary_slots": int(self.m),
                "carrier_samples": int(self.parts.trainer.sizes[self.fixed]),
                "nonfinite_releases": int(self.nonfinite_releases)}
