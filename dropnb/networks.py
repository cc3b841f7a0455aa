"""Critical points of linear networks with the squared loss.

Data come in columns, X ∈ ℝ^{n₀×m} and Y ∈ ℝ^{n₂×m}, summarized by the uncentred second moments
Σxx = E[xxᵀ] (n₀×n₀), Σxy = E[xyᵀ] (n₀×n₂), Σyy = E[yyᵀ] (n₂×n₂) and Σyx = Σxyᵀ; the empirical
risk is the population risk with the empirical moments (1/m)XXᵀ, (1/m)XYᵀ, (1/m)YYᵀ. The shallow
network x ↦ UVᵀx, U ∈ ℝ^{n₂×n₁}, V ∈ ℝ^{n₀×n₁}, has risk, gradient and second derivative
(Vidal et al. 2022, eqs. (1.13), (1.16), (1.18); Baldi and Hornik 1989)

    R(U, V)  = E‖y − UVᵀx‖² = tr(Σyy − 2ΣyxVUᵀ + UVᵀΣxxVUᵀ),
    ∇_U R    = −2(Σyx − UVᵀΣxx)V,   ∇_V R = −2(Σxy − ΣxxVUᵀ)U,
    d²R[Δ,Δ] = 2‖(UΔ_Vᵀ + Δ_UVᵀ)Σxx^{1/2}‖²_F + 4⟨Δ_UΔ_Vᵀ, UVᵀΣxx − Σyx⟩,

the last being twice the form printed as (1.26) in the chapter. With Σxx ≻ 0 and the key matrix
Σ = ΣyxΣxx⁻¹Σxy = QΛQᵀ (eigenvalues λ₀ ≥ … ≥ λ_{n₂−1}), Theorem 1.2 of Vidal et al. (2022) lists the
critical points with U of full column rank (distinct eigenvalues):

    U = Q_J C,   V = Σxx⁻¹Σxy Q_J C^{−T},   R = tr Σyy − Σ_{j∈J} λⱼ,

for J ⊂ {0, …, n₂−1} with |J| = n₁ and C ∈ GL(n₁); J = {0, …, n₁−1} gives the global minima and
every other J a strict saddle. The deep network x ↦ W_L⋯W₁x (Theorem 1.4) has risk
tr(Σyy − 2ΣyxPᵀ + PΣxxPᵀ) with P = W_L⋯W₁. The Hessian matrix acts on x = (vec U, vec V), row-major.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from functools import reduce

import numpy as np
import torch
from scipy.linalg import cho_factor, cho_solve, solve_triangular

from . import checks
from .deep import check_layers
from .landscape import assembled_hessian

Moments = tuple[np.ndarray, np.ndarray, np.ndarray]


def check_moments(moments) -> Moments:
    """(Σxx, Σxy, Σyy) as finite float64 arrays with Σxx (n₀×n₀) and Σyy (n₂×n₂) symmetric and
    Σxy of shape (n₀, n₂); ValueError naming the offending matrix otherwise."""
    if not isinstance(moments, (tuple, list)) or len(moments) != 3:
        raise ValueError("moments must be a (Sxx, Sxy, Syy) triple")
    Sxx, Sxy = checks.symmetric(moments[0], "moments[0] (Sxx)"), checks.matrix(moments[1], "moments[1] (Sxy)")
    Syy = checks.symmetric(moments[2], "moments[2] (Syy)")
    if Sxy.shape != (Sxx.shape[0], Syy.shape[0]):
        raise ValueError(f"moments[1] (Sxy) must have shape {(Sxx.shape[0], Syy.shape[0])} to match Sxx and Syy, got {Sxy.shape}")
    return Sxx, Sxy, Syy


def _cholesky(Sxx: np.ndarray) -> tuple[np.ndarray, bool]:
    """The lower Cholesky factor of Σxx; ValueError unless Σxx is positive definite."""
    try:
        return cho_factor(Sxx, lower=True)
    except np.linalg.LinAlgError:
        raise ValueError("Sxx must be positive definite") from None


def _check_factors(moments, U, V) -> tuple[Moments, np.ndarray, np.ndarray]:
    moments = check_moments(moments)
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    (n0, n2), n1 = moments[1].shape, U.shape[1]
    if U.shape != (n2, n1):
        raise ValueError(f"U must have {n2} rows to match Syy, got shape {U.shape}")
    if V.shape != (n0, n1):
        raise ValueError(f"V must have shape {(n0, n1)} to match Sxx and U, got {V.shape}")
    return moments, U, V


def moments(X, Y) -> Moments:
    """The empirical uncentred second moments ((1/m)XXᵀ, (1/m)XYᵀ, (1/m)YYᵀ) of column samples
    X (n₀×m) and Y (n₂×m)."""
    X, Y = checks.matrix(X, "X"), checks.matrix(Y, "Y")
    if X.shape[1] != Y.shape[1] or X.shape[1] == 0:
        raise ValueError(f"X and Y must hold the same positive number of columns, got {X.shape} and {Y.shape}")
    m = X.shape[1]
    return X @ X.T / m, X @ Y.T / m, Y @ Y.T / m


def shallow_risk(moments, U, V) -> float:
    """R(U, V) = tr(Σyy − 2ΣyxVUᵀ + UVᵀΣxxVUᵀ) (Vidal et al. 2022, eq. (1.13))."""
    (Sxx, Sxy, Syy), U, V = _check_factors(moments, U, V)
    UV = U @ V.T
    return float(np.trace(Syy) - 2 * np.sum(Sxy.T * UV) + np.sum((UV @ Sxx) * UV))


def shallow_gradient(moments, U, V) -> tuple[np.ndarray, np.ndarray]:
    """∇_U R = −2(Σyx − UVᵀΣxx)V and ∇_V R = −2(Σxy − ΣxxVUᵀ)U (Vidal et al. 2022, (1.16), (1.18))."""
    (Sxx, Sxy, _), U, V = _check_factors(moments, U, V)
    residual = U @ V.T @ Sxx - Sxy.T
    return 2 * residual @ V, 2 * residual.T @ U


def _shallow_product(Sxx, Sxy, U, V, DU, DV) -> tuple[np.ndarray, np.ndarray]:
    """The derivatives of (∇_U R, ∇_V R) along batches of directions DU (…, n₂, n₁), DV (…, n₀, n₁):
    2(Δ_UVᵀ + UΔ_Vᵀ)ΣxxV + 2EΔ_V and 2Σxx(Δ_UVᵀ + UΔ_Vᵀ)ᵀU + 2EᵀΔ_U with E = UVᵀΣxx − Σyx."""
    residual = U @ V.T @ Sxx - Sxy.T
    change = (DU @ V.T + U @ np.swapaxes(DV, -1, -2)) @ Sxx
    return (2 * change @ V + 2 * residual @ DV,
            2 * np.swapaxes(change, -1, -2) @ U + 2 * residual.T @ DU)


def shallow_hessian(moments, U, V) -> np.ndarray:
    """The ((n₂ + n₀)n₁)-square Hessian of R in x = (vec U, vec V) (row-major), symmetrized, whose
    quadratic form is 2‖(UΔ_Vᵀ + Δ_UVᵀ)Σxx^{1/2}‖²_F + 4⟨Δ_UΔ_Vᵀ, UVᵀΣxx − Σyx⟩."""
    (Sxx, Sxy, _), U, V = _check_factors(moments, U, V)
    return assembled_hessian(lambda DU, DV: _shallow_product(Sxx, Sxy, U, V, DU, DV), [U.shape, V.shape])


def key_matrix(moments) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues λ₀ ≥ … ≥ λ_{n₂−1} (descending) and orthonormal eigenvectors Q (columns) of
    Σ = ΣyxΣxx⁻¹Σxy = WᵀW, W = L⁻¹Σxy with Σxx = LLᵀ (Cholesky); Σxx must be positive definite."""
    Sxx, Sxy, _ = check_moments(moments)
    L, lower = _cholesky(Sxx)
    W = solve_triangular(L, Sxy, lower=lower)
    values, vectors = np.linalg.eigh(W.T @ W)
    return values[::-1], vectors[:, ::-1]


