"""Equalizers: rotations that give every hidden unit the same share of a factorization.

A matrix U ∈ ℝ^{d×r} is *equalized* when all its columns have the same norm, and an orthogonal
Q ∈ O(r) is an *equalizer* of U when UQ is equalized, i.e. when the Gram matrix G = UᵀU satisfies
diag(QᵀGQ) = (tr G / r) 𝟙. A pair (U, V) is *jointly equalized* when the importance scores
αᵢ = ‖uᵢ‖‖vᵢ‖ are all equal. Rotating both factors by the same Q keeps the map UVᵀ.

* :func:`equalizer` is Algorithm 2 of Mianjy et al. (2018): r − 1 eigendecompositions, O(r⁴).
* :func:`universal_equalizer` is the rotation V·Hᵣ/√r (V from the SVD of U, Hᵣ a Sylvester
  Hadamard matrix), which equalizes U for r = 2ᵏ.
* :func:`equalized_factors` builds the equalized factorization of a given map (Theorem 3.3).
"""

from __future__ import annotations

import numpy as np

from . import checks
from .linear import check_factors


def _gram(U) -> np.ndarray:
    U = checks.matrix(U, "U")
    return U.T @ U


def _reflector_with_first_column(w: np.ndarray) -> np.ndarray:
    """An orthogonal m×m matrix whose first column is ±w (unit w): the Householder reflection
    I − 2vvᵀ/vᵀv with v = w + sign(w₁)e₁, which maps e₁ to −sign(w₁)w."""
    v = w.copy()
    v[0] += 1.0 if w[0] >= 0 else -1.0
    return np.eye(len(w)) - 2.0 * np.outer(v, v) / (v @ v)


def equalizer(U, centered: bool = False) -> np.ndarray:
    """Algorithm 2 (EQZ): an orthogonal Q with diag(QᵀUᵀUQ) = (‖U‖²_F / r) 𝟙.

    Step i works on the trailing (r − i + 1)-square block G of the rotated Gram matrix: with G's
    orthonormal eigenvectors v₁…vₘ, the unit vector w = (v₁ + … + vₘ)/√m has wᵀGw = tr G / m;
    a reflection with first column ±w puts that value on the diagonal and leaves a block whose
    trace is again m − 1 times the target. ``centered=True`` runs the proof's version on
    G − (tr G / r) I, whose diagonal is driven to zero; both return an equalizer.
    """
    centered = checks.flag(centered, "centered")
    G = _gram(U)
    r = G.shape[0]
    if centered:
        G = G - np.trace(G) / r * np.eye(r)
    Q = np.eye(r)
    for i in range(r - 1):
        _, vectors = np.linalg.eigh(G)
        w = vectors.sum(axis=1) / np.sqrt(len(G))
        step = _reflector_with_first_column(w)
        G = (step.T @ G @ step)[1:, 1:]
        Q[:, i:] = Q[:, i:] @ step
    return Q


def hadamard(order: int) -> np.ndarray:
    """The Sylvester Hadamard matrix H of order 2ᵏ: H₁ = [1], H₂ₘ = [[Hₘ, Hₘ], [−Hₘ, Hₘ]]."""
    if checks.integer(order, "order") & (order - 1):
        raise checks.error("order", "a power of two", order)
    H = np.ones((1, 1))
    while len(H) < order:
        H = np.block([[H, H], [-H, H]])
    return H


def universal_equalizer(U) -> np.ndarray:
    """Q = V Hᵣ/√r for U = WΣVᵀ (full SVD) and r = 2ᵏ: QᵀUᵀUQ = Zᵀ(ΣᵀΣ)Z with every zⱼᵢ² = 1/r,
    so each diagonal entry is tr(ΣᵀΣ)/r. The same Z serves every U once V is known."""
    U = checks.matrix(U, "U")
    r = U.shape[1]
    try:
        Z = hadamard(r) / np.sqrt(r)
    except ValueError:
        raise ValueError(f"U must have a power-of-two number of columns for the Hadamard equalizer, got {r}") from None
    _, _, Vt = np.linalg.svd(U, full_matrices=True)
    return Vt.T @ Z


def importance_scores(U, V) -> np.ndarray:
    """αᵢ = ‖uᵢ‖‖vᵢ‖ for each hidden unit i (a leading batch dimension is allowed)."""
    U, V = checks.matrix(U, "U", batched=True), checks.matrix(V, "V", batched=True)
    if U.ndim < 2 or U.shape[:-2] != V.shape[:-2] or U.shape[-1] != V.shape[-1]:
        raise ValueError(f"U and V must be (..., d1, r) and (..., d2, r) with the same r, got {U.shape} and {V.shape}")
    return np.linalg.norm(U, axis=-2) * np.linalg.norm(V, axis=-2)


def equalized_factors(P, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Theorem 3.3: factors (U, V) of width r with UVᵀ = P and ‖uᵢ‖² = ‖vᵢ‖² = ‖P‖_*/r for every i.

    With the SVD P = WΣYᵀ, Ũ = W Σ^{1/2} and Ṽ = Y Σ^{1/2} (top r singular pairs, zero columns
    appended when P has fewer) share the diagonal Gram matrix Σ, so one equalizer Q of Ũ
    equalizes both: U = ŨQ, V = ṼQ. P must have rank at most r.
    """
    P, width = checks.matrix(P, "P"), checks.integer(width, "width")
    W, s, Yt = np.linalg.svd(P, full_matrices=False)
    if len(s) > width and s[width] > max(P.shape) * np.finfo(float).eps * s[0]:
        raise ValueError(f"P has rank greater than width = {width} (σ_{width + 1} = {s[width]:.3g})")
    k = min(width, len(s))
    root = np.sqrt(s[:k])
    U = np.zeros((P.shape[0], width))
    V = np.zeros((P.shape[1], width))
    U[:, :k], V[:, :k] = W[:, :k] * root, Yt[:k].T * root
    Q = equalizer(U)
    return U @ Q, V @ Q


def equalize_network(U, V) -> tuple[np.ndarray, np.ndarray]:
    """The equalized factorization (Theorem 3.3) of the map UVᵀ, at the width r of U and V."""
    U, V, _ = check_factors(U, V)
    return equalized_factors(U @ V.T, U.shape[1])
