"""The generic contracts every registered privacy mechanism (power policy or FL algorithm) must keep, driven as a
black box (tests/privacy/test_mechanism_contracts.py): two runs on the sim air, identical seeds, whose data
differ in one crafted training sample of one client; the aggregate the server receives in round 1 (what
``policy.observe`` is handed: unpack(y) / alpha_u, the released quantity) may move by at most the
sensitivity the run booked for that round in privacy_ledger.jsonl.

The crafted sample makes the shift large (privacy.unit = "sample", one full-batch step of softmax
regression, per-sample clip C, no momentum): an input v of norm 1e4 in the null space of the initial weight
matrix W (so the logits are the biases and p = softmax(b) is near uniform, whatever v) with label 0 in one
run and 1 in the other. Both per-sample gradients (p - e_y) [v; 1]^T are clipped to C, and their difference
is C |(p - e_0)/|p - e_0| - (p - e_1)/|p - e_1||, about 1.49 C for p near uniform: 0.745 of the bound
2 lr C / (n tau) the ledger books (privacy/sensitivity.sample_replace_bound), so a mechanism that books half
its true sensitivity is caught (shift / booked about 1.49).

Every client is attacked in turn (K + 1 runs: a base where each client holds the crafted sample with label 0,
and one run per client with its label 1), so a client that sends noise or is silent in round 1 does not hide
the others. Each run stops once round 1's aggregate has been received (no plots: a few tenths of a second)."""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss
from scipy.optimize import brentq

from otafl_sdr.configure.load import load_config
from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.registry import ALGORITHMS, POWER_POLICIES
from otafl_sdr.results import files as results_files
from otafl_sdr.transmission import Mechanism


SMALL = ["data.dataset=digits", "data.clients=4", "model.name=logreg", "run.progress=false", "run.rounds=1",
         "run.torch_threads=1", "air.name=sim", "privacy.enforce=false", "privacy.targeting=paper",
         "privacy.unit=sample", "train.sample_clip=0.5", "train.batch_size=4096", "train.local_epochs=1",
         "train.momentum=0"]


POLICY_PAIR = ["algorithm.name=fedavg", "power.jammer=false"]         # a policy under test, with plain FedAvg
ALGORITHM_PAIR = ["power.policy=cj_adaptive", "power.jammer=false"]   # an algorithm under test, plain inversion


def registered_mechanisms() -> list:
    """pytest params (overrides, class) for every registered power policy and FL algorithm, with the
    ``small_run`` overrides its class declares (ids: policy-NAME, algorithm-NAME)."""
    load_plugins()
    out = []
    for name in POWER_POLICIES.names():
        cls = POWER_POLICIES.get(name)
        out.append(pytest.param(POLICY_PAIR + [f"power.policy={name}", *cls.small_run], cls, id=f"policy-{name}"))
    for name in ALGORITHMS.names():
        cls = ALGORITHMS.get(name)
        out.append(pytest.param(ALGORITHM_PAIR + [f"algorithm.name={name}", *cls.small_run], cls,
                                id=f"algorithm-{name}"))
    return out


def distillation(overrides: list[str]) -> bool:
    """True when the run's algorithm (the last ``algorithm.name=`` override) carries paper 003's workload."""
    names = [o.split("=", 1)[1] for o in overrides if o.startswith("algorithm.name=")]
    return ALGORITHMS.get(names[-1]).workload == "distillation"


class _Received(Exception):
    """Raised by the tap once the round's released aggregate arrived (ends the run there)."""


def _crafted_input(model: torch.nn.Module) -> np.ndarray:
    """(F,) v, |v| = 1e4, in the null space of the first layer's weights (logits = biases)."""
    W = next(m for m in model.modules() if isinstance(m, torch.nn.Linear)).weight.detach().numpy()
    return np.linalg.svd(W)[2][-1] * 1e4


