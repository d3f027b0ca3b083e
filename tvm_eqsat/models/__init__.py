"""Models imported into Relax from PyTorch, random weights, no downloads.

Needs the ``models`` extra (torch, transformers).  Each builder returns a
:class:`Model`: the Relax module (weights bound as constants) and example inputs,
batch 1, float32.  The benchmark suite (:data:`SUITE`) is the TENSAT /
tensor-eqs-mcts model list; architectures that are not in transformers are written
here as plain torch modules after the published layouts (torchvision and timm are not
usable dependencies).  Every builder takes ``small=True`` for a reduced variant that
imports and compiles in seconds (tests, quick runs); :data:`SMALL` maps every name
in :data:`MODELS` to it.  BatchNorm running statistics are randomised so that
folding batch norms into convolutions is not a no-op.

An optional subpackage: the pass never imports it.  It holds the benchmark models and
the tests' models, split by where the architecture comes from (``transformers_models``,
``cnns``, ``taso_cells``); ``common`` holds what they share.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .cnns import inception_v3, resnet_block, resnext50, squeezenet, vgg19
from .common import Model, import_torch, seeded
from .taso_cells import nasnet_a, nasrnn
from .transformers_models import bert, bert_base, mobilenet_v2, resnet50, vit_b16

__all__ = [
    "MODELS",
    "SMALL",
    "SUITE",
    "Model",
    "bert",
    "bert_base",
    "import_torch",
    "inception_v3",
    "mobilenet_v2",
    "nasnet_a",
    "nasrnn",
    "resnet50",
    "resnet_block",
    "resnext50",
    "seeded",
    "squeezenet",
    "vgg19",
    "vit_b16",
]

MODELS: dict[str, Callable[..., Model]] = {
    "bert-small": bert,
    "bert-base": bert_base,
    "resnet-block": resnet_block,
    "resnet50": resnet50,
    "resnext50": resnext50,
    "inception-v3": inception_v3,
    "squeezenet": squeezenet,
    "vgg19": vgg19,
    "nasnet-a": nasnet_a,
    "nasrnn": nasrnn,
    "mobilenet-v2": mobilenet_v2,
    "vit-b16": vit_b16,
}
"""Name -> builder of the full-size model (``MODELS[name]()``)."""

_ALREADY_SMALL = ("bert-small", "resnet-block")

SMALL: dict[str, Callable[[], Model]] = {
    name: (build if name in _ALREADY_SMALL else partial(build, small=True)) for name, build in MODELS.items()
}
"""Name -> builder of the reduced variant (imports and compiles in seconds)."""

SUITE = (
    "bert-base",
    "resnet50",
    "mobilenet-v2",
    "resnext50",
    "inception-v3",
    "squeezenet",
    "vgg19",
    "nasnet-a",
    "nasrnn",
    "vit-b16",
)
"""The benchmark suite: the nine models of tensor-eqs-mcts (TENSAT's seven + ResNet-50, MobileNet-v2), plus ViT-B/16."""
