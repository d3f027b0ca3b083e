"""The rational approximation of erf that rules/erf_rational.egg writes out, and its error.

erf(x) ~ z * P(z^2) / Q(z^2) with z = clip(x, -4, 4), P of degree 6 and Q of degree 4
(Q's constant term 1).  Fitted by linearised least squares (z P - erf * (Q - 1) = erf on
Chebyshev-spaced points of [0, 4], erf being odd), reweighted by 1 / Q and by each point's
error so that the largest errors shrink; then checked on a grid of [-6, 6], in float64 and
evaluated in float32 as the rule's ops compute it (Horner's form):

    python scripts/fit_erf.py
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

CLAMP = 4.0
P_DEGREE, Q_DEGREE = 6, 4


def fit(iterations: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """(P's coefficients, Q's), lowest degree first."""
    z = np.cos(np.linspace(0, np.pi, 4001)) * CLAMP
    z = z[z >= 0]
    t, y = z * z, erf(z)
    weight = np.ones_like(z)
    for _ in range(iterations):
        columns = [z * t**k for k in range(P_DEGREE + 1)] + [-y * t**k for k in range(1, Q_DEGREE + 1)]
        a = np.stack(columns, 1)
        sol, *_ = np.linalg.lstsq(a * weight[:, None], y * weight, rcond=None)
        p, q = sol[: P_DEGREE + 1], np.concatenate([[1.0], sol[P_DEGREE + 1 :]])
        denominator = np.polyval(q[::-1], t)
        err = z * np.polyval(p[::-1], t) / denominator - y
        weight = (1 + 50 * np.abs(err) / np.abs(err).max()) / np.abs(denominator)
    return p, q


def evaluate(x: np.ndarray, p, q, dtype=np.float64) -> np.ndarray:
    """The rule's ops in ``dtype``: clip, square, Horner's form of both, multiply, divide, clip
    to [-1, 1]."""
    z = np.clip(x.astype(dtype), -CLAMP, CLAMP)
    t = z * z
    num, den = dtype(p[-1]), dtype(q[-1])
    for c in p[-2::-1]:
        num = num * t + dtype(c)
    for c in q[-2::-1]:
        den = den * t + dtype(c)
    return np.clip(z * num / den, dtype(-1), dtype(1))


def main() -> None:
    p, q = fit()
    p, q = (np.array([float(f"{c:.9e}") for c in v]) for v in (p, q))  # as the rule writes them
    x = np.linspace(-6, 6, 2_000_001)
    exact = erf(x)
    print("P:", " ".join(f"{c:.9e}" for c in p))
    print("Q:", " ".join(f"{c:.9e}" for c in q))
    print(f"max |error| in float64: {np.abs(evaluate(x, p, q) - exact).max():.2e}")
    x32 = x.astype(np.float32)
    got = evaluate(x32, p, q, np.float32).astype(np.float64)
    print(f"max |error| in float32: {np.abs(got - erf(x32.astype(np.float64))).max():.2e}")
    print(f"GELU, x * (0.5 + 0.5 * erf(x / sqrt 2)) in float32: max |error| {gelu_error(p, q):.2e}")


def gelu_error(p, q, bound: float = 30.0) -> float:
    """The largest error of GELU computed with the rule's erf in float32, for |x| <= ``bound``."""
    x = np.linspace(-bound, bound, 600_001).astype(np.float32)
    half = np.float32(0.5)
    got = x * (half + half * evaluate(x * np.float32(0.7071067811865476), p, q, np.float32))
    exact = x.astype(np.float64) * 0.5 * (1 + erf(x.astype(np.float64) / np.sqrt(2)))
    return float(np.abs(got - exact).max())


if __name__ == "__main__":
    main()
