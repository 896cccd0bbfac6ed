"""Local training: clipping to tau, proximal term, vectorised == reference loop, reproducibility, learning."""
import numpy as np
import pytest
import torch

from otafl_sdr.configure.load import load_config
from otafl_sdr.learning import LocalTrainer, build_model, load_federated

torch.set_num_threads(1)


def cfg_of(*overrides):
    base = ["data.dataset=digits", "data.max_samples=500", "data.clients=5", "data.classes_per_client=3",
            "run.torch_threads=1", "train.local_epochs=2", "train.batch_size=16", "model.hidden=32"]
    return load_config(None, base + list(overrides), validate_now=False)


def trainer_of(*overrides, mode="auto"):
    cfg = cfg_of(*overrides)
    fd = load_federated(cfg)
    return LocalTrainer(cfg, fd, build_model(cfg, fd.input_shape, fd.num_classes), mode=mode)


def test_dim_and_flat_roundtrip():
    tr = trainer_of()
    assert tr.dim == 64 * 32 + 32 + 32 * 10 + 10
    w = tr.get_flat()
    assert w.shape == (tr.dim,) and w.dtype == torch.float32
    tr.evaluate(w * 3)
    tr.global_train_loss(w * 3)
    assert torch.equal(tr.get_flat(), w)                  # evaluation leaves the model alone
    tr.set_flat(w * 2)
    assert torch.allclose(tr.get_flat(), w * 2)
    with pytest.raises(ValueError):
        tr.train_round(w[:-1], 1)
    with pytest.raises(ValueError):
        tr.train_round(w, 1, clients=[5])


def test_clipping_to_tau_reports_raw_norms():
    free = trainer_of("train.tau=1e6")
    tight = trainer_of("train.tau=0.05")
    w = free.get_flat()
    r_free = free.train_round(w, 1)
    r = tight.train_round(w, 1)
    norms = torch.linalg.vector_norm(r.updates, dim=1).numpy()
    assert np.all(norms <= 0.05 * (1 + 1e-5))
    assert np.allclose(norms, 0.05, rtol=1e-5)                       # all raw norms exceed 0.05 here
    assert r.clipped.all() and not r_free.clipped.any()
    assert np.allclose(r.raw_norms, r_free.raw_norms, rtol=1e-6)       # raw = unclipped norm
    assert np.allclose(r_free.raw_norms, torch.linalg.vector_norm(r_free.updates, dim=1).numpy(), rtol=1e-6)
    # the clipped update points the same way as the raw one
    cos = torch.nn.functional.cosine_similarity(r.updates, r_free.updates, dim=1)
    assert torch.all(cos > 1 - 1e-5)


def test_proximal_term_pulls_towards_global():
    tr = trainer_of("train.tau=1e6", "train.local_epochs=4")
    w = tr.get_flat()
    n0 = tr.train_round(w, 1, mu=0.0).raw_norms
    n1 = tr.train_round(w, 1, mu=2.0).raw_norms
    n2 = tr.train_round(w, 1, mu=10.0).raw_norms
    assert np.all(n1 < n0) and np.all(n2 < n1)


CASES = [
    ("primal", ()),
    ("dual", ()),
    ("auto", ("data.unequal_sizes=1.2", "data.clients=6")),          # clients run out at different steps
    ("dual", ("data.unequal_sizes=1.2", "data.clients=6")),
    ("auto", ("model.name=logreg", "data.dataset=synthetic", "data.partition=natural",
              "data.synthetic_samples=300", "data.unequal_sizes=0.7")),
    ("auto", ("model.name=cnn", "data.max_samples=150", "data.clients=3", "data.classes_per_client=4",
              "train.local_epochs=1")),  # vmap path
]


@pytest.mark.parametrize("mode,over", CASES)
def test_vectorised_matches_reference(mode, over):
    tr = trainer_of("train.tau=0.5", *over, mode=mode)
    w = tr.get_flat()
    for kw in (dict(mu=0.3), dict(grad_clip=0.2), dict(mu=0.1, grad_clip=1.0, clients=[0, 2])):
        a = tr.train_round(w, 7, **kw)
        b = tr.train_round_reference(w, 7, **kw)
        assert torch.allclose(a.updates, b.updates, atol=1e-5, rtol=1e-4), kw
        assert np.allclose(a.raw_norms, b.raw_norms, atol=1e-5, rtol=1e-4)
        assert np.array_equal(a.clipped, b.clipped)
        assert a.train_loss == pytest.approx(b.train_loss, rel=1e-5)
        assert np.array_equal(a.clients, b.clients)
    # the subset call leaves other clients' rows empty
    assert torch.count_nonzero(a.updates[1]) == 0 and a.updates[0].abs().sum() > 0
    assert np.isnan(a.client_loss[1]) and a.raw_norms[1] == 0


def test_reproducible_and_round_dependent():
    w = trainer_of().get_flat()
    a = trainer_of().train_round(w, 3, mu=0.1)
    b = trainer_of().train_round(w, 3, mu=0.1)               # a fresh trainer, as after a resume
    c = trainer_of().train_round(w, 4, mu=0.1)
    assert torch.equal(a.updates, b.updates)
    assert not torch.allclose(a.updates, c.updates)
    # a client's batches do not depend on which other clients train
    d = trainer_of().train_round(w, 3, mu=0.1, clients=[1, 4])
    assert torch.allclose(d.updates[[1, 4]], a.updates[[1, 4]], atol=1e-6)


def test_train_loss_is_p_weighted():
    tr = trainer_of("data.unequal_sizes=1.0")
    r = tr.train_round(tr.get_flat(), 1)
    assert r.train_loss == pytest.approx(float(tr.p @ r.client_loss))
    r2 = tr.train_round(tr.get_flat(), 1, clients=[0, 3])
    pw = tr.p[[0, 3]] / tr.p[[0, 3]].sum()
    assert r2.train_loss == pytest.approx(float(pw @ r2.client_loss[[0, 3]]))


def test_plain_averaging_learns_digits():
    tr = trainer_of("data.max_samples=0", "data.clients=10", "data.classes_per_client=5", "train.tau=1e6",
                    "model.hidden=64", "train.batch_size=32", "train.local_epochs=5", "train.lr=0.1")
    w = tr.get_flat()
    loss0, (acc0, _) = tr.global_train_loss(w), tr.evaluate(w)
    losses = []
    for m in range(1, 6):
        r = tr.train_round(w, m)
        w = w + torch.as_tensor(tr.p, dtype=torch.float32) @ r.updates      # eq. (7) of paper 000
        losses.append(tr.global_train_loss(w))
    acc, test_loss = tr.evaluate(w)
    assert losses[-1] < 0.4 * loss0 and all(b < a for a, b in zip(losses, losses[1:]))
    assert acc > 0.8 > acc0
