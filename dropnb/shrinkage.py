"""The global optimum of shallow dropout in closed form: shrinkage–thresholding of the spectrum.

The problem is f(U, V) = ‖M − UVᵀ‖²_F + λ Σᵢ ‖uᵢ‖²‖vᵢ‖² over factors of width r (Mianjy et al.
2018, Theorem 3.6). With σ₁ ≥ σ₂ ≥ … the singular values of M, zero-padded to length r,
hⱼ = σ₁ + … + σⱼ and τⱼ = λhⱼ/(r + λj),

    ρ = max{j ≤ r : σⱼ > τⱼ},   τ = τ_ρ,
    M̄ = Σ_{i ≤ ρ} (σᵢ − τ) wᵢ yᵢᵀ              (the top ρ singular pairs only),
    f* = Σ_{i > ρ} σᵢ² + λ h_ρ² / (r + λρ),
    αᵢ = ‖uᵢ‖‖vᵢ‖ = h_ρ/(r + λρ) = ‖M̄‖_*/r for every unit (= τ/λ when λ > 0).

The tied problem ‖M − UUᵀ‖²_F + λ Σᵢ ‖uᵢ‖⁴ for symmetric positive semidefinite M has the same
solution with eigenvalues in place of singular values (Theorem 2.4). ρ = 0 only when M = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import checks
from .equalizer import equalizer


def check_spectrum(spectrum) -> np.ndarray:
    """A 1-d, finite, non-negative, non-increasing float64 array (singular values or eigenvalues)."""
    s = checks.matrix(spectrum, "spectrum", ndim=1)
    if np.any(s < 0) or np.any(np.diff(s) > 0):
        raise ValueError("spectrum must be non-negative and sorted non-increasingly")
    return s


def _padded(s: np.ndarray, width: int) -> np.ndarray:
    return np.concatenate([s, np.zeros(max(0, width - len(s)))])


def thresholds(spectrum, width: int, lam: float) -> np.ndarray:
    """τⱼ = λ hⱼ / (r + λj) for j = 1, …, r, with hⱼ = σ₁ + … + σⱼ (σ zero-padded to length r)."""
    s, r, lam = check_spectrum(spectrum), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    j = np.arange(1, r + 1)
    return lam * np.cumsum(_padded(s, r)[:r]) / (r + lam * j)


def support(spectrum, width: int, lam: float) -> tuple[int, float]:
    """(ρ, τ): the largest j ≤ r with σⱼ > τⱼ (0 if none) and the shrinkage τ = τ_ρ (0 if ρ = 0)."""
    s, r = check_spectrum(spectrum), checks.integer(width, "width")
    tau = thresholds(s, r, lam)
    feasible = np.flatnonzero(_padded(s, r)[:r] > tau)
    if feasible.size == 0:
        return 0, 0.0
    rho = int(feasible[-1]) + 1
    return rho, float(tau[rho - 1])


def breakpoints(spectrum, width: int) -> np.ndarray:
    """Cⱼ = rσⱼ / Σ_{i ≤ j}(σᵢ − σⱼ), j = 1, …, r, so that σⱼ > τⱼ(λ) exactly when λ < Cⱼ.

    Cⱼ = ∞ when the denominator vanishes and σⱼ > 0, and 0 when σⱼ = 0 (never active).
    """
    s, r = check_spectrum(spectrum), checks.integer(width, "width")
    padded = _padded(s, r)[:r]
    excess = np.cumsum(padded) - np.arange(1, r + 1) * padded
    with np.errstate(divide="ignore", invalid="ignore"):
        C = np.where(excess > 0, r * padded / excess, np.inf)
    return np.where(padded > 0, C, 0.0)


def optimal_value(spectrum, width: int, lam: float) -> float:
    """f* = Σ_{i > ρ} σᵢ² + λ h_ρ²/(r + λρ): the minimum of the dropout objective."""
    s, r, lam = check_spectrum(spectrum), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    rho, _ = support(s, r, lam)
    head = s[:rho].sum()
    return float(np.sum(s[rho:] ** 2) + lam * head**2 / (r + lam * rho))


@dataclass(frozen=True)
class Optimum:
    """A global optimum: ``rank`` ρ, ``threshold`` τ, ``value`` f*, the common importance score
    ``score`` h_ρ/(r + λρ), the map ``product`` M̄ = UVᵀ and equalized factors ``U``, ``V``."""

    rank: int
    threshold: float
    value: float
    score: float
    product: np.ndarray
    U: np.ndarray
    V: np.ndarray


def _optimum(W: np.ndarray, s: np.ndarray, Y: np.ndarray, width: int, lam: float) -> Optimum:
    """Algorithm 3 with the rank-r truncation and zero padding: shrink the top ρ pairs of
    (W, s, Y) by τ, split the shrunken values evenly between the factors, then equalize."""
    rho, tau = support(s, width, lam)
    shrunk = s[:rho] - tau
    U, V = np.zeros((W.shape[0], width)), np.zeros((Y.shape[0], width))
    U[:, :rho], V[:, :rho] = W[:, :rho] * np.sqrt(shrunk), Y[:, :rho] * np.sqrt(shrunk)
    Q = equalizer(U)
    score = float(s[:rho].sum() / (width + lam * rho))
    return Optimum(rank=rho, threshold=tau, value=optimal_value(s, width, lam), score=score,
                   product=(W[:, :rho] * shrunk) @ Y[:, :rho].T, U=U @ Q, V=V @ Q)


def global_optimum(M, width: int, lam: float) -> Optimum:
    """The global optimum of ‖M − UVᵀ‖²_F + λ Σᵢ‖uᵢ‖²‖vᵢ‖² over width-r factors (Theorem 3.6,
    Algorithm 3 corrected). Cost: one SVD of M, a Gram matrix and one equalizer, O(r⁴)."""
    M, r, lam = checks.matrix(M, "M"), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    W, s, Yt = np.linalg.svd(M, full_matrices=False)
    return _optimum(W, s, Yt.T, r, lam)


def tied_optimum(M, width: int, lam: float) -> Optimum:
    """The global optimum of ‖M − UUᵀ‖²_F + λ Σᵢ‖uᵢ‖⁴ for symmetric positive semidefinite M
    (Theorem 2.4, with the rank-r truncation): UUᵀ = Σ_{i ≤ ρ}(λᵢ − τ) wᵢwᵢᵀ, ‖uᵢ‖² = h_ρ/(r + λρ)."""
    M, r, lam = checks.matrix(M, "M"), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    if M.shape[0] != M.shape[1] or not np.allclose(M, M.T, rtol=0, atol=1e-12 * max(1.0, np.abs(M).max())):
        raise ValueError(f"M must be a symmetric square matrix for the tied problem, got shape {M.shape}")
    values, vectors = np.linalg.eigh((M + M.T) / 2)
    values, vectors = values[::-1], vectors[:, ::-1]
    if values[-1] < -1e-12 * max(1.0, abs(values[0])):
        raise ValueError(f"M must be positive semidefinite for the tied problem (smallest eigenvalue {values[-1]:.3g})")
    return _optimum(vectors, np.maximum(values, 0.0), vectors, r, lam)


def reduced_value(spectrum, width: int, lam: float, point) -> float:
    """Φ(σ̄) = Σ_{i≤r}(σᵢ − σ̄ᵢ)² + Σ_{i>r}σᵢ² + (λ/r)(Σᵢσ̄ᵢ)² at σ̄ = ``point`` ∈ ℝʳ₊ (σ zero-padded
    to length r): the reduced objective whose minimum over ℝʳ₊ is the minimum of the dropout
    objective (von Neumann's trace inequality and the Cauchy–Schwarz bound)."""
    s, r, lam = check_spectrum(spectrum), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    x = checks.matrix(point, "point", ndim=1)
    if x.shape != (r,) or np.any(x < 0):
        raise ValueError(f"point must be a non-negative vector of length width = {r}, got shape {x.shape}")
    padded = _padded(s, r)
    return float(np.sum((padded[:r] - x) ** 2) + np.sum(padded[r:] ** 2) + lam / r * np.sum(x) ** 2)


def reduced_lower_bound(spectrum, width: int, lam: float, point) -> float:
    """A proved lower bound on min Φ over ℝʳ₊ (Φ of :func:`reduced_value`), hence on the minimum of
    the dropout objective, from any σ̄ = ``point`` ∈ ℝʳ₊ (an optimizer's end point, say):

        min Φ ≥ max_k [Φ(x_k) − ‖s_k‖²/4],

    x_k the point with its entries below the k largest set to 0 (k = 0, …, r), s_k the element of
    least norm of ∇Φ(x_k) + N(x_k) (N the normal cone of ℝʳ₊: sᵢ = ∂ᵢΦ where xᵢ > 0 and
    min(∂ᵢΦ, 0) where xᵢ = 0), ∇Φ(x) = −2(σ − x) + (2λ/r)(Σx)𝟏. Φ is 2-strongly convex
    (∇²Φ = 2I + (2λ/r)𝟏𝟏ᵀ ⪰ 2I), so Φ(y) ≥ Φ(x) + ⟨s, y − x⟩ + ‖y − x‖² ≥ Φ(x) − ‖s‖²/4 on ℝʳ₊.
    Exact arithmetic; the caller adds the rounding of the evaluation."""
    s, r, lam = check_spectrum(spectrum), checks.integer(width, "width"), checks.nonnegative(lam, "lam")
    x = checks.matrix(point, "point", ndim=1)
    if x.shape != (r,) or np.any(x < 0):
        raise ValueError(f"point must be a non-negative vector of length width = {r}, got shape {x.shape}")
    head = _padded(s, r)[:r]
    order = np.argsort(-x, kind="stable")
    best = -np.inf
    for k in range(r + 1):
        x_k = np.zeros(r)
        x_k[order[:k]] = x[order[:k]]
        gradient = -2 * (head - x_k) + 2 * lam / r * np.sum(x_k)
        least = np.where(x_k > 0, gradient, np.minimum(gradient, 0.0))
        best = max(best, reduced_value(s, r, lam, x_k) - float(least @ least) / 4)
    return best
