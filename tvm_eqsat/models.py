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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

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
        return [t.numpy() for t in _flat_tensors(out)]


def _flat_tensors(value) -> list:
    if hasattr(value, "to_tuple"):  # transformers ModelOutput: its non-None fields, in order
        value = value.to_tuple()
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat_tensors(v)]
    return [value]


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
    return Model(f"bert-h{hidden}-l{layers}-s{seq}", mod, [ids.numpy(), mask.numpy()], model)


def bert_base(seq: int = 128, small: bool = False) -> Model:
    """BERT-base (12 layers, hidden 768); ``small``: the 2-layer, hidden-64 :func:`bert`."""
    if small:
        return bert()
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

    return _trained_bn(Bottleneck())


def _trained_bn(module):
    """Non-trivial BatchNorm running statistics, as in a trained network (else BN is ~identity)."""
    import torch

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return module


def resnet_block(channels: int = 64, mid: int = 32, size: int = 28, stride: int = 2, seed: int = 0) -> Model:
    torch = _seeded(seed)
    block = _bottleneck(torch, channels, mid, stride)
    x = torch.randn(1, channels, size, size)
    mod = import_torch(block, (x,))
    return Model(f"resnet-block-c{channels}-s{size}", mod, [x.numpy()], block)


def resnet50(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """transformers ResNetModel with the ResNet-50 configuration (224 px).

    ``small``: one bottleneck per stage at half the widths, 64 px.
    """
    torch = _seeded(seed)
    from transformers import ResNetConfig, ResNetModel

    if small:
        config = ResNetConfig(embedding_size=32, hidden_sizes=[128, 256, 512, 1024], depths=[1, 1, 1, 1])
    else:
        config = ResNetConfig()
    size = size or (64 if small else 224)
    model = _trained_bn(ResNetModel(config))
    x = torch.randn(1, 3, size, size)
    name = f"resnet50{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


# ------------------------------------------------------------------ transformers models


def mobilenet_v2(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """transformers MobileNetV2Model, width 1.0, 224 px; ``small``: width 0.35, 64 px.

    ``tf_padding=False`` gives the published (torchvision) symmetric padding instead of
    TensorFlow's asymmetric SAME padding, which would add an explicit pad before every
    strided depthwise conv.
    """
    torch = _seeded(seed)
    from transformers import MobileNetV2Config, MobileNetV2Model

    size = size or (64 if small else 224)
    config = MobileNetV2Config(depth_multiplier=0.35 if small else 1.0, image_size=size, tf_padding=False)
    model = _trained_bn(MobileNetV2Model(config))
    x = torch.randn(1, 3, size, size)
    name = f"mobilenet-v2{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def vit_b16(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """transformers ViTModel, ViT-B/16 (12 layers, hidden 768, 224 px, patch 16).

    ``small``: 2 layers, hidden 64, 2 heads, 32 px with patch 8 (16 tokens).
    Eager attention: plain matmul/softmax in Relax; the SDPA default imports with an extra
    mask-and-NaN guard (equal, logical_not, max, where) around every softmax.
    """
    torch = _seeded(seed)
    from transformers import ViTConfig, ViTModel

    if small:
        size = size or 32
        config = ViTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
            image_size=size, patch_size=8, attn_implementation="eager",
        )
    else:
        size = size or 224
        config = ViTConfig(image_size=size, attn_implementation="eager")
    model = ViTModel(config)
    x = torch.randn(1, 3, size, size)
    name = f"vit-b16{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


# ------------------------------------------------------------------ torch-defined CNNs


def _conv_bn(nn, cin: int, cout: int, kernel, stride=1, padding=0, groups=1, eps=1e-5, relu=True):
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=eps),
    ]
    if relu:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def resnext50(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """ResNeXt-50 (32x4d), torchvision layout: stages [3, 4, 6, 3], 3x3 convs in 32 groups.

    Bottleneck: 1x1 to width = planes/64 * 4 * 32, grouped 3x3 (stride on it), 1x1 to
    4 * planes, projection shortcut on each stage's first block; BN after every conv;
    average pool and a 1000-way linear head.  224 px.
    ``small``: one block per stage, half the planes (groups still 32), 32 px, 10 classes.
    """
    torch = _seeded(seed)
    nn = torch.nn
    groups, width_per_group = 32, 4
    layers, base, classes = ((1, 1, 1, 1), 32, 10) if small else ((3, 4, 6, 3), 64, 1000)
    size = size or (32 if small else 224)

    class Block(nn.Module):
        def __init__(self, cin: int, planes: int, stride: int) -> None:
            super().__init__()
            width = planes * width_per_group // 64 * groups
            self.body = nn.Sequential(
                _conv_bn(nn, cin, width, 1),
                _conv_bn(nn, width, width, 3, stride, 1, groups=groups),
                _conv_bn(nn, width, 4 * planes, 1, relu=False),
            )
            self.short = None
            if stride != 1 or cin != 4 * planes:
                self.short = _conv_bn(nn, cin, 4 * planes, 1, stride, relu=False)

        def forward(self, x):
            s = x if self.short is None else self.short(x)
            return torch.relu(self.body(x) + s)

    class ResNeXt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            blocks: list = [_conv_bn(nn, 3, base, 7, 2, 3), nn.MaxPool2d(3, 2, 1)]
            cin = base
            for i, n in enumerate(layers):
                planes = base * 2**i
                for j in range(n):
                    blocks.append(Block(cin, planes, 2 if i > 0 and j == 0 else 1))
                    cin = 4 * planes
            self.features = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    model = _trained_bn(ResNeXt())
    x = torch.randn(1, 3, size, size)
    name = f"resnext50{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def inception_v3(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """Inception-v3, torchvision layout, 299 px, no auxiliary head (inference).

    Stem (five conv+BN+ReLU, two max pools), 3x Inception-A (5b-5d), B (6a),
    4x C with 1x7/7x1 factorised convs (6b-6e), D (7a), 2x E with split 1x3/3x1
    branches (7b, 7c), average pool, 1000-way linear.  BN eps 1e-3 as in the paper's code.
    ``small``: 1/8 of the channels, one A, B, C, D and E block, 75 px (the smallest
    input the stride pattern allows), 10 classes.
    """
    torch = _seeded(seed)
    nn = torch.nn
    F = torch.nn.functional
    scale = 0.125 if small else 1.0
    size = size or (75 if small else 299)

    def c(n: int) -> int:
        return max(1, int(n * scale))

    def conv(cin, cout, kernel, stride=1, padding=0):
        return _conv_bn(nn, cin, cout, kernel, stride, padding, eps=1e-3)

    class Concat(nn.Module):
        """Runs its branches on one input and concatenates them along channels."""

        def __init__(self, *branches) -> None:
            super().__init__()
            self.branches = nn.ModuleList(branches)

        def forward(self, x):
            return torch.cat([b(x) for b in self.branches], 1)

    class Split(nn.Module):
        """Inception-E's 1x3 and 3x1 convs on the same tensor, concatenated."""

        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.a = conv(cin, cout, (1, 3), padding=(0, 1))
            self.b = conv(cin, cout, (3, 1), padding=(1, 0))

        def forward(self, x):
            return torch.cat([self.a(x), self.b(x)], 1)

    def avg_then(cin, cout):
        return nn.Sequential(nn.AvgPool2d(3, 1, 1), conv(cin, cout, 1))

    def block_a(cin, pool):
        out = c(64) + c(64) + c(96) + c(pool)
        return Concat(
            conv(cin, c(64), 1),
            nn.Sequential(conv(cin, c(48), 1), conv(c(48), c(64), 5, padding=2)),
            nn.Sequential(
                conv(cin, c(64), 1), conv(c(64), c(96), 3, padding=1), conv(c(96), c(96), 3, padding=1)
            ),
            avg_then(cin, c(pool)),
        ), out

    def block_b(cin):
        return Concat(
            conv(cin, c(384), 3, 2),
            nn.Sequential(conv(cin, c(64), 1), conv(c(64), c(96), 3, padding=1), conv(c(96), c(96), 3, 2)),
            nn.MaxPool2d(3, 2),
        ), c(384) + c(96) + cin

    def block_c(cin, c7):
        c7 = c(c7)
        seven = lambda a, b, k: conv(a, b, k, padding=(3, 0) if k == (7, 1) else (0, 3))  # noqa: E731
        return Concat(
            conv(cin, c(192), 1),
            nn.Sequential(conv(cin, c7, 1), seven(c7, c7, (1, 7)), seven(c7, c(192), (7, 1))),
            nn.Sequential(
                conv(cin, c7, 1), seven(c7, c7, (7, 1)), seven(c7, c7, (1, 7)),
                seven(c7, c7, (7, 1)), seven(c7, c(192), (1, 7)),
            ),
            avg_then(cin, c(192)),
        ), 4 * c(192)

    def block_d(cin):
        return Concat(
            nn.Sequential(conv(cin, c(192), 1), conv(c(192), c(320), 3, 2)),
            nn.Sequential(
                conv(cin, c(192), 1), conv(c(192), c(192), (1, 7), padding=(0, 3)),
                conv(c(192), c(192), (7, 1), padding=(3, 0)), conv(c(192), c(192), 3, 2),
            ),
            nn.MaxPool2d(3, 2),
        ), c(320) + c(192) + cin

    def block_e(cin):
        return Concat(
            conv(cin, c(320), 1),
            nn.Sequential(conv(cin, c(384), 1), Split(c(384), c(384))),
            nn.Sequential(conv(cin, c(448), 1), conv(c(448), c(384), 3, padding=1), Split(c(384), c(384))),
            avg_then(cin, c(192)),
        ), c(320) + 4 * c(384) + c(192)

    class InceptionV3(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers = [
                conv(3, c(32), 3, 2), conv(c(32), c(32), 3), conv(c(32), c(64), 3, padding=1),
                nn.MaxPool2d(3, 2), conv(c(64), c(80), 1), conv(c(80), c(192), 3), nn.MaxPool2d(3, 2),
            ]
            cin = c(192)
            A, B, C, D, E = block_a, block_b, block_c, block_d, block_e
            # (block, A's pool features or C's 7x7 channels), mixed 5b .. 7c
            plan = [(A, 32), (B,), (C, 128), (D,), (E,)] if small else [
                (A, 32), (A, 64), (A, 64), (B,), (C, 128), (C, 160), (C, 160), (C, 192), (D,), (E,), (E,)
            ]
            for build, *args in plan:
                block, cin = build(cin, *args)
                layers.append(block)
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, 10 if small else 1000)

        def forward(self, x):
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))

    model = _trained_bn(InceptionV3())
    x = torch.randn(1, 3, size, size)
    name = f"inception-v3{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def squeezenet(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """SqueezeNet 1.1: 3x3/2 stem conv, eight fire modules between ceil-mode max pools,
    1x1 conv classifier (1000 classes) + ReLU + global average pool; no BN.  224 px.

    Fire module: squeeze 1x1 + ReLU, then expand 1x1 and expand 3x3 (+ ReLU each),
    concatenated along channels.  ``small``: 1/4 of the channels, 32 px, 10 classes.
    """
    torch = _seeded(seed)
    nn = torch.nn
    k = 4 if small else 1
    size = size or (32 if small else 224)
    classes = 10 if small else 1000

    class Fire(nn.Module):
        def __init__(self, cin: int, squeeze: int, expand: int) -> None:
            super().__init__()
            self.squeeze = nn.Conv2d(cin, squeeze // k, 1)
            self.e1 = nn.Conv2d(squeeze // k, expand // k, 1)
            self.e3 = nn.Conv2d(squeeze // k, expand // k, 3, padding=1)

        def forward(self, x):
            s = torch.relu(self.squeeze(x))
            return torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], 1)

    pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
    model = nn.Sequential(
        nn.Conv2d(3, 64 // k, 3, 2), nn.ReLU(), pool(),
        Fire(64 // k, 16, 64), Fire(128 // k, 16, 64), pool(),
        Fire(128 // k, 32, 128), Fire(256 // k, 32, 128), pool(),
        Fire(256 // k, 48, 192), Fire(384 // k, 48, 192), Fire(384 // k, 64, 256), Fire(512 // k, 64, 256),
        nn.Conv2d(512 // k, classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )
    x = torch.randn(1, 3, size, size)
    name = f"squeezenet{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def vgg19(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """VGG-19 (configuration E): 16 3x3 convs + ReLU in five stages separated by 2x2
    max pools, then 4096-4096-1000 linear layers with ReLU; no BN.  224 px.

    ``small``: the same 16 convs at 1/16 of the channels, 32 px, a 1x1 (not 7x7)
    pooled map and 64-64-10 linear layers.
    """
    torch = _seeded(seed)
    nn = torch.nn
    k = 16 if small else 1
    size = size or (32 if small else 224)
    pooled, hidden, classes = (1, 64, 10) if small else (7, 4096, 1000)
    layers: list = []
    cin = 3
    for width, n in ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4)):
        for _ in range(n):
            layers += [nn.Conv2d(cin, width // k, 3, padding=1), nn.ReLU()]
            cin = width // k
        layers.append(nn.MaxPool2d(2, 2))
    model = nn.Sequential(
        *layers, nn.AdaptiveAvgPool2d(pooled), nn.Flatten(),
        nn.Linear(cin * pooled * pooled, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    )
    x = torch.randn(1, 3, size, size)
    name = f"vgg19{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


# ------------------------------------------------------------------ TASO's searched cells


def nasnet_a(
    size: int | None = None, channels: int | None = None, cells: int | None = None, stages: int | None = None,
    seed: int = 0, small: bool = False,
) -> Model:
    """NASNet-A cells in the configuration of TASO's benchmark (examples/nasnet_a.py).

    Input is a 1 x ``channels`` x ``size`` x ``size`` feature map (no image stem, no
    classifier, no BN, as in TASO): ``stages`` times ``cells`` normal cells, then a
    reduction cell that halves the map and doubles the filters.  Full size:
    128 channels, 56 px, 3 stages of 5 normal cells (filters 128-256-512, reductions
    to 256-512-1024; the output is 5 * 1024 channels at 7x7).
    ``small``: 16 channels, 16 px, 2 stages of 1 normal cell.

    Each cell first squeezes its current and its previous input to the cell's filters
    (1x1 conv + ReLU; TASO's 3x3/2 "fit" for a larger previous map never occurs here);
    a separable conv is a depthwise KxK conv followed by a 1x1 conv; pools pad to SAME
    (average pools do not count the padding); the five pairwise sums are concatenated.
    """
    torch = _seeded(seed)
    nn = torch.nn
    F = torch.nn.functional
    size = size or (16 if small else 56)
    channels = channels or (16 if small else 128)
    cells = cells or (1 if small else 5)
    stages = stages or (2 if small else 3)

    def sep(ch: int, kernel: int, stride: int = 1):
        return nn.Sequential(
            nn.Conv2d(ch, ch, kernel, stride, kernel // 2, groups=ch, bias=False),
            nn.Conv2d(ch, ch, 1, bias=False),
        )

    def avg(x, stride=1):
        return F.avg_pool2d(x, 3, stride, 1, count_include_pad=False)

    def maxp(x, stride):
        return F.max_pool2d(x, 3, stride, 1)

    class Cell(nn.Module):
        def __init__(self, prev_ch: int, cur_ch: int, ch: int) -> None:
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(cur_ch, ch, 1, bias=False), nn.ReLU())
            self.fit = nn.Sequential(nn.Conv2d(prev_ch, ch, 1, bias=False), nn.ReLU())

    class Normal(Cell):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            ch = args[-1]
            self.s = nn.ModuleList([sep(ch, 3) for _ in range(5)])

        def forward(self, prev, cur):
            cur = self.squeeze(cur)
            prev = self.fit(prev)
            s = self.s
            return torch.cat([
                s[0](cur) + cur,
                s[1](prev) + s[2](cur),
                avg(cur) + prev,
                avg(prev) + avg(prev),
                s[3](prev) + s[4](prev),
            ], 1)

    class Reduction(Cell):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            ch = args[-1]
            self.p7a, self.c5, self.p7b = sep(ch, 7, 2), sep(ch, 5, 2), sep(ch, 7, 2)
            self.p5, self.o3 = sep(ch, 5, 2), sep(ch, 3)

        def forward(self, prev, cur):
            cur = self.squeeze(cur)
            prev = self.fit(prev)
            o0 = self.p7a(prev) + self.c5(cur)
            o1 = maxp(cur, 2) + self.p7b(prev)
            o2 = avg(cur, 2) + self.p5(prev)
            o3 = maxp(cur, 2) + self.o3(o0)
            o4 = avg(o0) + o1
            return torch.cat([o0, o1, o2, o3, o4], 1)

    class NASNetA(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cells = nn.ModuleList()
            ch, prev_ch, cur_ch = channels, channels, channels
            for _ in range(stages):
                for _ in range(cells):
                    self.cells.append(Normal(prev_ch, cur_ch, ch))
                    prev_ch, cur_ch = cur_ch, 5 * ch
                ch *= 2
                self.cells.append(Reduction(prev_ch, cur_ch, ch))
                # as in TASO, the next stage starts from the reduction output alone
                prev_ch = cur_ch = 5 * ch

        def forward(self, x):
            prev = cur = x
            for cell in self.cells:
                out = cell(prev, cur)
                prev, cur = (out, out) if isinstance(cell, Reduction) else (cur, out)
            return cur

    model = NASNetA()
    x = torch.randn(1, channels, size, size)
    name = f"nasnet-a{'-small' if small else ''}-c{channels}-s{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def nasrnn(hidden: int | None = None, steps: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """The NAS recurrent cell of TASO's benchmark (examples/nasrnn.py): hidden 512, 5 steps.

    Inputs are ``steps`` separate 1 x hidden tensors; the initial state is a learned
    1 x hidden tensor.  Per step, eight projections ``x @ A_i + h @ B_i`` (the 8 matmuls
    on x and the 8 on h share their input: the merge opportunity), then the searched
    tree of relu/sigmoid/tanh, adds and multiplies.  Unlike TASO's graph, which draws
    fresh weights at every step, the weights are shared across steps, as in an RNN.
    ``small``: hidden 64, 2 steps.
    """
    torch = _seeded(seed)
    nn = torch.nn
    hidden = hidden or (64 if small else 512)
    steps = steps or (2 if small else 5)

    class NASRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            scale = hidden**-0.5
            self.wx = nn.ParameterList([nn.Parameter(torch.randn(hidden, hidden) * scale) for _ in range(8)])
            self.wh = nn.ParameterList([nn.Parameter(torch.randn(hidden, hidden) * scale) for _ in range(8)])
            self.h0 = nn.Parameter(torch.randn(1, hidden))

        def cell(self, x, h):
            t = [x @ a + h @ b for a, b in zip(self.wx, self.wh)]
            sig, tanh, relu = torch.sigmoid, torch.tanh, torch.relu
            m0 = relu(t[0]) + sig(t[3])
            m1 = sig(t[1]) + tanh(t[2])
            m2 = sig(t[4]) * tanh(t[5])
            m3 = sig(t[6]) * relu(t[7])
            m4 = sig(m1) + tanh(m2)
            m5 = tanh(m0) * tanh(m3)
            return tanh(tanh(m4) * tanh(m5))

        def forward(self, *xs):
            h = self.h0
            for x in xs:
                h = self.cell(x, h)
            return h

    model = NASRNN()
    xs = tuple(torch.randn(1, hidden) for _ in range(steps))
    name = f"nasrnn{'-small' if small else ''}-h{hidden}-t{steps}"
    return Model(name, import_torch(model, xs), [x.numpy() for x in xs], model)


# ------------------------------------------------------------------ registry


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
    "bert-base", "resnet50", "mobilenet-v2", "resnext50", "inception-v3",
    "squeezenet", "vgg19", "nasnet-a", "nasrnn", "vit-b16",
)
"""The benchmark suite: the nine models of tensor-eqs-mcts (TENSAT's seven + ResNet-50, MobileNet-v2), plus ViT-B/16."""
