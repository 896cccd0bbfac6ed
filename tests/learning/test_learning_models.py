"""Models: parameter counts (paper 000's MLP), shapes, seeded initialisation."""
import pytest
import torch

from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.learning.models import build_model, num_parameters
from otafl_sdr.registry import MODELS
from torch.nn.utils import parameters_to_vector


def cfg_of(*overrides):
    return load_config(None, list(overrides), validate_now=False)


def test_registered():
    assert {"mlp", "cnn", "logreg"} <= set(MODELS.names())


def test_paper000_mlp_dimension():
    m = build_model(cfg_of("model.name=mlp", "model.hidden=196"), (1, 28, 28), 10)
    # d = 784*196 + 196 + 196*10 + 10 (one hidden layer of 14x14 = 196 units, paper 000 sec. V)
    assert num_parameters(m) == 784 * 196 + 196 + 196 * 10 + 10 == 155_830
    assert m(torch.zeros(3, 784)).shape == (3, 10)


def test_logreg_and_cnn_shapes():
    lr = build_model(cfg_of("model.name=logreg"), (60,), 10)
    assert num_parameters(lr) == 61 * 10 and lr(torch.zeros(2, 60)).shape == (2, 10)
    for shape in [(1, 28, 28), (1, 8, 8)]:
        cnn = build_model(cfg_of("model.name=cnn"), shape, 7)
        assert cnn(torch.rand(4, shape[1] * shape[2])).shape == (4, 7)
    assert num_parameters(build_model(cfg_of("model.name=cnn"), (1, 28, 28), 10)) == 61_706   # LeNet-5
    with pytest.raises(ConfigError, match="model.name"):
        build_model(cfg_of("model.name=cnn"), (60,), 10)


def test_seeded_init():
    a = parameters_to_vector(build_model(cfg_of("run.seed=3"), (1, 8, 8), 10).parameters())
    b = parameters_to_vector(build_model(cfg_of("run.seed=3"), (1, 8, 8), 10).parameters())
    c = parameters_to_vector(build_model(cfg_of("run.seed=4"), (1, 8, 8), 10).parameters())
    assert torch.equal(a, b) and not torch.equal(a, c)
    # PyTorch default ranges: |W1| <= 1/sqrt(64) (kaiming-uniform a=sqrt(5)), |b1| <= 1/sqrt(64)
    assert a[: 64 * 196].abs().max() <= 1 / 8 + 1e-6 and a[: 64 * 196].abs().max() > 0.1