@dataclass(frozen=True)
class LinearCriticalPoint:
    """A critical point U = Q_J C, V = Σxx⁻¹Σxy Q_J C^{−T} of the shallow risk: the eigenvector
    indices ``subset`` J (0-based, increasing) and the factors ``U`` (n₂×n₁), ``V`` (n₀×n₁)."""

    subset: tuple[int, ...]
    U: np.ndarray
    V: np.ndarray


def shallow_critical_points(moments, width: int, C=None) -> list[LinearCriticalPoint]:
    """Theorem 1.2 of Vidal et al. (2022), eq. (1.24): U = Q_J C, V = Σxx⁻¹Σxy Q_J C^{−T} for every
    J ⊂ {0, …, n₂−1} with |J| = n₁ = ``width`` (``itertools.combinations`` order), C = I by default.
    Then UVᵀ = P_J ΣyxΣxx⁻¹ with P_J = Q_JQ_Jᵀ and both gradients vanish. Requires Σxx ≻ 0,
    width ≤ min(n₀, n₂) and C invertible of shape (width, width)."""
    Sxx, Sxy, Syy = check_moments(moments)
    n1, (n0, n2) = checks.integer(width, "width"), Sxy.shape
    if n1 > min(n0, n2):
        raise ValueError(f"width must be at most min(n0, n2) = {min(n0, n2)}, got {n1}")
    C = np.eye(n1) if C is None else checks.matrix(C, "C")
    if C.shape != (n1, n1) or np.linalg.matrix_rank(C) < n1:
        raise ValueError(f"C must be an invertible {n1}×{n1} matrix, got shape {C.shape}")
    _, Q = key_matrix((Sxx, Sxy, Syy))
    regression = cho_solve(_cholesky(Sxx), Sxy)
    points = []
    for subset in itertools.combinations(range(n2), n1):
        QJ = Q[:, list(subset)]
        points.append(LinearCriticalPoint(subset=subset, U=QJ @ C, V=np.linalg.solve(C, (regression @ QJ).T).T))
    return points


