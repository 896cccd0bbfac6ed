"""The papers' image models, registered in ``registry.MODELS`` (config key ``model.name``): ``lenet5``,
``resnet18`` (the CIFAR variant), ``cnn2fc`` (paper 003's CNN) and ``cnn2fc_norm`` (paper 004's CNN).
Like every model here they take flattened features (B, F) and return logits (B, C).

Normalisation: where a paper's model has BatchNorm, GroupNorm (Wu & He 2018; gcd(C, 32) groups, 32 where the
width allows) stands in its place, with the same parameter count. BatchNorm does not fit this testbed:
(1) its running mean and variance are buffers, not parameters, so they would never be aggregated over
the air (each node would evaluate with its own); (2) it mixes the samples of a batch, so a per-sample
gradient clip (``train.sample_clip``, the sensitivity the ledger books for ``privacy.unit = "sample"``)
would not bound one sample's influence; (3) batched local training (``torch.func.vmap`` over clients)
cannot update buffers in place. GroupNorm normalises each sample on its own and is the usual choice for
FL and DP-SGD (Hsieh et al. 2020; Opacus)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import MODELS
from otafl_sdr.learning.models import Reshape


def group_norm(channels: int) -> nn.GroupNorm:
    """GroupNorm with gcd(channels, 32) groups (2 x channels parameters, as BatchNorm)."""
    return nn.GroupNorm(math.gcd(channels, 32), channels)


def _image(name: str, input_shape: tuple, min_px: int) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise ConfigError("model.name", f"'{name}' needs image data (C, H, W), got input shape {input_shape}; "
                                        "use mlp or logreg")
    c, h, w = input_shape
    if min(h, w) < min_px:
        raise ConfigError("model.name", f"'{name}' needs images of at least {min_px}x{min_px}, got {h}x{w}; "
                                        "use cnn, mlp or logreg")
    return c, h, w


def _flat(convs: nn.Module, c: int, h: int, w: int) -> int:
    with torch.no_grad():
        return convs(torch.zeros(1, c, h, w)).numel()


@MODELS.register("lenet5", "LeNet-5 (LeCun et al. 1998; paper 002's MNIST model): conv5 6, pool, conv5 16, pool, "
                           "FC 120, FC 84 (ReLU, max-pool); 28x28 is padded to 32x32 (61,706 parameters on MNIST)")
def lenet5(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    c, h, w = _image("lenet5", input_shape, 28)
    pad = 2 if min(h, w) < 32 else 0                          # 28x28 -> 32x32 as in the original
    convs = nn.Sequential(nn.Conv2d(c, 6, 5, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
    return nn.Sequential(Reshape(input_shape), convs, nn.Flatten(), nn.Linear(_flat(convs, c, h, w), 120),
                         nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes))


@MODELS.register("cnn2fc", "paper 003's CNN: conv5 10, pool, ReLU, conv5 20, pool, ReLU, FC 50, ReLU, FC "
                           "(21,840 parameters on MNIST; the paper states 21,680)")
def cnn2fc(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    """Two 5x5 convolutions with 2x2 max pooling and ReLU, two fully connected layers (paper 003 sec. V:
    the widths 10 / 20 / 50 are the classic PyTorch MNIST example's; the paper gives only D = 21,680, which
    no common 2-conv / 2-FC layout reproduces exactly)."""
    c, h, w = _image("cnn2fc", input_shape, 12)
    convs = nn.Sequential(nn.Conv2d(c, 10, 5), nn.MaxPool2d(2), nn.ReLU(),
                          nn.Conv2d(10, 20, 5), nn.MaxPool2d(2), nn.ReLU())
    return nn.Sequential(Reshape(input_shape), convs, nn.Flatten(), nn.Linear(_flat(convs, c, h, w), 50),
                         nn.ReLU(), nn.Linear(50, num_classes))


@MODELS.register("cnn2fc_norm", "paper 004's CNN: conv5 10, pool, ReLU, conv5 20, pool, GroupNorm (for the "
                                "paper's BatchNorm), ReLU, FC 50, ReLU, FC (21,880 parameters on MNIST)")
def cnn2fc_norm(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    """Paper 004 sec. VI: two 5x5 convolutions, each followed by 2x2 max pooling, then BatchNorm, FC(50),
    ReLU, softmax; widths as ``cnn2fc`` (the paper gives none) and GroupNorm for BatchNorm (module text)."""
    c, h, w = _image("cnn2fc_norm", input_shape, 12)
    convs = nn.Sequential(nn.Conv2d(c, 10, 5), nn.MaxPool2d(2), nn.ReLU(),
                          nn.Conv2d(10, 20, 5), nn.MaxPool2d(2), group_norm(20), nn.ReLU())
    return nn.Sequential(Reshape(input_shape), convs, nn.Flatten(), nn.Linear(_flat(convs, c, h, w), 50),
                         nn.ReLU(), nn.Linear(50, num_classes))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a skip (He et al. 2016, Fig. 2); a 1x1 projection where the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.norm1 = group_norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.norm2 = group_norm(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), group_norm(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet18(nn.Module):
    """ResNet-18 for 32x32 inputs: a 3x3 stride-1 stem and no max-pool (He et al. 2016 sec. 4.2's CIFAR stem),
    four stages of two BasicBlocks (64, 128, 256, 512 channels; strides 1, 2, 2, 2), global average pooling,
    FC 512 x C. 11,173,962 parameters for 10 classes: the count paper 003 states."""

    def __init__(self, input_shape: tuple, num_classes: int):
        super().__init__()
        c = input_shape[0]
        self.reshape = Reshape(input_shape)
        self.stem = nn.Sequential(nn.Conv2d(c, 64, 3, stride=1, padding=1, bias=False), group_norm(64), nn.ReLU())
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.blocks(self.stem(self.reshape(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


@MODELS.register("resnet18", "ResNet-18, CIFAR variant (3x3 stem, no max-pool; papers 002 and 003 on CIFAR-10), "
                             "GroupNorm for BatchNorm; 11,173,962 parameters for 10 classes")
def resnet18(cfg, input_shape: tuple, num_classes: int) -> nn.Module:
    _image("resnet18", input_shape, 8)
    return CifarResNet18(tuple(input_shape), num_classes)
