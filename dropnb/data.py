"""Synthetic data drawn from seeds: isotropic inputs with E[xxᵀ] = I, affine images of them, and
target matrices with a prescribed spectrum and Haar-random singular vectors.

Conventions: a sample of n inputs in ℝᵈ is an (n, d) array, one input a row, drawn from the caller's
numpy generator; second moments are d × d; a target map M ∈ ℝ^{d₁×d₂} acts on column vectors, y = Mx,
so :func:`population_form` reads data sets X (d₂ × n), Y (d₁ × n) with samples in columns."""

from __future__ import annotations

import numpy as np

from . import checks

ISOTROPIC = ("gaussian", "rademacher", "uniform")


def isotropic_inputs(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """n inputs in ℝᵈ with independent zero-mean unit-variance entries, so E[xxᵀ] = I:

    ``gaussian`` N(0, 1), ``rademacher`` ±1, ``uniform`` √3·U[−1, 1].
    """
    if kind not in ISOTROPIC:
        raise ValueError(f"kind must be one of {ISOTROPIC}, got {kind!r}")
    n, d = checks.integer(n, "n", minimum=0), checks.integer(d, "d")
    rng = checks.generator(rng, "rng")
    if kind == "gaussian":
        return rng.standard_normal((n, d))
    if kind == "rademacher":
        return rng.choice((-1.0, 1.0), size=(n, d))
    return np.sqrt(3.0) * rng.uniform(-1.0, 1.0, size=(n, d))


def second_moment(factor: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
    """E[xxᵀ] = AAᵀ + mmᵀ for x = m + Az with E[z] = 0, E[zzᵀ] = I."""
    factor = checks.matrix(factor, "factor")
    if shift is not None and checks.vector(shift, "shift").shape != (factor.shape[0],):
        raise ValueError(f"shift must have {factor.shape[0]} entries to match factor {factor.shape}, "
                         f"got shape {np.shape(shift)}")
    moment = factor @ factor.T
    return moment if shift is None else moment + np.outer(shift, shift)


def random_second_moment(d: int, rng: np.random.Generator) -> np.ndarray:
    """A random input second moment S = AAᵀ/d + 0.2·I ≻ 0 (A Gaussian d×d), condition number of order 10."""
    d, rng = checks.integer(d, "d"), checks.generator(rng, "rng")
    A = rng.standard_normal((d, d))
    return A @ A.T / d + 0.2 * np.eye(d)


def haar_orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-distributed n×n orthogonal matrix: Q from the QR factorization of a Gaussian matrix,
    with the signs of R's diagonal moved into Q."""
    n, rng = checks.integer(n, "n"), checks.generator(rng, "rng")
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def matrix_with_spectrum(spectrum, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """M = A diag(s) Bᵀ of the given shape, with Haar-random orthonormal columns A, B and singular
    values s (non-negative, at most min(shape) of them)."""
    s = checks.vector(spectrum, "spectrum", empty=True)
    d1, d2 = checks.shape(shape, "shape", minimum=1) if np.ndim(shape) == 1 and len(shape) == 2 else (None, None)
    if d1 is None:
        raise checks.error("shape", "a pair of positive integers (d1, d2)", shape)
    rng = checks.generator(rng, "rng")
    if s.ndim != 1 or len(s) > min(d1, d2) or np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError(f"spectrum must be at most {min(d1, d2)} finite non-negative values, got {spectrum!r}")
    k = len(s)
    return (haar_orthogonal(d1, rng)[:, :k] * s) @ haar_orthogonal(d2, rng)[:, :k].T


def population_form(X, Y) -> tuple[np.ndarray, np.ndarray, float]:
    """A finite data set as the book's population form: inputs X (d₂ × N) and targets Y (d₁ × N)
    as columns give S = XXᵀ, M = YX⁺ and c = ‖Y(I − P_X)‖²_F (P_X the projector onto the row
    space of X), so that ‖Y − WX‖²_F = tr((M − W)S(M − W)ᵀ) + c for every map W. X need not have
    full rank: only YP_X = MX can be fitted, and c is the part no network reaches."""
    X, Y = checks.real_array(X, "X"), checks.real_array(Y, "Y")
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1] or X.size == 0 or Y.size == 0:
        raise ValueError(f"X and Y must be (d2, N) and (d1, N) arrays with the same N ≥ 1 columns, "
                         f"got shapes {X.shape} and {Y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(Y))):
        raise ValueError("X and Y must be finite")
    M = Y @ np.linalg.pinv(X)
    return M, X @ X.T, float(np.sum((Y - M @ X) ** 2))
