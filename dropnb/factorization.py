"""Matrix factorization with weight decay (and dropout) of variable width: the variational nuclear
norm, singular value thresholding, global-optimality certificates and the column-adding algorithm.

Conventions (Vidal et al. 2022, §1.4.1, with the ½ of their (1.33)): Y ∈ ℝ^{n₂×n₀}, factors
U ∈ ℝ^{n₂×n₁} with columns uᵢ and V ∈ ℝ^{n₀×n₁} with columns vᵢ, Z = UVᵀ, residual R = Y − UVᵀ.
The objective with weight decay λ ≥ 0 (``decay`` = λ, the weight decay) and dropout weight κ ≥ 0 is

    F(U, V) = ½‖Y − UVᵀ‖²_F + (λ/2)(‖U‖²_F + ‖V‖²_F) + κ Σᵢ ‖uᵢ‖²‖vᵢ‖²,
    ∇_U F = −RV + λU + 2κ U Diag(‖vᵢ‖²),   ∇_V F = −RᵀU + λV + 2κ V Diag(‖uᵢ‖²);

κ = 0 is (1.33); λ = 0 is Bernoulli dropout on the hidden units with retain probability θ and
κ = (1 − θ)/(2θ) (½ of the objective of :mod:`dropnb.linear` with its rate 2κ; the book keeps μ for
a mask's mean).

*Variational form* (1.34) (Srebro et al. 2004): ‖Z‖_* = min over factorizations Z = UVᵀ of any
width of ½(‖U‖²_F + ‖V‖²_F), attained by the balanced factors AΣ^{1/2}, BΣ^{1/2} of the SVD
Z = AΣBᵀ. With Cauchy–Schwarz over the r ≤ n₁ units with ‖uᵢ‖‖vᵢ‖ ≠ 0,
Σᵢ‖uᵢ‖²‖vᵢ‖² ≥ (Σᵢ‖uᵢ‖‖vᵢ‖)²/r ≥ ‖Z‖²_*/r, so every F is bounded below by a convex function of Z
alone ((1.36) for κ = 0):

    F(U, V) ≥ P(Z) = ½‖Y − Z‖²_F + λ‖Z‖_* + (κ/r)‖Z‖²_*.

Its Fenchel dual is D(Q) = ⟨Q, Y⟩ − ½‖Q‖²_F − Ω*(Q) with Ω*(Q) = r(‖Q‖₂ − λ)²₊/(4κ) for κ > 0 and
the indicator of ‖Q‖₂ ≤ λ for κ = 0, so F(U, V) − min F ≤ F(U, V) − D(Q) for every Q (weak
duality); :func:`duality_gap` uses Q = R, scaled into ‖Q‖₂ ≤ λ when κ = 0.

For κ = 0 the convex problem (1.35) is solved by singular value thresholding,
D_λ(Y) = A(Σ − λI)₊Bᵀ (thin SVD Y = AΣBᵀ), with value Σᵢ h(σᵢ), h(σ) = λσ − λ²/2 for σ > λ and σ²/2
otherwise. Over factors of width k the minimum of F keeps the top k shrunk values (the best
rank-k point): Σ_{i≤k} h(σᵢ) + Σ_{i>k} σᵢ²/2, attained by A(Σ − λI)₊^{1/2}, B(Σ − λI)₊^{1/2}
truncated to k columns. Corollary 1.6: (U, V) is a global minimum iff ⟨R, UVᵀ⟩ = (λ/2)(‖U‖²_F + ‖V‖²_F)
(true at every first-order point) and σ_max(R) ≤ λ (the polar problem (1.42)).

Appending a column (√ε u, √ε v) with unit u, v and uᵀRv = σ changes F by exactly

    ΔF(ε) = ε(λ − σ) + ε²(½ + κ),

so with (u, v) the top singular pair of R and σ = σ_max(R) > λ the choice ε = (σ − λ)/(1 + 2κ)
lowers F by (σ − λ)²/(2(1 + 2κ)). The meta-algorithm (Vidal et al. 2022, §1.4.1, after Haeffele
and Vidal) alternates gradient descent at fixed width with this certificate-or-append step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from . import checks
from .rounding import roundoff_tolerance
from .deep import nuclear_norm
from .engine import Run, Schedule, check_finite, descend
from .shrinkage import check_spectrum

__all__ = [
    "nuclear_norm", "singular_value_threshold", "convex_objective", "objective", "gradient",
    "flat_objective", "flat_point", "balanced_factors", "optimal_factors", "optimal_value", "squared_nuclear_threshold",
    "top_singular_triple", "PolarCertificate", "polar_certificate", "spectral_rounding", "value_rounding", "duality_gap",
    "append_column", "append_change", "split_units", "expose_null_columns", "gradient_descent",
    "Stage", "MetaRun", "meta_algorithm",
]


# ---------------------------------------------------------------------------------------------
# validation helpers


def _check_problem(Y, U, V, names: tuple[str, str] = ("U", "V")) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y (n₂×n₀) and factors U (…, n₂, n₁), V (…, n₀, n₁) with matching shapes and batch (named
    ``names`` in errors)."""
    u, v = names
    Y, U, V = checks.matrix(Y, "Y"), checks.matrix(U, u, batched=True), checks.matrix(V, v, batched=True)
    if U.shape[-2] != Y.shape[0]:
        raise ValueError(f"{u} must have {Y.shape[0]} rows to match Y {Y.shape}, got {U.shape}")
    if V.shape[-2] != Y.shape[1]:
        raise ValueError(f"{v} must have {Y.shape[1]} rows to match Y {Y.shape}, got {V.shape}")
    if U.shape[-1] != V.shape[-1] or U.shape[:-2] != V.shape[:-2]:
        raise ValueError(f"{u} and {v} must have the same width and batch shape, got {U.shape} and {V.shape}")
    return Y, U, V


