"""Matrix factorization with weight decay (and dropout) of variable width: the variational nuclear
norm, singular value thresholding, global-optimality certificates and the column-adding algorithm.

Conventions (Vidal et al. 2022, §1.4.1, with the ½ of their (1.33)): Y ∈ ℝ^{n₂×n₀}, factors
U ∈ ℝ^{n₂×n₁} with columns uᵢ and V ∈ ℝ^{n₀×n₁} with columns vᵢ, Z = UVᵀ, residual R = Y − UVᵀ.
The objective with weight decay λ ≥ 0 and dropout weight μ ≥ 0 is

    F(U, V) = ½‖Y − UVᵀ‖²_F + (λ/2)(‖U‖²_F + ‖V‖²_F) + μ Σᵢ ‖uᵢ‖²‖vᵢ‖²,
    ∇_U F = −RV + λU + 2μ U Diag(‖vᵢ‖²),   ∇_V F = −RᵀU + λV + 2μ V Diag(‖uᵢ‖²);

μ = 0 is (1.33); λ = 0 is Bernoulli dropout on the hidden units with retain probability ρ and
μ = (1 − ρ)/(2ρ) (½ of the objective of :mod:`dropnb.linear` with its rate 2μ).

*Variational form* (1.34) (Srebro et al. 2004): ‖Z‖_* = min over factorizations Z = UVᵀ of any
width of ½(‖U‖²_F + ‖V‖²_F), attained by the balanced factors AΣ^{1/2}, BΣ^{1/2} of the SVD
Z = AΣBᵀ. With Cauchy–Schwarz over the r ≤ n₁ units with ‖uᵢ‖‖vᵢ‖ ≠ 0,
Σᵢ‖uᵢ‖²‖vᵢ‖² ≥ (Σᵢ‖uᵢ‖‖vᵢ‖)²/r ≥ ‖Z‖²_*/r, so every F is bounded below by a convex function of Z
alone ((1.36) for μ = 0):

    F(U, V) ≥ P(Z) = ½‖Y − Z‖²_F + λ‖Z‖_* + (μ/r)‖Z‖²_*.

Its Fenchel dual is D(Q) = ⟨Q, Y⟩ − ½‖Q‖²_F − Ω*(Q) with Ω*(Q) = r(‖Q‖₂ − λ)²₊/(4μ) for μ > 0 and
the indicator of ‖Q‖₂ ≤ λ for μ = 0, so F(U, V) − min F ≤ F(U, V) − D(Q) for every Q (weak
duality); :func:`duality_gap` uses Q = R, scaled into ‖Q‖₂ ≤ λ when μ = 0.

For μ = 0 the convex problem (1.35) is solved by singular value thresholding,
D_λ(Y) = A(Σ − λI)₊Bᵀ (thin SVD Y = AΣBᵀ), with value Σᵢ h(σᵢ), h(σ) = λσ − λ²/2 for σ > λ and σ²/2
otherwise. Over factors of width k the minimum of F keeps the top k shrunk values (the best
rank-k point): Σ_{i≤k} h(σᵢ) + Σ_{i>k} σᵢ²/2, attained by A(Σ − λI)₊^{1/2}, B(Σ − λI)₊^{1/2}
truncated to k columns. Corollary 1.6: (U, V) is a global minimum iff ⟨R, UVᵀ⟩ = (λ/2)(‖U‖²_F + ‖V‖²_F)
(true at every first-order point) and σ_max(R) ≤ λ (the polar problem (1.42)).

Appending a column (√ε u, √ε v) with unit u, v and uᵀRv = σ changes F by exactly

    ΔF(ε) = ε(λ − σ) + ε²(½ + μ),

so with (u, v) the top singular pair of R and σ = σ_max(R) > λ the choice ε = (σ − λ)/(1 + 2μ)
lowers F by (σ − λ)²/(2(1 + 2μ)). The meta-algorithm (Vidal et al. 2022, §1.4.1, after Haeffele
and Vidal) alternates gradient descent at fixed width with this certificate-or-append step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .rounding import roundoff_tolerance
from .deep import nuclear_norm
from .linear import check_matrix, check_rate
from .masks import check_number, check_width
from .shrinkage import check_spectrum

__all__ = [
    "nuclear_norm", "singular_value_threshold", "convex_objective", "objective", "gradient",
    "flat_objective", "balanced_factors", "optimal_factors", "optimal_value", "squared_nuclear_threshold",
    "top_singular_triple", "Certificate", "certificate", "spectral_rounding", "value_rounding", "duality_gap",
    "append_column", "append_change", "split_units", "expose_null_columns", "Descent", "gradient_descent",
    "Stage", "MetaRun", "meta_algorithm",
]


# ---------------------------------------------------------------------------------------------
# validation helpers


def _check_stack(value, name: str) -> np.ndarray:
    """A finite float64 array with at least two dimensions (a matrix or a batch of matrices)."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim < 2:
        raise ValueError(f"{name} must be a matrix or a batch of matrices, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array


def _check_problem(Y, U, V) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y (n₂×n₀) and factors U (…, n₂, n₁), V (…, n₀, n₁) with matching shapes and batch."""
    Y, U, V = check_matrix(Y, "Y"), _check_stack(U, "U"), _check_stack(V, "V")
    if U.shape[-2] != Y.shape[0]:
        raise ValueError(f"U must have {Y.shape[0]} rows to match Y {Y.shape}, got {U.shape}")
    if V.shape[-2] != Y.shape[1]:
        raise ValueError(f"V must have {Y.shape[1]} rows to match Y {Y.shape}, got {V.shape}")
    if U.shape[-1] != V.shape[-1] or U.shape[:-2] != V.shape[:-2]:
        raise ValueError(f"U and V must have the same width and batch shape, got {U.shape} and {V.shape}")
    return Y, U, V


def _check_weight(value, name: str, batch: tuple[int, ...]) -> np.ndarray:
    """A weight (λ or μ): a finite number ≥ 0, or an array of them broadcastable to ``batch``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a finite number ≥ 0, got {value!r}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number ≥ 0, got {value!r}") from None
    if not (np.all(np.isfinite(array)) and np.all(array >= 0)):
        raise ValueError(f"{name} must be finite and ≥ 0, got {value!r}")
    try:
        return np.broadcast_to(array, batch)
    except ValueError:
        raise ValueError(f"{name} must be a number or broadcastable to the batch shape {batch}, "
                         f"got shape {array.shape}") from None


def _nonnegative(value, name: str) -> float:
    return check_number(value, name, "a finite number ≥ 0", lambda x: x >= 0)


def _positive(value, name: str) -> float:
    return check_number(value, name, "a finite number > 0", lambda x: x > 0)


def _scalar(x: np.ndarray):
    """A float for an unbatched result, the array otherwise."""
    return float(x) if np.ndim(x) == 0 else x


def _sq(A: np.ndarray) -> np.ndarray:
    return np.sum(A**2, axis=(-2, -1))


# ---------------------------------------------------------------------------------------------
# the convex problem


def singular_value_threshold(Y, lam: float) -> np.ndarray:
    """D_λ(Y) = A(Σ − λI)₊Bᵀ from the thin SVD Y = AΣBᵀ: the minimizer of ½‖Y − Z‖²_F + λ‖Z‖_*."""
    Y, lam = check_matrix(Y, "Y"), check_rate(lam)
    A, s, Bt = np.linalg.svd(Y, full_matrices=False)
    return (A * np.maximum(s - lam, 0.0)) @ Bt


def convex_objective(Y, Z, lam: float, mu: float = 0.0, width: int | None = None):
    """P(Z) = ½‖Y − Z‖²_F + λ‖Z‖_* + (μ/width)‖Z‖²_* ((1.35) for μ = 0; ``width`` needed when μ > 0);
    Z may be a batch (…, n₂, n₀)."""
    Y, Z = check_matrix(Y, "Y"), _check_stack(Z, "Z")
    if Z.shape[-2:] != Y.shape:
        raise ValueError(f"Z must have the shape of Y {Y.shape}, got {Z.shape}")
    lam, mu = _nonnegative(lam, "lam"), _nonnegative(mu, "mu")
    nuclear = np.linalg.svd(Z, compute_uv=False).sum(-1)
    value = 0.5 * _sq(Y - Z) + lam * nuclear
    if mu > 0:
        if width is None:
            raise ValueError("width is required when mu > 0")
        value = value + mu / check_width(width) * nuclear**2
    return _scalar(value)


# ---------------------------------------------------------------------------------------------
# the factorized objective (batched over leading dimensions)


def objective(Y, U, V, lam, mu=0.0):
    """F(U, V) = ½‖Y − UVᵀ‖²_F + (λ/2)(‖U‖²_F + ‖V‖²_F) + μ Σᵢ‖uᵢ‖²‖vᵢ‖², per batch entry."""
    Y, U, V = _check_problem(Y, U, V)
    lam, mu = _check_weight(lam, "lam", U.shape[:-2]), _check_weight(mu, "mu", U.shape[:-2])
    value = 0.5 * _sq(Y - U @ np.swapaxes(V, -1, -2)) + 0.5 * lam * (_sq(U) + _sq(V))
    value = value + mu * np.sum(np.sum(U**2, axis=-2) * np.sum(V**2, axis=-2), axis=-1)
    return _scalar(value)


def _gradient(Y, U, V, lam, mu):
    residual = Y - U @ np.swapaxes(V, -1, -2)
    lam, mu = lam[..., None, None], mu[..., None, None]
    grad_u = -residual @ V + lam * U + 2 * mu * U * np.sum(V**2, axis=-2, keepdims=True)
    grad_v = -np.swapaxes(residual, -1, -2) @ U + lam * V + 2 * mu * V * np.sum(U**2, axis=-2, keepdims=True)
    return grad_u, grad_v


def gradient(Y, U, V, lam, mu=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(∇_U F, ∇_V F) = (−RV + λU + 2μU Diag(‖vᵢ‖²), −RᵀU + λV + 2μV Diag(‖uᵢ‖²)), R = Y − UVᵀ; batched."""
    Y, U, V = _check_problem(Y, U, V)
    batch = U.shape[:-2]
    return _gradient(Y, U, V, _check_weight(lam, "lam", batch), _check_weight(mu, "mu", batch))


def flat_objective(Y, width: int, lam: float, mu: float = 0.0):
    """F as a torch function of x = (vec U, vec V) (row-major), for autograd Hessians and optimizers;
    returns (objective, unpack) with unpack(x) = (U, V) as numpy arrays."""
    Y, r = check_matrix(Y, "Y"), check_width(width)
    lam, mu = _nonnegative(lam, "lam"), _nonnegative(mu, "mu")
    (n2, n0), split = Y.shape, Y.shape[0] * r
    Y_t = torch.tensor(Y)

    def fun(x: torch.Tensor) -> torch.Tensor:
        U, V = x[:split].reshape(n2, r), x[split:].reshape(n0, r)
        penalty = ((U**2).sum(0) * (V**2).sum(0)).sum()
        return 0.5 * ((Y_t - U @ V.T) ** 2).sum() + 0.5 * lam * ((U**2).sum() + (V**2).sum()) + mu * penalty

    def unpack(x) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=np.float64)
        return x[:split].reshape(n2, r), x[split:].reshape(n0, r)

    return fun, unpack


# ---------------------------------------------------------------------------------------------
# closed forms


def _rank(s: np.ndarray, shape: tuple[int, int]) -> int:
    """Numerical rank: singular values above max(shape)·ε·σ₁."""
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s > max(shape) * np.finfo(np.float64).eps * s[0]))


def balanced_factors(Z, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """U = AΣ^{1/2}, V = BΣ^{1/2} from the thin SVD Z = AΣBᵀ, zero-padded or cut to ``width`` columns
    (default min(n₂, n₀)); then UVᵀ = Z and ½(‖U‖²_F + ‖V‖²_F) = ‖Z‖_* (1.34). Needs width ≥ rank Z."""
    Z = check_matrix(Z, "Z")
    A, s, Bt = np.linalg.svd(Z, full_matrices=False)
    width = len(s) if width is None else check_width(width)
    rank = _rank(s, Z.shape)
    if rank > width:
        raise ValueError(f"width must be at least rank Z = {rank}, got {width}")
    k = min(width, len(s))
    U, V = np.zeros((Z.shape[0], width)), np.zeros((Z.shape[1], width))
    U[:, :k], V[:, :k] = A[:, :k] * np.sqrt(s[:k]), Bt[:k].T * np.sqrt(s[:k])
    return U, V


def optimal_factors(Y, lam: float, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The global minimizer of F (μ = 0) over factors of ``width`` columns (default min(n₂, n₀), the
    thin SVD): A(Σ − λI)₊^{1/2}, B(Σ − λI)₊^{1/2} truncated to the top ``width`` pairs, zero-padded.
    For width ≥ #{σᵢ > λ} its product is D_λ(Y) (Vidal et al. 2022, p. 1.4.1 after Corollary 1.6)."""
    Y, lam = check_matrix(Y, "Y"), check_rate(lam)
    A, s, Bt = np.linalg.svd(Y, full_matrices=False)
    width = len(s) if width is None else check_width(width)
    k = min(width, len(s))
    root = np.sqrt(np.maximum(s[:k] - lam, 0.0))
    U, V = np.zeros((Y.shape[0], width)), np.zeros((Y.shape[1], width))
    U[:, :k], V[:, :k] = A[:, :k] * root, Bt[:k].T * root
    return U, V


def optimal_value(spectrum, lam: float, width: int | None = None) -> float:
    """min F over width-k factors (μ = 0): Σ_{i≤k} h(σᵢ) + Σ_{i>k} σᵢ²/2, h(σ) = λσ − λ²/2 if σ > λ
    else σ²/2; k = ``width`` (all values when omitted: the optimum of (1.33) and of (1.35))."""
    s, lam = check_spectrum(spectrum), check_rate(lam)
    k = len(s) if width is None else min(check_width(width), len(s))
    head = np.where(s[:k] > lam, lam * s[:k] - lam**2 / 2, s[:k] ** 2 / 2)
    return float(head.sum() + np.sum(s[k:] ** 2) / 2)


def squared_nuclear_threshold(spectrum, mu: float, width: int) -> tuple[int, float]:
    """(k, t) for the minimizer D_t(Y) of ½‖Y − Z‖²_F + (μ/r)‖Z‖²_* over all Z (no rank limit):
    t = (2μ/r)S_k/(1 + 2μk/r) with S_k = σ₁ + … + σ_k and k = max{j : σⱼ > tⱼ}, so that
    t = (2μ/r)‖D_t(Y)‖_*. The width r binds (the dropout optimum of width r is not D_t(Y)) iff k > r."""
    s, r = check_spectrum(spectrum), check_width(width)
    mu = _positive(mu, "mu")
    c = 2 * mu / r
    j = np.arange(1, len(s) + 1)
    t = c * np.cumsum(s) / (1 + c * j)
    above = np.flatnonzero(s > t)
    if above.size == 0:
        return 0, 0.0
    k = int(above[-1]) + 1
    return k, float(t[k - 1])


# ---------------------------------------------------------------------------------------------
# certificates


def top_singular_triple(R) -> tuple[float, np.ndarray, np.ndarray]:
    """(σ_max, u, v): the largest singular value of R and its unit singular vectors, the solution of
    the polar problem max uᵀRv/(‖u‖²+‖v‖²) = σ_max/2 (at ‖u‖ = ‖v‖) (1.42)."""
    R = check_matrix(R, "R")
    A, s, Bt = np.linalg.svd(R, full_matrices=False)
    return float(s[0]), A[:, 0], Bt[0]


@dataclass(frozen=True)
class Certificate:
    """Corollary 1.6 at (U, V): ``sigma_max`` = σ_max(R) with its singular vectors ``left``, ``right``
    (the polar direction), ``scaling_residual`` = ⟨R, UVᵀ⟩ − (λ/2)(‖U‖²_F + ‖V‖²_F) (condition (i)),
    ``gradient_norm`` ‖∇F‖ and ``rounding``, the rounding allowance of :func:`spectral_rounding`."""

    sigma_max: float
    left: np.ndarray
    right: np.ndarray
    scaling_residual: float
    gradient_norm: float
    rounding: float

    def holds(self, lam: float, relative: float) -> bool:
        """Condition (ii) as a test: σ_max ≤ λ(1 + ``relative``); never a strict σ_max < λ, since
        σ_max = λ exactly at every global minimum where some σᵢ(Y) ≥ λ."""
        return self.sigma_max <= lam * (1 + relative)


def certificate(Y, U, V, lam: float) -> Certificate:
    """The quantities of Corollary 1.6 and of the polar problem at one point (U, V) of (1.33)."""
    Y, U, V = _check_problem(Y, U, V)
    if U.ndim != 2:
        raise ValueError(f"certificate takes one point, got U of shape {U.shape}")
    lam = check_rate(lam)
    Z = U @ V.T
    sigma, left, right = top_singular_triple(Y - Z)
    grad_u, grad_v = gradient(Y, U, V, lam)
    return Certificate(
        sigma_max=sigma, left=left, right=right,
        scaling_residual=float(np.sum((Y - Z) * Z) - lam / 2 * (_sq(U) + _sq(V))),
        gradient_norm=float(np.sqrt(_sq(grad_u) + _sq(grad_v))),
        rounding=spectral_rounding(Y, U, V),
    )


def spectral_rounding(Y, U, V):
    """γₙ(‖Y‖_F + ‖U‖_F‖V‖_F), n = 10·n₂n₀·max(n₁, 1): a rounding bound on forming R = Y − UVᵀ and on
    each singular value computed from it (backward-stable SVD); batched."""
    Y, U, V = _check_problem(Y, U, V)
    n = 10 * Y.shape[0] * Y.shape[1] * max(U.shape[-1], 1)
    return _scalar(roundoff_tolerance(n) * (np.linalg.norm(Y) + np.sqrt(_sq(U) * _sq(V))))


def value_rounding(Y, U, V, lam, mu=0.0):
    """γₙ[(‖Y‖_F + ‖U‖_F‖V‖_F)² + λ(‖U‖²_F + ‖V‖²_F) + μ‖U‖²_F‖V‖²_F], n = 10·n₂n₀·max(n₁, 1): a
    rounding bound on one evaluation of F; batched."""
    Y, U, V = _check_problem(Y, U, V)
    batch = U.shape[:-2]
    lam, mu = _check_weight(lam, "lam", batch), _check_weight(mu, "mu", batch)
    n = 10 * Y.shape[0] * Y.shape[1] * max(U.shape[-1], 1)
    size = (np.linalg.norm(Y) + np.sqrt(_sq(U) * _sq(V))) ** 2 + lam * (_sq(U) + _sq(V)) + mu * _sq(U) * _sq(V)
    return _scalar(roundoff_tolerance(n) * size)


def duality_gap(Y, U, V, lam, mu=0.0):
    """F(U, V) − D(Q), an upper bound on F(U, V) − min F over factors with as many non-zero units,
    with the dual point Q = R (μ > 0) or Q = R·min(1, λ/σ_max(R)) (μ = 0). The width in Ω* is the
    number r of units with ‖uᵢ‖‖vᵢ‖ ≠ 0 (Cauchy–Schwarz needs only those), so zero-padded columns do
    not loosen the bound. Zero at a global minimum of (1.33), and at a dropout optimum of width r
    whenever that width does not bind. Batched."""
    Y, U, V = _check_problem(Y, U, V)
    batch = U.shape[:-2]
    lam, mu = _check_weight(lam, "lam", batch), _check_weight(mu, "mu", batch)
    width = np.maximum(np.count_nonzero(np.sum(U**2, axis=-2) * np.sum(V**2, axis=-2), axis=-1), 1)
    R = Y - U @ np.swapaxes(V, -1, -2)
    sigma = np.linalg.svd(R, compute_uv=False)[..., 0]
    dropout = mu > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(dropout, 1.0, np.where(sigma > lam, lam / sigma, 1.0))
        conjugate = np.where(dropout, width * np.maximum(sigma - lam, 0.0) ** 2 / (4 * np.where(dropout, mu, 1.0)), 0.0)
    Q = R * scale[..., None, None]
    dual = np.sum(Q * Y, axis=(-2, -1)) - 0.5 * _sq(Q) - conjugate
    return _scalar(objective(Y, U, V, lam, mu) - dual)


# ---------------------------------------------------------------------------------------------
# moves between widths


def append_column(U, V, u, v, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """[U, √ε u] and [V, √ε v]: one more hidden unit, so UVᵀ gains εuvᵀ."""
    U, V = check_matrix(U, "U"), check_matrix(V, "V")
    u, v = check_matrix(u, "u", ndim=1), check_matrix(v, "v", ndim=1)
    if u.shape != (U.shape[0],) or v.shape != (V.shape[0],):
        raise ValueError(f"u and v must have {U.shape[0]} and {V.shape[0]} entries, got {u.shape} and {v.shape}")
    root = np.sqrt(_nonnegative(epsilon, "epsilon"))
    return np.column_stack([U, root * u]), np.column_stack([V, root * v])


def append_change(sigma: float, epsilon: float, lam: float = 0.0, mu: float = 0.0) -> float:
    """ΔF(ε) = ε(λ − σ) + ε²(½ + μ): the exact change of F when a column (√ε u, √ε v) with unit u, v
    and uᵀRv = σ is appended (weight decay λ, dropout μ)."""
    sigma = check_number(sigma, "sigma")
    epsilon, lam, mu = _nonnegative(epsilon, "epsilon"), _nonnegative(lam, "lam"), _nonnegative(mu, "mu")
    return epsilon * (lam - sigma) + epsilon**2 * (0.5 + mu)


def split_units(U, V, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unit (uᵢ, vᵢ) replaced by ``copies`` units (uᵢ/√k, vᵢ/√k): UVᵀ and the weight decay are
    unchanged, the dropout penalty Σ‖uᵢ‖²‖vᵢ‖² is divided by k."""
    U, V = _check_stack(U, "U"), _check_stack(V, "V")
    if U.shape[-1] != V.shape[-1]:
        raise ValueError(f"U and V must have the same width, got {U.shape} and {V.shape}")
    k = check_width(copies, "copies")
    return np.repeat(U, k, axis=-1) / np.sqrt(k), np.repeat(V, k, axis=-1) / np.sqrt(k)


def expose_null_columns(U, V) -> tuple[np.ndarray, np.ndarray]:
    """(UW, VW) with W the right singular vectors of the stacked [U; V] (columns by decreasing norm):
    the same product and norms, and a column that vanishes for every common null vector Ue = Ve = 0."""
    U, V = check_matrix(U, "U"), check_matrix(V, "V")
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same width, got {U.shape} and {V.shape}")
    _, _, Wt = np.linalg.svd(np.vstack([U, V]), full_matrices=True)
    return U @ Wt.T, V @ Wt.T


# ---------------------------------------------------------------------------------------------
# algorithms


@dataclass(frozen=True)
class Descent:
    """Where gradient descent ended: factors ``U``, ``V`` (batched as given), ``steps`` taken and
    final ``gradient_norm`` per run, ``converged`` (‖∇F‖ ≤ tol), and ``trace`` (checkpoints × runs)
    of F every ``trace_every`` steps (empty if not asked for)."""

    U: np.ndarray
    V: np.ndarray
    steps: np.ndarray
    gradient_norm: np.ndarray
    converged: np.ndarray
    trace: np.ndarray


def gradient_descent(Y, U0, V0, lam, mu=0.0, *, step: float, tol: float, max_steps: int,
                     trace_every: int | None = None) -> Descent:
    """U ← U − η∇_U F, V ← V − η∇_V F for a batch of runs (leading dimensions of U0, V0; λ and μ may
    differ per run), each frozen once ‖∇F‖ ≤ ``tol``. Zero columns stay exactly zero (their gradient
    vanishes), so narrower problems can share a batch as zero-padded columns."""
    Y, U, V = _check_problem(Y, U0, V0)
    batch = U.shape[:-2]
    lam, mu = _check_weight(lam, "lam", batch), _check_weight(mu, "mu", batch)
    step, tol = _positive(step, "step"), _positive(tol, "tol")
    max_steps = check_width(max_steps, "max_steps")
    if trace_every is not None:
        trace_every = check_width(trace_every, "trace_every")
    U, V = U.copy(), V.copy()
    steps = np.zeros(batch, dtype=int)
    active = np.ones(batch, dtype=bool)
    trace = []
    for t in range(max_steps + 1):
        if trace_every is not None and t % trace_every == 0:
            trace.append(objective(Y, U, V, lam, mu))
        grad_u, grad_v = _gradient(Y, U, V, lam, mu)
        norm = np.sqrt(_sq(grad_u) + _sq(grad_v))
        active &= norm > tol
        if not active.any() or t == max_steps:
            break
        move = (step * active)[..., None, None]
        U -= move * grad_u
        V -= move * grad_v
        steps += active
    return Descent(U=U, V=V, steps=steps, gradient_norm=norm, converged=norm <= tol,
                   trace=np.array(trace) if trace else np.empty((0,) + batch))


@dataclass(frozen=True)
class Stage:
    """One stage of the meta-algorithm: its ``width``, the ``objective`` F and ``sigma_max`` σ_max(R)
    after descent, the ``steps`` descent took and whether it ``converged``, and the ``epsilon`` of
    the column appended after it (None at the certified last stage), the factors ``U``, ``V`` after
    descent, and the ``trace`` of F during descent (every ``trace_every`` steps; empty if not asked for)."""

    width: int
    objective: float
    sigma_max: float
    steps: int
    converged: bool
    epsilon: float | None = None
    U: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    V: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    trace: np.ndarray = field(default_factory=lambda: np.empty(0))


@dataclass(frozen=True)
class MetaRun:
    """The meta-algorithm's end point ``U``, ``V``, its ``stages`` and whether it was ``certified``."""

    U: np.ndarray
    V: np.ndarray
    stages: list[Stage] = field(default_factory=list)
    certified: bool = False


def meta_algorithm(Y, lam: float, U0, V0, *, step: float, gradient_tol: float, certificate_tol: float,
                   epsilon: float | None = None, max_stages: int = 50, max_steps: int = 100_000,
                   trace_every: int | None = None) -> MetaRun:
    """Vidal et al. (2022, §1.4.1): (i) gradient descent at fixed width to ‖∇F‖ ≤ ``gradient_tol``;
    (ii) stop if σ_max(R) ≤ λ(1 + ``certificate_tol``); else append the top singular pair (u, v) of R as
    (√ε u, √ε v), ε = ``epsilon`` or, by default, the exact line minimizer σ_max − λ, and repeat."""
    Y, U, V = _check_problem(Y, U0, V0)
    if U.ndim != 2:
        raise ValueError(f"meta_algorithm runs one problem, got U of shape {U.shape}")
    lam = _positive(lam, "lam")
    certificate_tol = _nonnegative(certificate_tol, "certificate_tol")
    if epsilon is not None:
        epsilon = _positive(epsilon, "epsilon")
    max_stages = check_width(max_stages, "max_stages")
    stages = []
    for _ in range(max_stages):
        run = gradient_descent(Y, U, V, lam, step=step, tol=gradient_tol, max_steps=max_steps,
                               trace_every=trace_every)
        U, V = run.U, run.V
        cert = certificate(Y, U, V, lam)
        stage = dict(width=U.shape[1], objective=objective(Y, U, V, lam), sigma_max=cert.sigma_max,
                     steps=int(run.steps), converged=bool(run.converged), U=U, V=V, trace=run.trace)
        if cert.holds(lam, certificate_tol):
            stages.append(Stage(**stage))
            return MetaRun(U=U, V=V, stages=stages, certified=True)
        eps = cert.sigma_max - lam if epsilon is None else epsilon
        stages.append(Stage(**stage, epsilon=eps))
        U, V = append_column(U, V, cert.left, cert.right, eps)
    return MetaRun(U=U, V=V, stages=stages, certified=False)
