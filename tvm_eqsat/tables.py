"""Constant matrices that rules introduce: the Winograd transforms.

A rule names one as ``(Table name shape dtype)``; the rebuilt module holds it as a Relax
constant, so a product of a table and a weight folds at compile time like any weight-only
subgraph.  The shape is part of the term (the e-graph's shape analysis reads it) and is
checked against the table here.

Winograd F(2x2, 3x3) (Lavin and Gray, 2016) computes a 2x2 output tile of a 3x3
convolution from a 4x4 input tile ``d`` and the 3x3 kernel ``g`` as
``A^T [(G g G^T) * (B^T d B)] A``: 16 multiplications instead of 36.  The tables are the
three transforms as Kronecker products, laid out for the Relax form of ``winograd.egg``;
``winograd_f4.egg`` uses F(4x4, 3x3)'s the same way; ``winograd_1d.egg`` the one-dimensional
F(4, 3) and F(2, 7), built exactly here by ``toom_cook``.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

# the interpolation points 0, 1, -1 (and infinity): every entry is 0, +-1 or +-1/2, so
# the transforms add no rounding error of their own beyond the sums
_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)
_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)


# F(4x4, 3x3) (winograd_f4.egg): a 4x4 output tile from a 6x6 input tile, 36 multiplications
# instead of 144, at the points 0, 1, -1, 2, -2 (and infinity).  Its entries reach 5 and
# 1/24, so it rounds more than F(2x2, 3x3): in float32, about 3e-6 of the output's largest
# magnitude at 64 channels and 7e-6 at 512 (numpy, one tile, against float64), where the
# direct conv is at 2e-7 and 7e-7
_BT4 = np.array(
    [
        [4, 0, -5, 0, 1, 0],
        [0, -4, -4, 1, 1, 0],
        [0, 4, -4, -1, 1, 0],
        [0, -2, -1, 2, 1, 0],
        [0, 2, -1, -2, 1, 0],
        [0, 4, 0, -5, 0, 1],
    ],
    dtype=np.float64,
)
_G4 = np.array(
    [
        [1 / 4, 0, 0],
        [-1 / 6, -1 / 6, -1 / 6],
        [-1 / 6, 1 / 6, -1 / 6],
        [1 / 24, 1 / 12, 1 / 6],
        [1 / 24, -1 / 12, 1 / 6],
        [0, 0, 1],
    ],
    dtype=np.float64,
)
_AT4 = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], dtype=np.float64)


def _poly_from_roots(roots: list[Fraction]) -> list[Fraction]:
    """The coefficients, lowest degree first, of the monic polynomial with these roots."""
    coeffs = [Fraction(1)]
    for q in roots:
        coeffs = [a - q * b for a, b in zip([Fraction(0)] + coeffs, coeffs + [Fraction(0)])]
    return coeffs


def toom_cook(points: list, m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Winograd's one-dimensional F(m, r) at ``points`` (m + r - 2 distinct finite points) and
    infinity, in exact arithmetic: A^T (m, a), G (a, r) and B^T (a, a), a = m + r - 1, such
    that y = A^T [(G g) * (B^T d)] gives y_i = sum_k g_k d_(i+k) for an a-long input d.
    The Toom-Cook construction: A^T evaluates at the points (powers p^i; the point at
    infinity takes the top coefficient), G is the Lagrange basis' normalisation p^k / f_j
    with f_j = prod (p_j - p_l) over l != j, and B^T holds the coefficients of
    prod (x - p_l) over l != j (the last row: over every l)."""
    p = [Fraction(x) for x in points]
    a = m + r - 1
    if len(p) != a - 1 or len(set(p)) != len(p):
        raise ValueError(f"F({m}, {r}) needs {a - 1} distinct finite points, got {points}")
    at = [[q**i for q in p] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = [[q**k / math.prod(q - o for o in p if o != q) for k in range(r)] for q in p]
    g.append([Fraction(int(k == r - 1)) for k in range(r)])
    bt = [_poly_from_roots([o for o in p if o != q]) + [Fraction(0)] for q in p] + [_poly_from_roots(p)]
    return (np.array(at, dtype=np.float64), np.array(g, dtype=np.float64), np.array(bt, dtype=np.float64))


# one-dimensional F(4, 3) (1x3 and 3x1 kernels) at 0, 1, -1, 2, -2: 6 products per 4 outputs
# instead of 12; and F(2, 7) (1x7 and 7x1) at 0, +-1, +-2, +-1/2: 8 per 2 instead of 14.  In
# float32 about 5e-6 and 3e-6 of the output's largest magnitude at 768 channels (numpy, against
# float64), where the direct conv is at 1e-6; F(4, 7) (10 points, entries to 52.5) reached 5e-5
# and is left out
_AT1D4, _G1D4, _BT1D4 = toom_cook([0, 1, -1, 2, -2], 4, 3)
_AT1D2, _G1D2, _BT1D2 = toom_cook([0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)], 2, 7)


