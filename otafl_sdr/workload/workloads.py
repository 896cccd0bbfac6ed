"""The two workloads a round can carry: ``updates`` (FL: clipped model updates u_i / tau, eq. (7) of paper
000 as the server step) and ``distillation`` (paper 003's OTA-FD: per-class mean logits q_i, received
targets r^k, local distillation). An algorithm names its workload (``FLAlgorithm.workload``); the round
pipeline (rounds/pipeline.py) asks the workload for the payload and the step, never the algorithm's name."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from otafl_sdr.errors import ConfigError
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory, aggregate_scale_and_residual
from otafl_sdr.workload.parts import RunParts, standard_info


@dataclass
class LocalRound:
    """What the clients computed for one round. payload: (K, d) reals (zeros where the server does not
    see them: the testbed outside diagnostics); absent: (K,) clients that did not answer (the only ones
    that stay silent: no client is silenced by its data); w: the model the server step starts from;
    train_loss / clipped: evaluation-side figures (None where unknown)."""

    payload: np.ndarray
    w: torch.Tensor
    absent: np.ndarray
    train: object = None
    train_loss: float | None = None
    clipped: np.ndarray | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class StepResult:
    """The server step's new model, its row fields and the training loss the metrics report."""

    w: torch.Tensor
    fields: dict
    train_loss: object = None


def _none(K: int) -> np.ndarray:
    return np.zeros(K, dtype=bool)