def critical_value(moments, subset) -> float:
    """tr Σyy − Σ_{j∈J} λⱼ, the risk at the critical points indexed by J = ``subset`` (0-based)."""
    moments = check_moments(moments)
    values, _ = key_matrix(moments)
    try:
        indices = [operator.index(j) for j in subset]
    except TypeError:
        raise ValueError(f"subset must be a collection of integer indices, got {subset!r}") from None
    if len(set(indices)) != len(indices) or not all(0 <= j < len(values) for j in indices):
        raise ValueError(f"subset must hold distinct indices in 0..{len(values) - 1}, got {subset!r}")
    return float(np.trace(moments[2]) - values[indices].sum())


def empirical_optimum(X, Y, width: int) -> float:
    """min over U (n₂×n₁), V (n₀×n₁) of the empirical risk ‖Y − UVᵀX‖²_F/m, n₁ = ``width``:
    (‖Y − YP_X‖²_F + Σ_{i>n₁} σᵢ(YP_X)²)/m with P_X = X⁺X the projector onto the row space of X
    (Eckart–Young); valid for a singular Σxx too, where the key matrix of the moments does not apply."""
    X, Y = checks.matrix(X, "X"), checks.matrix(Y, "Y")
    width = checks.integer(width, "width")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must hold the same number of columns, got {X.shape} and {Y.shape}")
    fitted = Y @ np.linalg.pinv(X) @ X
    tail = np.linalg.svd(fitted, compute_uv=False)[width:]
    return (np.sum((Y - fitted) ** 2) + np.sum(tail**2)) / X.shape[1]


def deep_risk(moments, layers) -> float:
    """R(W₁, …, W_L) = tr(Σyy − 2ΣyxPᵀ + PΣxxPᵀ) with P = W_L⋯W₁, W_l ∈ ℝ^{n_l×n_{l−1}}
    (Vidal et al. 2022, Theorem 1.4)."""
    Sxx, Sxy, Syy = check_moments(moments)
    layers, _ = check_layers(layers)
    (n0, n2) = Sxy.shape
    if layers[0].shape[1] != n0 or layers[-1].shape[0] != n2:
        raise ValueError(f"layers must map {n0} inputs to {n2} outputs, got layers[0] {layers[0].shape} and "
                         f"layers[-1] {layers[-1].shape}")
    P = reduce(lambda product, W: W @ product, layers)
    return float(np.trace(Syy) - 2 * np.sum(Sxy.T * P) + np.sum((P @ Sxx) * P))


