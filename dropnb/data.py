"""Synthetic inputs drawn from seeds: isotropic laws with E[xxᵀ] = I, and affine images of them."""

from __future__ import annotations

import numpy as np

ISOTROPIC = ("gaussian", "rademacher", "uniform")


def isotropic_inputs(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """n inputs in ℝᵈ with independent zero-mean unit-variance entries, so E[xxᵀ] = I:

    ``gaussian`` N(0, 1), ``rademacher`` ±1, ``uniform`` √3·U[−1, 1].
    """
    if kind not in ISOTROPIC:
        raise ValueError(f"kind must be one of {ISOTROPIC}, got {kind!r}")
    if n < 0 or d < 1:
        raise ValueError(f"n must be ≥ 0 and d ≥ 1, got {n} and {d}")
    if kind == "gaussian":
        return rng.standard_normal((n, d))
    if kind == "rademacher":
        return rng.choice((-1.0, 1.0), size=(n, d))
    return np.sqrt(3.0) * rng.uniform(-1.0, 1.0, size=(n, d))


def second_moment(factor: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
    """E[xxᵀ] = AAᵀ + mmᵀ for x = m + Az with E[z] = 0, E[zzᵀ] = I."""
    factor = np.asarray(factor, dtype=np.float64)
    moment = factor @ factor.T
    return moment if shift is None else moment + np.outer(shift, shift)
