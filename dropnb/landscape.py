"""The landscape of the dropout objectives: exact gradients, Hessians and critical points.

The tied objective (M ∈ ℝ^{d×d} symmetric, U ∈ ℝ^{d×r}) and the untied one (M ∈ ℝ^{d₁×d₂},
U ∈ ℝ^{d₁×r}, V ∈ ℝ^{d₂×r}) are

    f(U)    = ‖M − UUᵀ‖²_F + λ Σᵢ ‖uᵢ‖⁴,
    f(U, V) = ‖M − UVᵀ‖²_F + λ Σᵢ ‖uᵢ‖²‖vᵢ‖²,

with gradients

    ∇f(U)   = 4(UUᵀ − M)U + 4λ U Diag(‖uᵢ‖²),
    ∇_U f   = 2(UVᵀ − M)V + 2λ U Diag(‖vᵢ‖²),   ∇_V f = 2(UVᵀ − M)ᵀU + 2λ V Diag(‖uᵢ‖²),

and Hessians given as linear maps of a direction D (or (D_U, D_V)), the derivatives of these
gradients. The Hessian matrices act on the flat vectors x = vec U (tied) and x = (vec U, vec V)
(untied), row-major, the packing of :func:`dropnb.linear.flat_objective`.

Critical points of the tied problem built from eigenvectors (Mianjy et al. 2018, Lemma D.3): for
a set E of r′ ≤ r eigenpairs (λⱼ, wⱼ) of M, σ² = λ_E − λ Σ_{j∈E} λⱼ / (r + λr′) (all entries
positive) and U = [W_E diag(σ), 0] Q with Q an equalizer; then ‖uᵢ‖² = ‖U‖²_F / r for every i and
(M − UUᵀ)U = λ(‖U‖²_F / r) U, so ∇f(U) = 0.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import least_squares

from . import checks
from .equalizer import equalizer
from .linear import check_network


def _check_tied(M, U, lam) -> tuple[np.ndarray, np.ndarray, float]:
    M, U = checks.symmetric(M, "M"), checks.matrix(U, "U")
    if U.shape[0] != M.shape[0]:
        raise ValueError(f"U must have {M.shape[0]} rows to match M {M.shape}, got {U.shape}")
    return M, U, checks.nonnegative(lam, "lam")


def _check_untied(M, U, V, lam) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    M, U, V, _ = check_network(M, U, V)
    return M, U, V, checks.nonnegative(lam, "lam")


def _check_direction(D, name: str, shape: tuple[int, int]) -> np.ndarray:
    D = checks.matrix(D, name)
    if D.shape != shape:
        raise ValueError(f"{name} must have shape {shape} to match U, got {D.shape}")
    return D


def assembled_hessian(product: Callable[..., tuple[np.ndarray, ...]], shapes: list[tuple[int, int]]) -> np.ndarray:
    """The symmetrized matrix (H + Hᵀ)/2 of a Hessian given as a batched product: ``product`` maps a
    batch of directions, one array (n, rows, cols) per block of ``shapes``, to the same blocks of
    ∇²f[D]; the coordinates are the blocks flattened row-major and concatenated (n in all)."""
    product = checks.function(product, "product")
    shapes = [checks.shape(shape, "shapes", minimum=1) for shape in shapes]
    n = sum(rows * cols for rows, cols in shapes)
    identity, directions, start = np.eye(n), [], 0
    for rows, cols in shapes:
        directions.append(identity[:, start:start + rows * cols].reshape(n, rows, cols))
        start += rows * cols
    H = np.concatenate([block.reshape(n, -1) for block in product(*directions)], axis=1)
    return (H + H.T) / 2


def tied_objective(M, U, lam: float) -> float:
    """f(U) = ‖M − UUᵀ‖²_F + λ Σᵢ ‖uᵢ‖⁴."""
    M, U, lam = _check_tied(M, U, lam)
    return float(np.sum((M - U @ U.T) ** 2) + lam * np.sum(np.sum(U**2, axis=0) ** 2))


def tied_gradient(M, U, lam: float) -> np.ndarray:
    """∇f(U) = 4(UUᵀ − M)U + 4λ U Diag(‖uᵢ‖²), shape (d, r)."""
    M, U, lam = _check_tied(M, U, lam)
    return 4 * (U @ U.T - M) @ U + 4 * lam * U * np.sum(U**2, axis=0)


def _tied_product(M, U, lam, D):
    """∇²f(U)[D] for a batch of directions D (…, d, r)."""
    Dt = np.swapaxes(D, -1, -2)
    loss = (D @ U.T + U @ Dt) @ U + (U @ U.T - M) @ D
    penalty = D * np.sum(U**2, axis=0) + 2 * U * np.einsum("ki,...ki->...i", U, D)[..., None, :]
    return 4 * loss + 4 * lam * penalty


def tied_hessian_product(M, U, lam: float, D) -> np.ndarray:
    """∇²f(U)[D] = 4[(DUᵀ + UDᵀ)U + (UUᵀ − M)D] + 4λ[D Diag(‖uᵢ‖²) + 2U Diag(uᵢᵀdᵢ)]."""
    M, U, lam = _check_tied(M, U, lam)
    return _tied_product(M, U, lam, _check_direction(D, "D", U.shape))


def tied_hessian(M, U, lam: float) -> np.ndarray:
    """The (dr × dr) matrix of D ↦ ∇²f(U)[D] in the coordinates x = vec U (row-major), symmetrized."""
    M, U, lam = _check_tied(M, U, lam)
    return assembled_hessian(lambda D: (_tied_product(M, U, lam, D),), [U.shape])


def untied_objective(M, U, V, lam: float) -> float:
    """f(U, V) = ‖M − UVᵀ‖²_F + λ Σᵢ ‖uᵢ‖²‖vᵢ‖²."""
    M, U, V, lam = _check_untied(M, U, V, lam)
    return float(np.sum((M - U @ V.T) ** 2) + lam * np.sum(np.sum(U**2, axis=0) * np.sum(V**2, axis=0)))


def untied_gradient(M, U, V, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """∇_U f = 2(UVᵀ − M)V + 2λ U Diag(‖vᵢ‖²) and ∇_V f = 2(UVᵀ − M)ᵀU + 2λ V Diag(‖uᵢ‖²)."""
    M, U, V, lam = _check_untied(M, U, V, lam)
    residual = U @ V.T - M
    return (2 * residual @ V + 2 * lam * U * np.sum(V**2, axis=0),
            2 * residual.T @ U + 2 * lam * V * np.sum(U**2, axis=0))


def _untied_product(M, U, V, lam, DU, DV):
    """∇²f(U, V)[DU, DV] for batches of directions DU (…, d₁, r) and DV (…, d₂, r)."""
    residual = U @ V.T - M
    change = DU @ V.T + U @ np.swapaxes(DV, -1, -2)
    cross_u = np.einsum("ki,...ki->...i", U, DU)[..., None, :]
    cross_v = np.einsum("ki,...ki->...i", V, DV)[..., None, :]
    grad_u = 2 * change @ V + 2 * residual @ DV + 2 * lam * (DU * np.sum(V**2, axis=0) + 2 * U * cross_v)
    grad_v = (2 * np.swapaxes(change, -1, -2) @ U + 2 * residual.T @ DU
              + 2 * lam * (DV * np.sum(U**2, axis=0) + 2 * V * cross_u))
    return grad_u, grad_v


def untied_hessian_product(M, U, V, lam: float, DU, DV) -> tuple[np.ndarray, np.ndarray]:
    """∇²f(U, V)[D_U, D_V], the derivatives of (∇_U f, ∇_V f) along (D_U, D_V):

        2(D_U Vᵀ + U D_Vᵀ)V + 2(UVᵀ − M)D_V + 2λ(D_U Diag(‖vᵢ‖²) + 2U Diag(vᵢᵀd_{V,i})),
        2(D_U Vᵀ + U D_Vᵀ)ᵀU + 2(UVᵀ − M)ᵀD_U + 2λ(D_V Diag(‖uᵢ‖²) + 2V Diag(uᵢᵀd_{U,i})).
    """
    M, U, V, lam = _check_untied(M, U, V, lam)
    return _untied_product(M, U, V, lam, _check_direction(DU, "DU", U.shape), _check_direction(DV, "DV", V.shape))


def untied_hessian(M, U, V, lam: float) -> np.ndarray:
    """The ((d₁ + d₂)r)-square Hessian in the coordinates x = (vec U, vec V) (row-major), symmetrized."""
    M, U, V, lam = _check_untied(M, U, V, lam)
    return assembled_hessian(lambda DU, DV: _untied_product(M, U, V, lam, DU, DV), [U.shape, V.shape])


@dataclass(frozen=True)
class CriticalPoint:
    """An equalized critical point of the tied problem: the eigenvector indices ``subset`` E
    (0-based, sorted, eigenvalues non-increasing) and the factor ``U`` (d × r)."""

    subset: tuple[int, ...]
    U: np.ndarray


def equalized_critical_points(M, width: int, lam: float) -> list[CriticalPoint]:
    """Every equalized critical point U = [W_E diag(σ), 0] Q of ‖M − UUᵀ‖²_F + λ Σᵢ‖uᵢ‖⁴ built
    from |E| = r′ ≤ r eigenvectors of the symmetric positive semidefinite M, where
    σ² = λ_E − λ Σ_{j∈E} λⱼ / (r + λr′) > 0 and Q equalizes (Mianjy et al. 2018, Lemma D.3).
    Ordered by |E|, then lexicographically; E = ∅ gives U = 0."""
    M, r, lam = checks.symmetric(M, "M"), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    values, vectors = np.linalg.eigh((M + M.T) / 2)
    values, vectors = values[::-1], vectors[:, ::-1]
    if values[-1] < -1e-12 * np.abs(values).max():
        raise ValueError(f"M must be positive semidefinite (smallest eigenvalue {values[-1]:.3g})")
    d, points = len(values), []
    for size in range(min(r, d) + 1):
        for subset in itertools.combinations(range(d), size):
            head = values[list(subset)]
            squared = head - lam * head.sum() / (r + lam * size)
            if np.any(squared <= 0):
                continue
            U = np.zeros((d, r))
            U[:, :size] = vectors[:, list(subset)] * np.sqrt(squared)
            points.append(CriticalPoint(subset=subset, U=U @ equalizer(U)))
    return points


def critical_point_search(gradient: Callable[[np.ndarray], np.ndarray], hessian: Callable[[np.ndarray], np.ndarray],
                          starts, gtol: float) -> list[np.ndarray]:
    """Solve ∇f(x) = 0 from each row of ``starts`` by Levenberg–Marquardt (scipy ``least_squares``
    with the Hessian as the Jacobian of the gradient); keep the end points with ‖∇f‖ ≤ ``gtol``."""
    gradient, hessian = checks.function(gradient, "gradient"), checks.function(hessian, "hessian")
    starts = checks.matrix(starts, "starts")
    gtol = checks.positive(gtol, "gtol")
    found = []
    for x0 in starts:
        result = least_squares(gradient, x0, jac=hessian, method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15,
                               max_nfev=5000)
        if np.linalg.norm(gradient(result.x)) <= gtol:
            found.append(result.x)
    return found