def _scalar(x: np.ndarray):
    """A float for an unbatched result, the array otherwise."""
    return float(x) if np.ndim(x) == 0 else x


def _sq(A: np.ndarray) -> np.ndarray:
    return np.sum(A**2, axis=(-2, -1))


# ---------------------------------------------------------------------------------------------
# the convex problem


def singular_value_threshold(Y, decay: float) -> np.ndarray:
    """D_λ(Y) = A(Σ − λI)₊Bᵀ from the thin SVD Y = AΣBᵀ: the minimizer of ½‖Y − Z‖²_F + λ‖Z‖_*."""
    Y, decay = checks.matrix(Y, "Y"), checks.nonnegative(decay, "decay")
    A, s, Bt = np.linalg.svd(Y, full_matrices=False)
    return (A * np.maximum(s - decay, 0.0)) @ Bt


def convex_objective(Y, Z, decay: float, kappa: float = 0.0, width: int | None = None):
    """P(Z) = ½‖Y − Z‖²_F + λ‖Z‖_* + (κ/width)‖Z‖²_* ((1.35) for κ = 0; ``width`` needed when κ > 0);
    Z may be a batch (…, n₂, n₀)."""
    Y, Z = checks.matrix(Y, "Y"), checks.matrix(Z, "Z", batched=True)
    if Z.shape[-2:] != Y.shape:
        raise ValueError(f"Z must have the shape of Y {Y.shape}, got {Z.shape}")
    decay, kappa = checks.nonnegative(decay, "decay"), checks.nonnegative(kappa, "kappa")
    nuclear = np.linalg.svd(Z, compute_uv=False).sum(-1)
    value = 0.5 * _sq(Y - Z) + decay * nuclear
    if kappa > 0:
        if width is None:
            raise ValueError("width is required when kappa > 0")
        value = value + kappa / checks.integer(width, "width") * nuclear**2
    return _scalar(value)


