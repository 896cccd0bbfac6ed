"""FL server rules (paper 000, sec. II-A): FedAvg, FedProx and Upcycled-FL, chosen by ``algorithm.name``.

An algorithm says which iterations use client data and how the server forms the next global model
from the received aggregate (after Flower's strategies: the rule is a small class, apart from transport).
``aggregate`` below is tau * g_hat, the server's estimate of sum_i p_i (w_i - w_bar) (eq. 7 / 16)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from otafl_sdr.config.options import build_options
from otafl_sdr.registry import ALGORITHMS


@dataclass
class NoOptions:
    pass


class FLAlgorithm:
    """Base class. ``iterations(M)``: total iterations for M privacy rounds; ``uses_clients(it)``;
    ``local_mu``: proximal weight of the local objective; ``local_train`` the clients' L-update;
    ``finish_plan`` what the algorithm adds to a planned round (client noise and the round's mechanism,
    paper 002); ``server_step`` for client iterations, ``server_only_step`` for iterations that use no
    client data (no privacy cost). ``privacy_knob()``: the algorithm's own privacy knob (privacy/knobs.py,
    solved for the target before round 1), None if the power policy carries the privacy;
    ``testbed_ready``: the zmq/uhd client nodes run this algorithm's local step as it is."""

    name = "base"
    Options: type = NoOptions
    testbed_ready = True
    workload = "updates"     # what a round carries (workload/workloads.py): FL updates, or "distillation" (paper 003)
    small_run: ClassVar[tuple[str, ...]] = ()
    """Config overrides (``key=value``, beyond selecting it) that a small run of it needs, e.g. options
    without a usable default: the contract tests every registered mechanism must pass
    (tests/privacy/test_mechanism_contracts.py) run it with these."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.options = build_options(self.Options, cfg.algorithm.options, "algorithm.options", f"algorithm '{self.name}'")

    def privacy_knob(self):
        """The algorithm's own privacy knob (privacy/knobs.ClientNoiseKnob for paper 002), or None."""
        return None

    @classmethod
    def validate_options(cls, options: dict) -> None:
        build_options(cls.Options, options, "algorithm.options", f"algorithm '{cls.name}'")

    @classmethod
    def validate_config(cls, cfg) -> None:
        """Everything the algorithm needs of the whole config (its options, and keys of other sections it
        constrains), checked when the config is loaded: a `sweep --dry-run` / `compare --plan` cell, a `run
        --dry-run` and a run all refuse it there, before anything is built. ConfigError on the first problem."""
        cls.validate_options(cfg.algorithm.options)

    @property
    def local_mu(self) -> float:
        return 0.0

    def iterations(self, rounds: int) -> int:
        return rounds

    def uses_clients(self, round_index: int) -> bool:
        return True

    def client_round(self, round_index: int) -> int:
        """The privacy round (1-based) an iteration belongs to."""
        return round_index

    def local_train(self, trainer, w: torch.Tensor, round_index: int):
        """The clients' local update of iteration ``round_index`` from the global model w (a TrainResult)."""
        return trainer.train_round(w, round_index, mu=self.local_mu)

    def finish_plan(self, plan, tr, round_index: int) -> None:
        """Complete the power policy's plan (default: nothing to add)."""

    def server_step(self, w: torch.Tensor, aggregate: torch.Tensor, round_index: int) -> torch.Tensor:
        return w + aggregate                                      # eq. (7)

    def server_only_step(self, w: torch.Tensor, w_prev: torch.Tensor, round_index: int) -> torch.Tensor:
        raise NotImplementedError


@ALGORITHMS.register("fedavg", "FedAvg: w <- w + sum_i p_i (w_i - w), eq. (7) of paper 000")
class FedAvg(FLAlgorithm):
    name = "fedavg"


@ALGORITHMS.register("fedprox", "FedProx: FedAvg with the proximal local objective (mu/2)||w - w_bar||^2")
class FedProx(FLAlgorithm):
    name = "fedprox"

    @property
    def local_mu(self) -> float:
        return self.cfg.algorithm.mu


@ALGORITHMS.register("upcycled_fl", "Upcycled-FL: odd iterations use clients, even ones are a server-only first-order step (eqs. 6, 8, 9)")
class UpcycledFL(FLAlgorithm):
    """Iterations 1..2M. Odd 2m-1: clients train from w^{2m-2} with the proximal objective and
    w^{2m-1} = w^{2m-2} + sum_i p_i (w_i - w^{2m-2}) (eq. 8). Even 2m: w^{2m} = w^{2m-1} +
    mu/(mu + lambda_m) (w^{2m-1} - w^{2m-2}) (eq. 9): no client data, post-processing (Lemma 1)."""

    name = "upcycled_fl"

    @property
    def local_mu(self) -> float:
        return self.cfg.algorithm.mu

    def iterations(self, rounds: int) -> int:
        return 2 * rounds

    def uses_clients(self, round_index: int) -> bool:
        return round_index % 2 == 1

    def client_round(self, round_index: int) -> int:
        return (round_index + 1) // 2

    def lambda_m(self, m: int) -> float:
        sched = sorted(self.cfg.algorithm.lambda_schedule, key=lambda x: x[0])
        for last, lam in sched:
            if m <= last:
                return float(lam)
        return float(sched[-1][1]) if sched else 0.0

    def server_only_step(self, w, w_prev, round_index):
        m = round_index // 2
        mu = self.cfg.algorithm.mu
        lam = self.lambda_m(m)
        if mu + lam == 0:
            return w.clone()
        return w + (mu / (mu + lam)) * (w - w_prev)               # eq. (9)