def released_aggregate(out: Path, overrides: list[str], flipped: int | None,
                       craft: bool = True) -> tuple[np.ndarray, list[dict]]:
    """Round 1's received aggregate (d,) and the ledger the run booked, when every client's first sample is
    the crafted input with label 0, client ``flipped``'s with label 1 (None: nobody's); ``craft`` False:
    the data as loaded."""
    cfg = load_config(None, SMALL + overrides)
    exp = Experiment(cfg, out)
    build = exp.build

    def build_then_craft():
        build()
        if craft:
            v = _crafted_input(exp.trainer.model)
            for k in range(exp.K):
                x = exp.data.client_x[k]
                x[0] = torch.as_tensor(v.reshape(x[0].shape), dtype=x.dtype)
                exp.data.client_y[k][0] = int(k == flipped)
            exp.trainer.__init__(cfg, exp.data, exp.trainer.model)   # the trainer's padded copy of the data

        def tap(round_index, aggregate):
            raise _Received(None if aggregate is None else np.array(aggregate, dtype=np.float64, copy=True))
        exp.policy.observe = tap
    exp.build = build_then_craft
    try:
        exp.run()
    except _Received as got:
        aggregate = got.args[0]
        results_files.unlock_out_dir(exp.out)          # the run stopped inside its round: its lock goes too
    else:
        raise AssertionError("the run ended without releasing a round-1 aggregate")
    assert aggregate is not None, "round 1's aggregate was lost on the sim air"
    ledger = [json.loads(line) for line in (out / "privacy_ledger.jsonl").read_text().splitlines()]
    return aggregate, ledger


def worst_shift(tmp_path: Path, overrides: list[str]) -> tuple[float, float, list[dict]]:
    """(max over clients of |aggregate - aggregate'|, the sensitivity booked for round 1, the base run's ledger)."""
    base, ledger = released_aggregate(tmp_path / "base", overrides, None)
    booked = [e for e in ledger if e["round"] == 1 and e["uses_data"]]
    assert booked, "round 1 used client data but booked no data release"
    sensitivity = max(e["sensitivity"] for e in booked)
    worst = 0.0
    for k in range(int(load_config(None, SMALL + overrides).data.clients)):
        moved, ledger_k = released_aggregate(tmp_path / f"client{k}", overrides, k)
        assert [e["sensitivity"] for e in ledger_k] == [e["sensitivity"] for e in ledger], \
            "the booked sensitivity depends on the data"
        worst = max(worst, float(np.linalg.norm(moved - base)))
    return worst, sensitivity, ledger


# -- accountants (tests/privacy/test_accountant_contracts.py): what every registered accountant reports on plain
# Gaussian rounds is None (not covered) or no smaller than dp-accounting's exact PLD value, unless it declares
# itself a paper's closed form (``closed_form``: the summary flags it where it falls below)
DELTA = 1e-5
ROUNDS = [Mechanism(round=t, sensitivity=d, sigma_eff=s) for t, (d, s) in enumerate([(1.0, 2.0), (0.5, 1.5), (1.0, 3.0)], 1)]


@functools.cache
def exact(n: int) -> float:
    """dp-accounting's exact epsilon of the first ``n`` rounds: Gaussian rounds compose into one Gaussian of
    mu^2 = sum_t (Delta_t / sigma_t)^2 (Dong, Roth & Su 2019, Cor. 3.3), whose delta(eps) dp-accounting gives
    in closed form (GaussianPrivacyLoss, Balle & Wang 2018), solved for eps at DELTA."""
    mu = math.sqrt(sum((m.sensitivity / m.sigma_eff) ** 2 for m in ROUNDS[:n]))
    loss = GaussianPrivacyLoss(standard_deviation=1.0 / mu, sensitivity=1.0)
    return brentq(lambda eps: loss.get_delta_for_epsilon(eps) - DELTA, 0.0, 1e3, xtol=1e-12)


def reported(cls, rounds) -> float | None:
    acc = cls(DELTA)
    for m in rounds:
        acc.step(m)
    return acc.epsilon()


def check_accountant(cls) -> None:
    """The contract (module doc); AssertionError naming the accountant and the composition it under-reports."""
    for n in (len(ROUNDS),):
        eps = reported(cls, ROUNDS[:n])
        if eps is None or cls.closed_form:
            continue
        assert eps >= exact(n) * (1 - 1e-4), (f"accountant {cls.name!r} ({cls.__module__}) reports eps {eps:.5g} after "
                                              f"{n} Gaussian rounds; dp-accounting's exact value is {exact(n):.5g}")
