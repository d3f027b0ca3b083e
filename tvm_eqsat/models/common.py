"""What every model builder shares: the Model record, the torch import, seeding, and
trained-looking batch norms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Model:
    name: str
    mod: Any  # tvm.IRModule
    inputs: list[np.ndarray]
    source: Any = field(default=None, repr=False)  # the eager torch module, for reference outputs

    def reference(self) -> list[np.ndarray]:
        """PyTorch eager outputs on :attr:`inputs`, flattened in the order Relax returns them."""
        import torch

        with torch.no_grad():
            out = self.source(*[torch.from_numpy(x) for x in self.inputs])
        return [t.numpy() for t in flat_tensors(out)]


def flat_tensors(value) -> list:
    if hasattr(value, "to_tuple"):  # transformers ModelOutput: its non-None fields, in order
        value = value.to_tuple()
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    return [value]


def import_torch(module, example_args: tuple, keep_params_as_input: bool = False):
    """torch.export + Relax's from_exported_program (default decomposition)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(module.eval(), example_args)
    return from_exported_program(exported, keep_params_as_input=keep_params_as_input)


def seeded(seed: int):
    import torch

    torch.manual_seed(seed)
    return torch


def trained_bn(module):
    """Non-trivial BatchNorm running statistics, as in a trained network (else BN is ~identity)."""
    import torch

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return module


def conv_bn(nn, cin: int, cout: int, kernel, stride=1, padding=0, groups=1, eps=1e-5, relu=True):
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=eps),
    ]
    if relu:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)
