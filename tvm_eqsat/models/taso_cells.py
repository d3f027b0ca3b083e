"""TASO's searched cells: NASNet-A and NASRNN, as plain torch modules."""

from __future__ import annotations

from .common import Model, import_torch, seeded


def nasnet_a(
    size: int | None = None,
    channels: int | None = None,
    cells: int | None = None,
    stages: int | None = None,
    seed: int = 0,
    small: bool = False,
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
    torch = seeded(seed)
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
            return torch.cat(
                [
                    s[0](cur) + cur,
                    s[1](prev) + s[2](cur),
                    avg(cur) + prev,
                    avg(prev) + avg(prev),
                    s[3](prev) + s[4](prev),
                ],
                1,
            )

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
    torch = seeded(seed)
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
