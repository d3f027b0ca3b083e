"""CNNs written as plain torch modules after the published layouts (torchvision and timm
are not usable dependencies): a ResNet bottleneck block, ResNeXt-50, Inception-v3,
SqueezeNet, VGG-19."""

from __future__ import annotations

from .common import Model, conv_bn, import_torch, seeded, trained_bn


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
            self.short = nn.Sequential(nn.Conv2d(cin, 4 * mid, 1, stride=stride, bias=False), nn.BatchNorm2d(4 * mid))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return torch.relu(y + self.short(x))

    return trained_bn(Bottleneck())


def resnet_block(channels: int = 64, mid: int = 32, size: int = 28, stride: int = 2, seed: int = 0) -> Model:
    torch = seeded(seed)
    block = _bottleneck(torch, channels, mid, stride)
    x = torch.randn(1, channels, size, size)
    mod = import_torch(block, (x,))
    return Model(f"resnet-block-c{channels}-s{size}", mod, [x.numpy()], block)


def resnext50(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """ResNeXt-50 (32x4d), torchvision layout: stages [3, 4, 6, 3], 3x3 convs in 32 groups.

    Bottleneck: 1x1 to width = planes/64 * 4 * 32, grouped 3x3 (stride on it), 1x1 to
    4 * planes, projection shortcut on each stage's first block; BN after every conv;
    average pool and a 1000-way linear head.  224 px.
    ``small``: one block per stage, half the planes (groups still 32), 32 px, 10 classes.
    """
    torch = seeded(seed)
    nn = torch.nn
    groups, width_per_group = 32, 4
    layers, base, classes = ((1, 1, 1, 1), 32, 10) if small else ((3, 4, 6, 3), 64, 1000)
    size = size or (32 if small else 224)

    class Block(nn.Module):
        def __init__(self, cin: int, planes: int, stride: int) -> None:
            super().__init__()
            width = planes * width_per_group // 64 * groups
            self.body = nn.Sequential(
                conv_bn(nn, cin, width, 1),
                conv_bn(nn, width, width, 3, stride, 1, groups=groups),
                conv_bn(nn, width, 4 * planes, 1, relu=False),
            )
            self.short = None
            if stride != 1 or cin != 4 * planes:
                self.short = conv_bn(nn, cin, 4 * planes, 1, stride, relu=False)

        def forward(self, x):
            s = x if self.short is None else self.short(x)
            return torch.relu(self.body(x) + s)

    class ResNeXt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            blocks: list = [conv_bn(nn, 3, base, 7, 2, 3), nn.MaxPool2d(3, 2, 1)]
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

    model = trained_bn(ResNeXt())
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
    torch = seeded(seed)
    nn = torch.nn
    F = torch.nn.functional
    scale = 0.125 if small else 1.0
    size = size or (75 if small else 299)

    def c(n: int) -> int:
        return max(1, int(n * scale))

    def conv(cin, cout, kernel, stride=1, padding=0):
        return conv_bn(nn, cin, cout, kernel, stride, padding, eps=1e-3)

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
            nn.Sequential(conv(cin, c(64), 1), conv(c(64), c(96), 3, padding=1), conv(c(96), c(96), 3, padding=1)),
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
                conv(cin, c7, 1),
                seven(c7, c7, (7, 1)),
                seven(c7, c7, (1, 7)),
                seven(c7, c7, (7, 1)),
                seven(c7, c(192), (1, 7)),
            ),
            avg_then(cin, c(192)),
        ), 4 * c(192)

    def block_d(cin):
        return Concat(
            nn.Sequential(conv(cin, c(192), 1), conv(c(192), c(320), 3, 2)),
            nn.Sequential(
                conv(cin, c(192), 1),
                conv(c(192), c(192), (1, 7), padding=(0, 3)),
                conv(c(192), c(192), (7, 1), padding=(3, 0)),
                conv(c(192), c(192), 3, 2),
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
                conv(3, c(32), 3, 2),
                conv(c(32), c(32), 3),
                conv(c(32), c(64), 3, padding=1),
                nn.MaxPool2d(3, 2),
                conv(c(64), c(80), 1),
                conv(c(80), c(192), 3),
                nn.MaxPool2d(3, 2),
            ]
            cin = c(192)
            A, B, C, D, E = block_a, block_b, block_c, block_d, block_e
            # (block, A's pool features or C's 7x7 channels), mixed 5b .. 7c
            plan = (
                [(A, 32), (B,), (C, 128), (D,), (E,)]
                if small
                else [(A, 32), (A, 64), (A, 64), (B,), (C, 128), (C, 160), (C, 160), (C, 192), (D,), (E,), (E,)]
            )
            for build, *args in plan:
                block, cin = build(cin, *args)
                layers.append(block)
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, 10 if small else 1000)

        def forward(self, x):
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))

    model = trained_bn(InceptionV3())
    x = torch.randn(1, 3, size, size)
    name = f"inception-v3{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)


def squeezenet(size: int | None = None, seed: int = 0, small: bool = False) -> Model:
    """SqueezeNet 1.1: 3x3/2 stem conv, eight fire modules between ceil-mode max pools,
    1x1 conv classifier (1000 classes) + ReLU + global average pool; no BN.  224 px.

    Fire module: squeeze 1x1 + ReLU, then expand 1x1 and expand 3x3 (+ ReLU each),
    concatenated along channels.  ``small``: 1/4 of the channels, 32 px, 10 classes.
    """
    torch = seeded(seed)
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
        nn.Conv2d(3, 64 // k, 3, 2),
        nn.ReLU(),
        pool(),
        Fire(64 // k, 16, 64),
        Fire(128 // k, 16, 64),
        pool(),
        Fire(128 // k, 32, 128),
        Fire(256 // k, 32, 128),
        pool(),
        Fire(256 // k, 48, 192),
        Fire(384 // k, 48, 192),
        Fire(384 // k, 64, 256),
        Fire(512 // k, 64, 256),
        nn.Conv2d(512 // k, classes, 1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
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
    torch = seeded(seed)
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
        *layers,
        nn.AdaptiveAvgPool2d(pooled),
        nn.Flatten(),
        nn.Linear(cin * pooled * pooled, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, classes),
    )
    x = torch.randn(1, 3, size, size)
    name = f"vgg19{'-small' if small else ''}-{size}"
    return Model(name, import_torch(model, (x,)), [x.numpy()], model)