class UpdatesWorkload:
    """FL updates: local training -> clip -> u_i / tau; server step w + tau * aggregate (eq. 7)."""

    name = "updates"

    def check(self, cfg, algorithm) -> None:
        """Refuse a config this workload cannot run (before the data is loaded)."""

    def make_trainer(self, cfg, data, model, algorithm):
        from otafl_sdr.learning.trainer import LocalTrainer
        return LocalTrainer(cfg, data, model)

    def payload_dim(self, trainer, data) -> int:
        return int(trainer.dim)

    def system_info(self, parts: RunParts):
        from otafl_sdr.privacy.sensitivity import payload_bounds_for
        return standard_info(parts, parts.ledger_sigma_c2(),
                             bound=payload_bounds_for(parts.cfg, parts.data.sizes, mu=float(parts.algorithm.local_mu)))

    def after_policy(self, parts: RunParts) -> None:
        """Settle what depends on the built policy (nothing for FL updates)."""

    def initial_model(self, parts: RunParts) -> torch.Tensor:
        return parts.trainer.get_flat().detach().clone()

    def local(self, parts: RunParts, round_index: int, w: torch.Tensor) -> LocalRound:
        tr = parts.algorithm.local_train(parts.trainer, w, round_index)
        # ||u_i / tau|| <= 1; float64(u) / tau in one pass (the same values as converting, then dividing)
        payload = np.divide(tr.updates.detach().numpy(), parts.cfg.train.tau, dtype=np.float64)
        return LocalRound(payload=payload, w=w, absent=_none(parts.K), train=tr,
                          train_loss=tr.train_loss, clipped=tr.clipped)

    def finish_plan(self, parts: RunParts, plan, local: LocalRound, round_index: int) -> None:
        parts.algorithm.finish_plan(plan, local.train, round_index)     # client noise + the mechanism (paper 002)

    def step(self, parts: RunParts, round_index: int, local: LocalRound, plan, rec) -> StepResult:
        w = local.w
        expected = plan.expected_aggregate()
        if rec.ok:
            agg = torch.as_tensor(rec.aggregate * parts.cfg.train.tau, dtype=w.dtype)
            w_new = parts.algorithm.server_step(w, agg, round_index)
            nmse = aggregate_nmse(rec.aggregate, expected)
            scale, residual = aggregate_scale_and_residual(rec.aggregate, expected)
        else:
            w_new, nmse, scale, residual = w.clone(), None, None, None     # lost round: model unchanged
        return StepResult(w=w_new, train_loss=local.train_loss, fields={
            "aggregate_nmse": nmse, "aggregate_nmse_theory": nmse_theory(plan, expected),
            "aggregate_scale": scale, "aggregate_residual_nmse": residual, **planned_nmse(plan, rec),
            "clipped_fraction": float(np.mean(local.clipped)) if local.clipped is not None else None})

    def server_only_step(self, parts: RunParts, round_index: int, w, w_prev):
        return parts.algorithm.server_only_step(w, w_prev, round_index)

    def metrics(self, parts: RunParts, w, train_loss, evaluate: bool) -> dict:
        """Evaluation-side figures (test set; the global training loss reads every client's data: for the
        experimenter, never released). None between ``run.eval_every`` evaluations."""
        if not evaluate:
            return {"test_accuracy": None, "test_loss": None, "train_loss": None, "local_train_loss": train_loss}
        acc, test_loss = parts.trainer.evaluate(w)
        return {"test_accuracy": acc, "test_loss": test_loss, "train_loss": parts.trainer.global_train_loss(w),
                "local_train_loss": train_loss}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Nothing beyond the model and the policy to restore."""

    def summary_fields(self, parts: RunParts, rows: list) -> dict:
        return {}


class DistillationWorkload(UpdatesWorkload):
    """Paper 003's OTA-FD: the state is the K devices' own models (a (K, d) tensor), the payload C^2 per-class
    mean logits q_i per device (``DeviceModels.payload``), the released aggregate becomes the targets r^k
    of the devices' distillation step (Proposition 1's transceiver ``otafd_prop1``)."""

    name = "distillation"
    POLICY = "otafd_prop1"

    def __init__(self):
        self.last_targets = None

    def check(self, cfg, algorithm) -> None:
        from otafl_sdr.learning.otafd import Otafd
        if not isinstance(algorithm, Otafd):
            raise ConfigError("algorithm.name", f"the distillation workload runs algorithm 'otafd', not "
                                                f"'{cfg.algorithm.name}'")
        if cfg.power.policy != self.POLICY:
            raise ConfigError("power.policy", f"algorithm 'otafd' needs its transceiver '{self.POLICY}', "
                                              f"got '{cfg.power.policy}'")

    def make_trainer(self, cfg, data, model, algorithm):
        from otafl_sdr.learning.otafd import DeviceModels
        return DeviceModels(cfg, data, model, gamma=algorithm.options.gamma)

    def payload_dim(self, trainer, data) -> int:
        return int(data.num_classes) ** 2

    def system_info(self, parts: RunParts):
        return standard_info(parts, float(parts.cfg.channel.sigma_c2), jammer=False)

    def after_policy(self, parts: RunParts) -> None:
        policy = parts.policy
        parts.algorithm.design_rounds = policy.T if policy.options.rounds == "prop2" else None

    def local(self, parts: RunParts, round_index: int, w: torch.Tensor) -> LocalRound:
        opts = parts.algorithm.options
        if round_index == 1 and opts.warmup_epochs > 0:             # local cross-entropy only: nothing released
            w, _ = parts.trainer.train_round(w, None, 0, epochs=opts.warmup_epochs)
        q = parts.trainer.payload(w)                                             # (K, C, C)
        return LocalRound(payload=q.reshape(parts.K, parts.dim), w=w, absent=_none(parts.K), extra={"q": q})

    def finish_plan(self, parts: RunParts, plan, local: LocalRound, round_index: int) -> None:
        """Proposition 1's plan is complete as the transceiver made it."""

    def step(self, parts: RunParts, round_index: int, local: LocalRound, plan, rec) -> StepResult:
        policy, q = parts.policy, local.extra["q"]
        clean = plan.extra["clean_payload"].sum(axis=0)                      # noiseless aggregate
        nmse = target_nmse = None
        if rec.ok:
            targets = policy.targets(rec.aggregate, plan)
            exact = (policy.w[:, :, None] * q).sum(axis=0)                      # r^k without noise
            target_nmse = aggregate_nmse(targets, exact)
            nmse = aggregate_nmse(rec.aggregate, clean)
            if parts.algorithm.options.targets == "simplex":
                from otafl_sdr.learning.otafd import project_simplex
                targets = project_simplex(targets)
            self.last_targets = targets
        w_new, client_loss = parts.trainer.train_round(local.w, self.last_targets, round_index)
        case = np.asarray(plan.extra["case"])
        return StepResult(w=w_new, train_loss=client_loss, fields={
            "mu": plan.extra["mu"], "case2_classes": int(np.sum(case == 2)), "case1_classes": int(np.sum(case == 1)),
            "artificial_noise": float(np.sum(plan.extra["rcv_noise"])),
            "lambda_min": float(np.min(plan.extra["lambda"][case > 0])) if np.any(case > 0) else None,
            "aggregate_nmse": nmse,
            "aggregate_nmse_theory": float(np.sum(plan.extra["aggregate_noise_var"]) / np.sum(clean ** 2)),
            "target_nmse": target_nmse, "payload_dim": parts.dim, "transmitting": parts.K})

    def metrics(self, parts: RunParts, w, train_loss, evaluate: bool) -> dict:
        """Mean / min / max test accuracy over the devices, every round."""
        acc, loss = parts.trainer.evaluate(w)
        out = {"test_accuracy": float(np.mean(acc)), "test_accuracy_min": float(np.min(acc)),
               "test_accuracy_max": float(np.max(acc)), "test_loss": float(np.mean(loss)),
               "test_accuracy_devices": [float(a) for a in acc]}
        if train_loss is not None and np.all(np.isfinite(train_loss)):
            out["train_loss"] = float(np.asarray(parts.data.p) @ train_loss)
            out["local_train_loss"] = out["train_loss"]
        else:
            out["train_loss"] = out["local_train_loss"] = None
        return out

    def state_dict(self) -> dict:
        return {"targets": self.last_targets}

    def load_state_dict(self, state: dict) -> None:
        self.last_targets = state.get("targets")

    def summary_fields(self, parts: RunParts, rows: list) -> dict:
        last = rows[-1] if rows else {}
        uses = [r["channel_uses"] for r in rows if r.get("channel_uses")]
        policy = parts.policy
        return {
            "final_accuracy_min": last.get("test_accuracy_min"), "final_accuracy_max": last.get("test_accuracy_max"),
            "payload_dim": parts.dim, "channel_uses_per_round": float(np.mean(uses)) if uses else None,
            "channel_uses_total": int(np.sum(uses)) if uses else 0,
            "case2_rounds": sum(1 for r in rows if r.get("case2_classes")),
            "design_rounds": int(policy.T), "prop2_rounds": int(policy.suggested_rounds),
            "z_star": float(policy.z_star), "calibrate": policy.options.calibrate,
            "gamma": float(parts.algorithm.options.gamma), "jammer_rounds": 0,
        }