def _kron(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """(a*p + b, i*q + j) -> left[a, i] * right[b, j]: a 2-D transform of a tile, as a matrix."""
    return np.einsum("ai,bj->abij", left, right).reshape(left.shape[0] * right.shape[0], -1)


TABLES: dict[str, np.ndarray] = {
    # input transform as 16 4x4 conv kernels (one per output position r = xi*4 + nu):
    # a grouped conv at stride 2 turns every overlapping 4x4 tile into B^T d B
    "winograd-f2-input": _kron(_BT, _BT).reshape(1, 16, 1, 4, 4),
    # weight transform: (16, 9) times the kernels as columns of 9 taps gives G g G^T
    "winograd-f2-weight": _kron(_G, _G),
    # output transform: (4, 16) times the 16 products gives the 2x2 tile A^T m A
    "winograd-f2-output": _kron(_AT, _AT),
    # the same for F(4x4, 3x3), whose input transform is separable, B^T d B = B^T (d B): 6
    # 6x1 kernels at stride 4 down the rows, then 6 1x6 kernels at stride 4 along them (a
    # third of the 6x6 kernels' multiply-adds, and 2-2.5x faster tuned); (36, 9), (16, 36)
    "winograd-f4-input-rows": _BT4.reshape(1, 6, 1, 6, 1),
    "winograd-f4-input-cols": _BT4.reshape(1, 6, 1, 1, 6),
    "winograd-f4-weight": _kron(_G4, _G4),
    "winograd-f4-output": _kron(_AT4, _AT4),
    # winograd_1d.egg: the input transform as a kernels per channel along one axis, at stride
    # m (rows: an r x 1 conv, cols: a 1 x r conv); (a, r) weight and (m, a) output transforms
    "winograd-1d-f4r3-input-rows": _BT1D4.reshape(1, 6, 1, 6, 1),
    "winograd-1d-f4r3-input-cols": _BT1D4.reshape(1, 6, 1, 1, 6),
    "winograd-1d-f4r3-weight": _G1D4,
    "winograd-1d-f4r3-output": _AT1D4,
    "winograd-1d-f2r7-input-rows": _BT1D2.reshape(1, 8, 1, 8, 1),
    "winograd-1d-f2r7-input-cols": _BT1D2.reshape(1, 8, 1, 1, 8),
    "winograd-1d-f2r7-weight": _G1D2,
    "winograd-1d-f2r7-output": _AT1D2,
}


@functools.cache
def table(name: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """The named table in ``dtype``; a ValueError if the name or shape is not a table's."""
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r} (known: {', '.join(sorted(TABLES))})")
    data = TABLES[name]
    if tuple(shape) != data.shape:
        raise ValueError(f"table {name!r} has shape {data.shape}, not {tuple(shape)}")
    out = data.astype(dtype)
    out.setflags(write=False)
    return out