# ---------------------------------------------------------------------------------------------
# the factorized objective (batched over leading dimensions)


def objective(Y, U, V, decay, kappa=0.0):
    """F(U, V) = ½‖Y − UVᵀ‖²_F + (λ/2)(‖U‖²_F + ‖V‖²_F) + κ Σᵢ‖uᵢ‖²‖vᵢ‖², per batch entry."""
    Y, U, V = _check_problem(Y, U, V)
    decay, kappa = checks.weights(decay, "decay", U.shape[:-2]), checks.weights(kappa, "kappa", U.shape[:-2])
    value = 0.5 * _sq(Y - U @ np.swapaxes(V, -1, -2)) + 0.5 * decay * (_sq(U) + _sq(V))
    value = value + kappa * np.sum(np.sum(U**2, axis=-2) * np.sum(V**2, axis=-2), axis=-1)
    return _scalar(value)


def _gradient(Y, U, V, decay, kappa):
    residual = Y - U @ np.swapaxes(V, -1, -2)
    decay, kappa = decay[..., None, None], kappa[..., None, None]
    grad_u = -residual @ V + decay * U + 2 * kappa * U * np.sum(V**2, axis=-2, keepdims=True)
    grad_v = -np.swapaxes(residual, -1, -2) @ U + decay * V + 2 * kappa * V * np.sum(U**2, axis=-2, keepdims=True)
    return grad_u, grad_v