WORKLOADS = {"updates": UpdatesWorkload, "distillation": DistillationWorkload}


def workload_for(algorithm):
    """The workload the algorithm declares (``FLAlgorithm.workload``), checked against the config."""
    workload = WORKLOADS[getattr(algorithm, "workload", "updates")]()
    workload.check(algorithm.cfg, algorithm)
    return workload


def planned_nmse(plan, rec) -> dict:
    """An OFDM round's NMSE against the aggregate its plan carries (power/ofdm_plan.planned_aggregate: the
    truncated carriers and the per-subcarrier gains included), beside ``aggregate_nmse`` against the intended
    sum: the link's own error, with its theory (the booked per-subcarrier noise over the planned aggregate's
    energy). {} for a single-carrier round (there the two sums are one)."""
    if "ofdm" not in plan.extra:
        return {}
    from otafl_sdr.power.ofdm_plan import ofdm_nmse_theory, planned_aggregate
    planned = planned_aggregate(plan)
    return {"aggregate_nmse_planned": aggregate_nmse(rec.aggregate, planned) if rec.ok else None,
            "aggregate_nmse_planned_theory": ofdm_nmse_theory(plan, planned)}


def nmse_theory(plan, expected: np.ndarray) -> float:
    """The round's ``aggregate_nmse_theory`` against the intended sum: per subcarrier for an OFDM round
    (power/ofdm_plan.ofdm_nmse_theory: truncation's bias included), else transmission.aggregate_nmse_theory."""
    if "ofdm" in plan.extra:
        from otafl_sdr.power.ofdm_plan import ofdm_nmse_theory
        return ofdm_nmse_theory(plan, expected)
    return aggregate_nmse_theory(plan, expected)
