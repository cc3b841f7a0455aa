"""Synthetic data drawn from seeds: isotropic inputs with E[xxᵀ] = I, affine images of them, and
target matrices with a prescribed spectrum and Haar-random singular vectors."""

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


def haar_orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-distributed n×n orthogonal matrix: Q from the QR factorization of a Gaussian matrix,
    with the signs of R's diagonal moved into Q."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def matrix_with_spectrum(spectrum, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """M = A diag(s) Bᵀ of the given shape, with Haar-random orthonormal columns A, B and singular
    values s (non-negative, at most min(shape) of them)."""
    s = np.asarray(spectrum, dtype=np.float64)
    d1, d2 = shape
    if s.ndim != 1 or len(s) > min(d1, d2) or np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError(f"spectrum must be at most {min(d1, d2)} finite non-negative values, got {spectrum!r}")
    k = len(s)
    return (haar_orthogonal(d1, rng)[:, :k] * s) @ haar_orthogonal(d2, rng)[:, :k].T