def gradient(Y, U, V, decay, kappa=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(∇_U F, ∇_V F) = (−RV + λU + 2κU Diag(‖vᵢ‖²), −RᵀU + λV + 2κV Diag(‖uᵢ‖²)), R = Y − UVᵀ; batched."""
    Y, U, V = _check_problem(Y, U, V)
    batch = U.shape[:-2]
    return _gradient(Y, U, V, checks.weights(decay, "decay", batch), checks.weights(kappa, "kappa", batch))


def flat_objective(Y, width: int, decay: float, kappa: float = 0.0):
    """F as a torch function of x = (vec U, vec V) (row-major), for autograd Hessians and optimizers;
    returns (objective, unpack) with unpack(x) = (U, V) as numpy arrays."""
    Y, r = checks.matrix(Y, "Y"), checks.integer(width, "width")
    decay, kappa = checks.nonnegative(decay, "decay"), checks.nonnegative(kappa, "kappa")
    (n2, n0), split = Y.shape, Y.shape[0] * r
    Y_t = torch.tensor(Y)

    def fun(x: torch.Tensor) -> torch.Tensor:
        U, V = x[:split].reshape(n2, r), x[split:].reshape(n0, r)
        penalty = ((U**2).sum(0) * (V**2).sum(0)).sum()
        return 0.5 * ((Y_t - U @ V.T) ** 2).sum() + 0.5 * decay * ((U**2).sum() + (V**2).sum()) + kappa * penalty

    def unpack(x) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=np.float64)
        return x[:split].reshape(n2, r), x[split:].reshape(n0, r)

    return fun, unpack


def flat_point(U, V) -> np.ndarray:
    """x = (vec U, vec V), row-major: xᵢᵣ₊ⱼ = Uᵢⱼ, x_{n₂r + kr + j} = V_kj; the point that the functions of
    ``flat_objective`` take (the inverse of its ``unpack``)."""
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same width, got {U.shape} and {V.shape}")
    return np.concatenate([U.ravel(), V.ravel()])


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
    Z = checks.matrix(Z, "Z")
    A, s, Bt = np.linalg.svd(Z, full_matrices=False)
    width = len(s) if width is None else checks.integer(width, "width")
    rank = _rank(s, Z.shape)
    if rank > width:
        raise ValueError(f"width must be at least rank Z = {rank}, got {width}")
    k = min(width, len(s))
    U, V = np.zeros((Z.shape[0], width)), np.zeros((Z.shape[1], width))
    U[:, :k], V[:, :k] = A[:, :k] * np.sqrt(s[:k]), Bt[:k].T * np.sqrt(s[:k])
    return U, V


def optimal_factors(Y, decay: float, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The global minimizer of F (κ = 0) over factors of ``width`` columns (default min(n₂, n₀), the
    thin SVD): A(Σ − λI)₊^{1/2}, B(Σ − λI)₊^{1/2} truncated to the top ``width`` pairs, zero-padded.
    For width ≥ #{σᵢ > λ} its product is D_λ(Y) (Vidal et al. 2022, p. 1.4.1 after Corollary 1.6)."""
    Y, decay = checks.matrix(Y, "Y"), checks.nonnegative(decay, "decay")
    A, s, Bt = np.linalg.svd(Y, full_matrices=False)
    width = len(s) if width is None else checks.integer(width, "width")
    k = min(width, len(s))
    root = np.sqrt(np.maximum(s[:k] - decay, 0.0))
    U, V = np.zeros((Y.shape[0], width)), np.zeros((Y.shape[1], width))
    U[:, :k], V[:, :k] = A[:, :k] * root, Bt[:k].T * root
    return U, V


def optimal_value(spectrum, decay: float, width: int | None = None) -> float:
    """min F over width-k factors (κ = 0): Σ_{i≤k} h(σᵢ) + Σ_{i>k} σᵢ²/2, h(σ) = λσ − λ²/2 if σ > λ
    else σ²/2; k = ``width`` (all values when omitted: the optimum of (1.33) and of (1.35))."""
    s, decay = check_spectrum(spectrum), checks.nonnegative(decay, "decay")
    k = len(s) if width is None else min(checks.integer(width, "width"), len(s))
    head = np.where(s[:k] > decay, decay * s[:k] - decay**2 / 2, s[:k] ** 2 / 2)
    return float(head.sum() + np.sum(s[k:] ** 2) / 2)


def squared_nuclear_threshold(spectrum, kappa: float, width: int) -> tuple[int, float]:
    """(k, t) for the minimizer D_t(Y) of ½‖Y − Z‖²_F + (κ/r)‖Z‖²_* over all Z (no rank limit):
    t = (2κ/r)S_k/(1 + 2κk/r) with S_k = σ₁ + … + σ_k and k = max{j : σⱼ > tⱼ}, so that
    t = (2κ/r)‖D_t(Y)‖_*. The width r binds (the dropout optimum of width r is not D_t(Y)) iff k > r."""
    s, r = check_spectrum(spectrum), checks.integer(width, "width")
    kappa = checks.positive(kappa, "kappa")
    c = 2 * kappa / r
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
    R = checks.matrix(R, "R")
    A, s, Bt = np.linalg.svd(R, full_matrices=False)
    return float(s[0]), A[:, 0], Bt[0]


@dataclass(frozen=True)
class PolarCertificate:
    """Global optimality by the polar problem, Corollary 1.6 at (U, V): ``sigma_max`` = σ_max(R) with its singular vectors ``left``, ``right``
    (the polar direction), ``scaling_residual`` = ⟨R, UVᵀ⟩ − (λ/2)(‖U‖²_F + ‖V‖²_F) (condition (i)),
    ``gradient_norm`` ‖∇F‖ and ``rounding``, the rounding allowance of :func:`spectral_rounding`."""

    sigma_max: float
    left: np.ndarray
    right: np.ndarray
    scaling_residual: float
    gradient_norm: float
    rounding: float

    def holds(self, decay: float, relative: float) -> bool:
        """Condition (ii) as a test: σ_max ≤ λ(1 + ``relative``); never a strict σ_max < λ, since
        σ_max = λ exactly at every global minimum where some σᵢ(Y) ≥ λ."""
        return self.sigma_max <= checks.nonnegative(decay, "decay") * (1 + checks.nonnegative(relative, "relative"))


def polar_certificate(Y, U, V, decay: float) -> PolarCertificate:
    """The quantities of Corollary 1.6 and of the polar problem at one point (U, V) of (1.33)."""
    Y, U, V = _check_problem(Y, U, V)
    if U.ndim != 2:
        raise ValueError(f"certificate takes one point, got U of shape {U.shape}")
    decay = checks.nonnegative(decay, "decay")
    Z = U @ V.T
    sigma, left, right = top_singular_triple(Y - Z)
    grad_u, grad_v = gradient(Y, U, V, decay)
    return PolarCertificate(
        sigma_max=sigma, left=left, right=right,
        scaling_residual=float(np.sum((Y - Z) * Z) - decay / 2 * (_sq(U) + _sq(V))),
        gradient_norm=float(np.sqrt(_sq(grad_u) + _sq(grad_v))),
        rounding=spectral_rounding(Y, U, V),
    )


def spectral_rounding(Y, U, V):
    """γₙ(‖Y‖_F + ‖U‖_F‖V‖_F), n = 10·n₂n₀·max(n₁, 1): a rounding bound on forming R = Y − UVᵀ and on
    each singular value computed from it (backward-stable SVD); batched."""
    Y, U, V = _check_problem(Y, U, V)
    n = 10 * Y.shape[0] * Y.shape[1] * max(U.shape[-1], 1)
    return _scalar(roundoff_tolerance(n) * (np.linalg.norm(Y) + np.sqrt(_sq(U) * _sq(V))))


def value_rounding(Y, U, V, decay, kappa=0.0):
    """γₙ[(‖Y‖_F + ‖U‖_F‖V‖_F)² + λ(‖U‖²_F + ‖V‖²_F) + κ‖U‖²_F‖V‖²_F], n = 10·n₂n₀·max(n₁, 1): a
    rounding bound on one evaluation of F; batched."""
    Y, U, V = _check_problem(Y, U, V)
    batch = U.shape[:-2]
    decay, kappa = checks.weights(decay, "decay", batch), checks.weights(kappa, "kappa", batch)
    n = 10 * Y.shape[0] * Y.shape[1] * max(U.shape[-1], 1)
    size = (np.linalg.norm(Y) + np.sqrt(_sq(U) * _sq(V))) ** 2 + decay * (_sq(U) + _sq(V)) + kappa * _sq(U) * _sq(V)
    return _scalar(roundoff_tolerance(n) * size)


def duality_gap(Y, U, V, decay, kappa=0.0):
    """F(U, V) − D(Q), an upper bound on F(U, V) − min F over factors with as many non-zero units,
    with the dual point Q = R (κ > 0) or Q = R·min(1, λ/σ_max(R)) (κ = 0). The width in Ω* is the
    number r of units with ‖uᵢ‖‖vᵢ‖ ≠ 0 (Cauchy–Schwarz needs only those), so zero-padded columns do
    not loosen the bound. Zero at a global minimum of (1.33), and at a dropout optimum of width r
    whenever that width does not bind. Batched."""
    Y, U, V = _check_problem(Y, U, V)
    batch = U.shape[:-2]
    decay, kappa = checks.weights(decay, "decay", batch), checks.weights(kappa, "kappa", batch)
    width = np.maximum(np.count_nonzero(np.sum(U**2, axis=-2) * np.sum(V**2, axis=-2), axis=-1), 1)
    R = Y - U @ np.swapaxes(V, -1, -2)
    sigma = np.linalg.svd(R, compute_uv=False)[..., 0]
    dropout = kappa > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(dropout, 1.0, np.where(sigma > decay, decay / sigma, 1.0))
        conjugate = np.where(dropout, width * np.maximum(sigma - decay, 0.0) ** 2 / (4 * np.where(dropout, kappa, 1.0)), 0.0)
    Q = R * scale[..., None, None]
    dual = np.sum(Q * Y, axis=(-2, -1)) - 0.5 * _sq(Q) - conjugate
    return _scalar(objective(Y, U, V, decay, kappa) - dual)


# ---------------------------------------------------------------------------------------------
# moves between widths


def append_column(U, V, u, v, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """[U, √ε u] and [V, √ε v]: one more hidden unit, so UVᵀ gains εuvᵀ."""
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    u, v = checks.matrix(u, "u", ndim=1), checks.matrix(v, "v", ndim=1)
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same number of columns, got {U.shape} and {V.shape}")
    if u.shape != (U.shape[0],) or v.shape != (V.shape[0],):
        raise ValueError(f"u and v must have {U.shape[0]} and {V.shape[0]} entries, got {u.shape} and {v.shape}")
    root = np.sqrt(checks.nonnegative(epsilon, "epsilon"))
    return np.column_stack([U, root * u]), np.column_stack([V, root * v])


def append_change(sigma: float, epsilon: float, decay: float = 0.0, kappa: float = 0.0) -> float:
    """ΔF(ε) = ε(λ − σ) + ε²(½ + κ): the exact change of F when a column (√ε u, √ε v) with unit u, v
    and uᵀRv = σ is appended (weight decay λ, dropout κ)."""
    sigma = checks.number(sigma, "sigma")
    epsilon, decay, kappa = checks.nonnegative(epsilon, "epsilon"), checks.nonnegative(decay, "decay"), checks.nonnegative(kappa, "kappa")
    return epsilon * (decay - sigma) + epsilon**2 * (0.5 + kappa)


def split_units(U, V, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unit (uᵢ, vᵢ) replaced by ``copies`` units (uᵢ/√k, vᵢ/√k): UVᵀ and the weight decay are
    unchanged, the dropout penalty Σ‖uᵢ‖²‖vᵢ‖² is divided by k."""
    U, V = checks.matrix(U, "U", batched=True), checks.matrix(V, "V", batched=True)
    if U.shape[-1] != V.shape[-1]:
        raise ValueError(f"U and V must have the same width, got {U.shape} and {V.shape}")
    k = checks.integer(copies, "copies")
    return np.repeat(U, k, axis=-1) / np.sqrt(k), np.repeat(V, k, axis=-1) / np.sqrt(k)


def expose_null_columns(U, V) -> tuple[np.ndarray, np.ndarray]:
    """(UW, VW) with W the right singular vectors of the stacked [U; V] (columns by decreasing norm):
    the same product and norms, and a column that vanishes for every common null vector Ue = Ve = 0."""
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same width, got {U.shape} and {V.shape}")
    _, _, Wt = np.linalg.svd(np.vstack([U, V]), full_matrices=True)
    return U @ Wt.T, V @ Wt.T


# ---------------------------------------------------------------------------------------------
# algorithms


def gradient_descent(Y, U0, V0, decay, kappa=0.0, *, step: float, tol: float, max_steps: int,
                     trace_every: int | None = None) -> Run:
    """U ← U − η∇_U F, V ← V − η∇_V F for a batch of runs (leading dimensions of U0, V0; λ and κ may
    differ per run), each frozen once ‖∇F‖ ≤ ``tol``, on :func:`dropnb.engine.descend`. Zero
    columns stay exactly zero (their gradient vanishes), so narrower problems can share a batch as
    zero-padded columns.

    The run's state is ``U``, ``V``; ``metrics["objective"]`` holds F every ``trace_every`` steps
    (if asked); ``outcome`` holds per run the ``iterations`` taken, the final ``gradient_norm`` and
    whether it ``converged`` (‖∇F‖ ≤ tol). ``taken`` is the step at which every run had converged,
    or ``max_steps``."""
    Y, U, V = _check_problem(Y, U0, V0, ("U0", "V0"))
    batch = U.shape[:-2]
    decay, kappa = checks.weights(decay, "decay", batch), checks.weights(kappa, "kappa", batch)
    step, tol = checks.positive(step, "step"), checks.positive(tol, "tol")
    max_steps = checks.integer(max_steps, "max_steps")
    if trace_every is not None:
        trace_every = checks.integer(trace_every, "trace_every")
    state = dict(U=U.copy(), V=V.copy())
    iterations = np.zeros(batch, dtype=int)
    active = np.ones(batch, dtype=bool)

    def advance(t: int, eta: float) -> bool | None:
        grad_u, grad_v = _gradient(Y, state["U"], state["V"], decay, kappa)
        norm = np.sqrt(_sq(grad_u) + _sq(grad_v))
        check_finite(dict(gradient=np.where(active, norm, 0.0)), t, "gradient descent")  # a NaN norm would freeze the run
        active[...] &= norm > tol
        if not active.any():
            return True
        move = (eta * active)[..., None, None]
        state["U"] -= move * grad_u
        state["V"] -= move * grad_v
        iterations[...] += active
        return None

    run = descend(state, advance, Schedule.constant(step, max_steps),
                  checkpoints=[0] if trace_every is None else np.arange(0, max_steps + 1, trace_every),
                  metrics=None if trace_every is None else lambda s: dict(objective=objective(Y, s["U"], s["V"], decay, kappa)),
                  progress=False, description="gradient descent")
    grad_u, grad_v = _gradient(Y, run.final["U"], run.final["V"], decay, kappa)
    norm = np.sqrt(_sq(grad_u) + _sq(grad_v))
    run.outcome.update(iterations=iterations, gradient_norm=norm, converged=norm <= tol)
    return run


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


def meta_algorithm(Y, decay: float, U0, V0, *, step: float, gradient_tol: float, certificate_tol: float,
                   epsilon: float | None = None, max_stages: int = 50, max_steps: int = 100_000,
                   trace_every: int | None = None) -> MetaRun:
    """Vidal et al. (2022, §1.4.1): (i) gradient descent at fixed width to ‖∇F‖ ≤ ``gradient_tol``;
    (ii) stop if σ_max(R) ≤ λ(1 + ``certificate_tol``); else append the top singular pair (u, v) of R as
    (√ε u, √ε v), ε = ``epsilon`` or, by default, the exact line minimizer σ_max − λ, and repeat."""
    Y, U, V = _check_problem(Y, U0, V0, ("U0", "V0"))
    if U.ndim != 2:
        raise ValueError(f"meta_algorithm runs one problem, got U of shape {U.shape}")
    decay = checks.positive(decay, "decay")
    certificate_tol = checks.nonnegative(certificate_tol, "certificate_tol")
    checks.positive(gradient_tol, "gradient_tol")
    checks.positive(step, "step")
    if epsilon is not None:
        epsilon = checks.positive(epsilon, "epsilon")
    max_stages = checks.integer(max_stages, "max_stages")
    stages = []
    for _ in range(max_stages):
        run = gradient_descent(Y, U, V, decay, step=step, tol=gradient_tol, max_steps=max_steps,
                               trace_every=trace_every)
        U, V = run.final["U"], run.final["V"]
        cert = polar_certificate(Y, U, V, decay)
        stage = dict(width=U.shape[1], objective=objective(Y, U, V, decay), sigma_max=cert.sigma_max,
                     steps=int(run.outcome["iterations"]), converged=bool(run.outcome["converged"]), U=U, V=V,
                     trace=run.metrics.get("objective", np.empty(0)))
        if cert.holds(decay, certificate_tol):
            stages.append(Stage(**stage))
            return MetaRun(U=U, V=V, stages=stages, certified=True)
        eps = cert.sigma_max - decay if epsilon is None else epsilon
        stages.append(Stage(**stage, epsilon=eps))
        U, V = append_column(U, V, cert.left, cert.right, eps)
    return MetaRun(U=U, V=V, stages=stages, certified=False)