def deep_flat_risk(moments, sizes):
    """The deep risk as a torch function of one flat vector x = (vec W₁, …, vec W_L) (row-major),
    W_l of shape (sizes[l], sizes[l−1]), for the optimizers of :mod:`dropnb.optimize`.
    Returns (objective, unpack) where unpack(x) gives the numpy layers [W₁, …, W_L]."""
    Sxx, Sxy, Syy = check_moments(moments)
    sizes = [checks.integer(n, f"sizes[{i}]") for i, n in enumerate(sizes)]
    if len(sizes) < 3 or sizes[0] != Sxy.shape[0] or sizes[-1] != Sxy.shape[1]:
        raise ValueError(f"sizes must be (n0, n1, …, nL) with L ≥ 2, n0 = {Sxy.shape[0]} and nL = {Sxy.shape[1]}, "
                         f"got {tuple(sizes)}")
    shapes = list(zip(sizes[1:], sizes[:-1]))
    ends = np.cumsum([rows * cols for rows, cols in shapes])
    Sxx_t, Syx_t, trace = torch.tensor(Sxx), torch.tensor(Sxy.T), float(np.trace(Syy))

    def split(x):
        return [x[end - rows * cols:end].reshape(rows, cols) for end, (rows, cols) in zip(ends, shapes)]

    def objective(x: torch.Tensor) -> torch.Tensor:
        P = reduce(lambda product, W: W @ product, split(x))
        return trace - 2 * (Syx_t * P).sum() + ((P @ Sxx_t) * P).sum()

    def unpack(x: np.ndarray) -> list[np.ndarray]:
        return split(np.asarray(x))

    return objective, unpack


def planted_moments(n0: int, eigenvalues, rng: np.random.Generator) -> Moments:
    """Population moments whose key matrix Σ = ΣyxΣxx⁻¹Σxy has the given eigenvalues (n₂ of them,
    positive) and Haar eigenvectors Q: Σxx = AAᵀ/n₀ + I/2 with A Gaussian, Σxy = Σxx^{1/2}W diag(√λ)Qᵀ
    with W ∈ ℝ^{n₀×n₂} orthonormal, and Σyy = Σ + I, so that the joint second moment is positive
    definite (its Schur complement Σyy − Σ is I). Requires n₀ ≥ n₂."""
    values = checks.real_array(eigenvalues, "eigenvalues")
    n0, rng = checks.integer(n0, "n0"), checks.generator(rng, "rng")
    if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"eigenvalues must be a non-empty 1-d array of positive numbers, got {eigenvalues!r}")
    if values.size > n0:
        raise ValueError(f"n0 must be at least the number of eigenvalues {values.size}, got {n0}")
    A = rng.standard_normal((n0, n0))
    Sxx = A @ A.T / n0 + np.eye(n0) / 2
    w, E = np.linalg.eigh(Sxx)
    W = np.linalg.qr(rng.standard_normal((n0, values.size)))[0]
    Q = np.linalg.qr(rng.standard_normal((values.size, values.size)))[0]
    Sxy = (E * np.sqrt(w)) @ E.T @ W @ (np.sqrt(values)[:, None] * Q.T)
    Syy = (Q * values) @ Q.T + np.eye(values.size)
    return (Sxx + Sxx.T) / 2, Sxy, (Syy + Syy.T) / 2


def balanced_scalar_steps(depth: int, scales, step: float, sxx: float, syx: float, level: float,
                          max_steps: int = 10_000_000) -> np.ndarray:
    """Gradient-descent steps for the scalar network w_L⋯w₁ (risk σyy − 2σyx p + σxx p², p = ∏w_l)
    started at the balanced point w_l = s to reach w ≥ ``level``, for every s in ``scales``.
    Balance is kept by the iteration, which is w ← w + 2η(σyx − σxx w^L)w^{L−1}; the risk drops
    while w^L < σyx/σxx, so ``level`` must lie in (max s, (σyx/σxx)^{1/L})."""
    depth = checks.integer(depth, "depth")
    s = checks.real_array(scales, "scales")
    if s.ndim != 1 or s.size == 0 or not np.all((s > 0) & np.isfinite(s)):
        raise ValueError(f"scales must be a non-empty 1-d array of positive numbers, got {scales!r}")
    step, sxx, syx = checks.positive(step, "step"), checks.positive(sxx, "sxx"), checks.positive(syx, "syx")
    level, max_steps = checks.number(level, "level"), checks.integer(max_steps, "max_steps")
    if not (s.max() < level < (syx / sxx) ** (1 / depth)):
        raise ValueError(f"level must lie in (max(scales), (syx/sxx)^(1/depth)), got {level!r}")
    w, steps = s.copy(), np.zeros(s.size, dtype=np.int64)
    while np.any(w < level):
        if steps.max() >= max_steps:
            raise ValueError(f"some scale needs more than max_steps = {max_steps} steps")
        moving = w < level
        w[moving] += 2 * step * (syx - sxx * w[moving] ** depth) * w[moving] ** (depth - 1)
        steps[moving] += 1
    return steps
