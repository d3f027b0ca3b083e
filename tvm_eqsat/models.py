"""Models imported into Relax from PyTorch, random weights, no downloads.

Needs the ``models`` extra (torch, transformers).  Each builder returns a
:class:`Model`: the Relax module (weights bound as constants) and example inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class Model:
    name: str
    mod: Any  # tvm.IRModule
    inputs: list[np.ndarray]


def import_torch(module, example_args: tuple, keep_params_as_input: bool = False):
    """torch.export + Relax's from_exported_program (default decomposition)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(module.eval(), example_args)
    return from_exported_program(exported, keep_params_as_input=keep_params_as_input)


def _seeded(seed: int):
    import torch

    torch.manual_seed(seed)
    return torch


def bert(hidden: int = 64, layers: int = 2, heads: int = 2, seq: int = 16, seed: int = 0) -> Model:
    """transformers BertModel from a config; input ids and an explicit attention mask."""
    torch = _seeded(seed)
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        vocab_size=1000,
        max_position_embeddings=max(512, seq),
    )
    model = BertModel(config)
    ids = torch.randint(0, 1000, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mod = import_torch(model, (ids, mask))
    return Model(f"bert-h{hidden}-l{layers}-s{seq}", mod, [ids.numpy(), mask.numpy()])


def bert_base(seq: int = 128) -> Model:
    return bert(hidden=768, layers=12, heads=12, seq=seq)


def _bottleneck(torch, cin: int, mid: int, stride: int):
    nn = torch.nn

    class Bottleneck(nn.Module):
        """The ResNet-50 bottleneck block: 1x1, 3x3 (strided), 1x1, projection shortcut."""

        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(mid)
            self.conv2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(mid)
            self.conv3 = nn.Conv2d(mid, 4 * mid, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(4 * mid)
            self.short = nn.Sequential(
                nn.Conv2d(cin, 4 * mid, 1, stride=stride, bias=False), nn.BatchNorm2d(4 * mid)
            )

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return torch.relu(y + self.short(x))

    block = Bottleneck()
    for m in block.modules():  # non-trivial running statistics, as in a trained network
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return block


def resnet_block(channels: int = 64, mid: int = 32, size: int = 28, stride: int = 2, seed: int = 0) -> Model:
    torch = _seeded(seed)
    block = _bottleneck(torch, channels, mid, stride)
    x = torch.randn(1, channels, size, size)
    mod = import_torch(block, (x,))
    return Model(f"resnet-block-c{channels}-s{size}", mod, [x.numpy()])


def resnet50(size: int = 224, seed: int = 0) -> Model:
    """transformers ResNetModel with the ResNet-50 configuration."""
    torch = _seeded(seed)
    from transformers import ResNetConfig, ResNetModel

    model = ResNetModel(ResNetConfig())
    x = torch.randn(1, 3, size, size)
    return Model(f"resnet50-{size}", import_torch(model, (x,)), [x.numpy()])


MODELS: dict[str, Callable[[], Model]] = {
    "bert-small": bert,
    "bert-base": bert_base,
    "resnet-block": resnet_block,
    "resnet50": resnet50,
}
