"""Models, registered in ``registry.MODELS`` (config key ``model.name``). Every model takes flattened
features (B, F) and returns logits (B, C); the parameter vector is ``parameters_to_vector(model)``.

Initialisation reproduces PyTorch's defaults (kaiming-uniform weights, uniform(+-1/sqrt(fan_in)) biases)
but draws from ``seeding.torch_generator(cfg.run.seed, "model-init")``, so every node builds the same w^0."""
from __future__ import annotations

import math

import torch
from torch import nn

from otafl_sdr import seeding
from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import MODELS


class Reshape(nn.Module):
    def __init__(self, shape: tuple):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)


@MODELS.register("mlp", "paper 000: one hidden layer of model.hidden (196) ReLU units")
def mlp(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    """F -> hidden -> C: d = F h + h + h C + C (784/196/10: 155,862 parameters)."""
    f = math.prod(input_shape)
    return nn.Sequential(nn.Linear(f, cfg.model.hidden), nn.ReLU(), nn.Linear(cfg.model.hidden, num_classes))


@MODELS.register("logreg", "softmax (multinomial logistic) regression, e.g. for synthetic data")
def logreg(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    return nn.Sequential(nn.Linear(math.prod(input_shape), num_classes))


@MODELS.register("cnn", "LeNet-5 style: 2 x (conv, ReLU, max-pool), FC 120, FC 84 (28x28 or 8x8 images)")
def cnn(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    """28x28: conv5 pad 2 (6) -> pool -> conv5 (16) -> pool -> 16x5x5. Small images (< 16 px, e.g. 8x8
    digits): conv3 pad 1 twice, so 8x8 -> 16x2x2."""
    if len(input_shape) != 3:
        raise ConfigError("model.name", f"'cnn' needs image data (C, H, W), got input shape {input_shape}")
    c, h, w = input_shape
    if min(h, w) >= 16:
        k1, p1, k2, p2 = 5, 2, 5, 0
    elif min(h, w) >= 4:
        k1, p1, k2, p2 = 3, 1, 3, 1
    else:
        raise ConfigError("model.name", f"'cnn' needs images of at least 4x4, got {h}x{w}")
    convs = nn.Sequential(nn.Conv2d(c, 6, k1, padding=p1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 16, k2, padding=p2), nn.ReLU(), nn.MaxPool2d(2))
    with torch.no_grad():
        flat = convs(torch.zeros(1, c, h, w)).numel()
    return nn.Sequential(Reshape(input_shape), convs, nn.Flatten(),
                         nn.Linear(flat, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, num_classes))


def init_parameters(model: nn.Module, gen: torch.Generator) -> None:
    """PyTorch's default Linear/Conv initialisation, drawn from ``gen``."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=gen)
                if m.bias is not None:
                    fan_in = m.weight[0].numel()
                    b = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                    m.bias.uniform_(-b, b, generator=gen)


def build_model(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    model = MODELS.get(cfg.model.name)(cfg, tuple(input_shape), int(num_classes))
    init_parameters(model, seeding.torch_generator(cfg.run.seed, "model-init"))
    return model


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
