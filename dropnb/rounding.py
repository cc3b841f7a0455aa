"""Rounding models: forward-error bounds of float64 computations, with their operation counts.

Every bound is γₙ = n·u/(1 − n·u), u = 2⁻⁵³ the unit roundoff, times the size of the quantities
the computation sums. γₙ bounds the relative error of n rounded operations in sequence
(Higham, *Accuracy and Stability of Numerical Algorithms*, Lemma 3.1); the operation counts
below are generous hand counts, stated with each bound, so that a tolerance built from them
covers any order of summation and any numeric code path (BLAS kernel, SIMD loop, thread count).

This module is the bottom layer of the package with :mod:`dropnb.checks`: it imports only numpy and
the validators, and the chapters that use these bounds pass in what they computed themselves.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import checks

UNIT_ROUNDOFF = float(np.finfo(np.float64).eps) / 2


def roundoff_tolerance(operations: int, unit: float = UNIT_ROUNDOFF) -> float:
    """Forward-error bound γₙ = n·u/(1 − n·u) for ``operations`` = n rounded operations, with the unit
    roundoff u = ``unit``: 2⁻⁵³ in double precision (the default), 2⁻²⁴ in single precision."""
    unit = checks.number(unit, "unit", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    if checks.integer(operations, "operations") * unit >= 1:
        raise checks.error("operations", "a positive integer with n·u < 1", operations)
    nu = operations * unit
    return nu / (1 - nu)


def _certificate(certificate: Any) -> tuple[float, int]:
    gap, x = getattr(certificate, "value_gap", None), getattr(certificate, "x", None)
    if gap is None or x is None:
        raise ValueError(f"certificate must have value_gap and x (dropnb.optimize.FirstOrderCertificate), got {certificate!r}")
    return float(gap), int(np.size(x))


def hessian_cutoff(H) -> float:
    """γₙ‖H‖_F with n = 10p²: the rounding bound for assembling a p × p Hessian and computing its
    eigenvalues. An eigenvalue within it of zero counts as zero."""
    H = checks.matrix(H, "H", empty=True)
    if H.ndim != 2 or H.shape[0] != H.shape[1] or H.shape[0] == 0:
        raise ValueError(f"H must be a non-empty square matrix, got shape {H.shape}")
    return roundoff_tolerance(10 * H.shape[0] ** 2) * float(np.linalg.norm(H))


# --- linear networks -------------------------------------------------------------------------------


def deep_regularizer_operations(sizes: Sequence[int]) -> int:
    """n = (k + 1)²·d_max³: a generous count of the rounded operations of one evaluation of the
    regularizer of a deep linear network with layer sizes ``sizes`` = (d₀, …, d_{k+1})."""
    sizes = [checks.integer(d, "sizes") for d in sizes]
    if len(sizes) < 2:
        raise checks.error("sizes", "at least two positive integers", sizes)
    return (len(sizes) - 1) ** 2 * max(sizes) ** 3


def certified_linear_value(certificate: Any, M, S, value: float) -> float:
    """Tolerance on a certified minimum value of the dropout objective of a linear network with
    target map M and second moment S: g²/(2μ) (``certificate.value_gap``) plus the rounding
    γₙ(tr(MSMᵀ) + f*), n = 4·(number of weights)·max(d₁, d₂)."""
    gap, weights = _certificate(certificate)
    M, S, value = checks.matrix(M, "M"), checks.matrix(S, "S"), checks.number(value, "value")
    if S.shape != (M.shape[1],) * 2:
        raise ValueError(f"S must be {M.shape[1]}×{M.shape[1]} to match M {M.shape}, got shape {S.shape}")
    operations = 4 * weights * max(M.shape)
    return gap + roundoff_tolerance(operations) * (np.trace(M @ S @ M.T) + value)


def linear_value_rounding(M, width: int, value: float) -> float:
    """The rounding error of one evaluation of the dropout objective f of a d₁ × d₂ shallow linear
    network of width r with target map M: γₙ(‖M‖²_F + |f|), n = 4(d₁d₂(r + 2) + r²(d₁ + d₂))
    (the value part of :func:`certified_factorization`)."""
    M, width, value = checks.matrix(M, "M"), checks.integer(width, "width"), checks.number(value, "value")
    d1, d2 = M.shape
    return roundoff_tolerance(4 * (d1 * d2 * (width + 2) + width * width * (d1 + d2))) * (np.sum(M**2) + abs(value))


def certified_excursion(value: float, floor: float, certificate: Any, M, S, extra_rounding: float = 0.0) -> float:
    """Where a value f of the dropout objective of a linear network lies against a proved lower bound
    F* = ``floor``, in units of its tolerance: max((f − F*)/(g²/(2μ) + ρ), (F* − f)/ρ), with g²/(2μ) =
    ``certificate.value_gap`` and ρ = γₙ(tr(MSMᵀ) + F*) the rounding of :func:`certified_linear_value`
    (plus ``extra_rounding`` where f is evaluated another way). At most 1 when f lies within the value
    gap plus rounding above F* and within rounding below it."""
    value, floor = checks.number(value, "value"), checks.number(floor, "floor")
    extra_rounding = checks.number(extra_rounding, "extra_rounding", minimum=0)
    rounding_part = certified_linear_value(certificate, M, S, floor) - certificate.value_gap + extra_rounding
    return max((value - floor) / (certificate.value_gap + rounding_part), (floor - value) / rounding_part)


def certified_factorization(certificate: Any, U, V, M, value: float) -> dict[str, float]:
    """First-order error bounds at an optimizer's end point (U, V) of a d₁ × d₂ factorization of M
    of width r (see dropnb.optimize), each plus the rounding error γₙ of evaluating the quantity,
    n = 4(d₁d₂(r + 2) + r²(d₁ + d₂)); δ = ``certificate.distance``:

    * value: g²/(2μ) + γₙ(‖M‖²_F + |f*|);
    * product: δ(‖U‖₂ + ‖V‖₂) + δ² + γₙ‖M‖_F;
    * score: δ(maxᵢ‖uᵢ‖ + maxᵢ‖vᵢ‖) + δ² + γₙ‖M‖_F (each importance score).
    """
    M, U, V = checks.matrix(M, "M"), checks.matrix(U, "U"), checks.matrix(V, "V")
    d1, d2 = M.shape
    r = U.shape[1]
    if U.shape[0] != d1 or V.shape != (d2, r):
        raise ValueError(f"U and V must have shapes ({d1}, r) and ({d2}, r) to match M {M.shape}, "
                         f"got {U.shape} and {V.shape}")
    value = checks.number(value, "value")
    gamma = roundoff_tolerance(4 * (d1 * d2 * (r + 2) + r * r * (d1 + d2)))
    delta = getattr(certificate, "distance", None)
    if delta is None or not hasattr(certificate, "value_gap"):
        raise ValueError(f"certificate must have value_gap and distance (dropnb.optimize.FirstOrderCertificate), got {certificate!r}")
    return dict(
        value=certificate.value_gap + gamma * (np.sum(M**2) + abs(value)),
        product=delta * (np.linalg.norm(U, 2) + np.linalg.norm(V, 2)) + delta**2 + gamma * np.linalg.norm(M),
        score=delta * (np.linalg.norm(U, axis=0).max() + np.linalg.norm(V, axis=0).max()) + delta**2
        + gamma * np.linalg.norm(M),
    )


# --- the tied (symmetric) dropout objective f(U) = ‖M − UUᵀ‖²_F + λ·R(U) ---------------------------


def _tied(M, U, lam) -> tuple[float, int]:
    M, U = checks.matrix(M, "M"), checks.matrix(U, "U")
    d, r = U.shape
    if M.shape != (d, d):
        raise ValueError(f"M must be {d} × {d} for U of shape {U.shape}, got {M.shape}")
    checks.nonnegative(lam, "lam")
    return np.linalg.norm(M) + (1 + lam) * np.sum(U**2), 10 * d * d * r


def tied_gradient(M, U, lam: float) -> float:
    """Rounding bound γₙ·4(‖M‖_F + (1+λ)‖U‖²_F)‖U‖_F on ‖∇f(U)‖ of the tied objective at an exact
    critical point, n = 10d²r."""
    size, operations = _tied(M, U, lam)
    return roundoff_tolerance(operations) * 4 * size * np.linalg.norm(U)


def tied_value(M, U, lam: float) -> float:
    """Rounding bound γₙ(‖M‖_F + (1+λ)‖U‖²_F)², n = 10d²r, on one evaluation of the tied objective."""
    size, operations = _tied(M, U, lam)
    return roundoff_tolerance(operations) * size**2


def untied_gradient(M, U, V, lam: float) -> float:
    """Rounding bound γₙ·2(‖M‖_F + (1+λ)‖U‖_F‖V‖_F)(‖U‖_F + ‖V‖_F), n = 10·d₁d₂r, on one
    evaluation of the gradient (∇_U f, ∇_V f) of the untied objective ‖M − UVᵀ‖²_F + λΣᵢ‖uᵢ‖²‖vᵢ‖²
    (M of shape d₁ × d₂, U of d₁ × r, V of d₂ × r): each entry sums terms of 2(|M| + |U||V|ᵀ)|V|
    and 2λ|U|Diag(‖vᵢ‖²) (and the same with U and V exchanged)."""
    M, U, V = checks.matrix(M, "M"), checks.matrix(U, "U"), checks.matrix(V, "V")
    (d1, d2), r = M.shape, U.shape[1]
    if U.shape[0] != d1 or V.shape != (d2, r):
        raise ValueError(f"U and V must have shapes ({d1}, r) and ({d2}, r) to match M {M.shape}, "
                         f"got {U.shape} and {V.shape}")
    lam = checks.nonnegative(lam, "lam")
    norm_u, norm_v = np.linalg.norm(U), np.linalg.norm(V)
    size = np.linalg.norm(M) + (1 + lam) * norm_u * norm_v
    return roundoff_tolerance(10 * d1 * d2 * r) * 2 * size * (norm_u + norm_v)


# --- matrix factorization with weight decay, F = ½‖Y − UVᵀ‖²_F + λ/2(‖U‖²_F + ‖V‖²_F) --------------


def factorization_operations(Y, U) -> int:
    """n = 10·n₂n₀n₁: the operation count of the rounding bounds of a factorization Y ≈ UVᵀ
    (Y of shape n₂ × n₀, U with n₁ columns; a stack of U's shares its last axis)."""
    Y, U = checks.matrix(Y, "Y"), checks.matrix(U, "U", batched=True)
    return 10 * Y.shape[0] * Y.shape[1] * U.shape[-1]


def factorization_gradient(Y, U, V, decay: float, residual_rounding: float) -> float:
    """Rounding bound (2ε_R + γₙλ)(‖U‖_F + ‖V‖_F) on the computed ‖∇F‖ at an exact critical point,
    n = 10·n₂n₀n₁, ``decay`` = λ, the weight decay, with ε_R = ``residual_rounding`` the rounding bound on the residual
    R = Y − UVᵀ (``dropnb.factorization.spectral_rounding``)."""
    Y, U, V = checks.matrix(Y, "Y"), checks.matrix(U, "U", batched=True), checks.matrix(V, "V", batched=True)
    if U.shape[-2:-1] + V.shape[-2:-1] != Y.shape or U.shape[-1] != V.shape[-1]:
        raise ValueError(f"U and V must be (…, {Y.shape[0]}, r) and (…, {Y.shape[1]}, r) to match Y {Y.shape}, "
                         f"got {U.shape} and {V.shape}")
    decay, residual_rounding = checks.nonnegative(decay, "decay"), checks.nonnegative(residual_rounding, "residual_rounding")
    size = np.linalg.norm(U) + np.linalg.norm(V)
    return (2 * residual_rounding + roundoff_tolerance(factorization_operations(Y, U)) * decay) * size


# --- two-layer ReLU networks, F = ½‖Y − W₂ReLU(W₁ᵀX)‖²_F + λ/2(‖W₁‖²_F + ‖W₂‖²_F) -------------------


def dropout_step_rounding(width: int, dim: int, radius: float, distance: float, scale: float = 0.0) -> float:
    """A rounding bound on the measured excess of inequality (5.3) in one step of Algorithm 4
    (Mianjy 2021, Lemma 12), for rows in the ball of radius c = ``radius``, ‖x‖ = 1, η ≤ ln 2 and the
    competitor U = W₁ + Λ₀V (Λ₀ = ``scale``), D = ``distance`` = ‖W − U‖²_F (increasing in D): the two
    distances, sums of m·d squares of size at most D (2γ_n D); the outputs z and y⟨∇g, U⟩, sums of m
    terms of size at most (c + Λ₀/√m)/√m, carried through ηQ ≤ 1 (4γ_n(c√m + Λ₀)); the stored step and
    projection, against W − U (γ_n 2√D(1 + 3c√m)); the losses on the right (4γ_n(1 + c√m)); n = m(d + 1) + 10."""
    width, dim = checks.integer(width, "width"), checks.integer(dim, "dim")
    radius, scale = checks.nonnegative(radius, "radius"), checks.nonnegative(scale, "scale")
    distance = checks.nonnegative(distance, "distance")
    root = math.sqrt(width)
    return roundoff_tolerance(width * (dim + 1) + 10) * (
        2 * distance + 2 * math.sqrt(distance) * (1 + 3 * radius * root) + 8 * radius * root + 4 * scale + 4)


def _relu(X, Y, W1, W2) -> tuple[np.ndarray, ...]:
    X, W1, W2 = checks.matrix(X, "X"), checks.matrix(W1, "W1"), checks.matrix(W2, "W2")
    Y = checks.matrix(Y, "Y")
    if W1.shape[0] != X.shape[0] or W2.shape[1] != W1.shape[1] or Y.shape != (W2.shape[0], X.shape[1]):
        raise ValueError(f"shapes must be X (n₀, m), Y (n₂, m), W1 (n₀, r), W2 (n₂, r); got X {X.shape}, "
                         f"Y {Y.shape}, W1 {W1.shape}, W2 {W2.shape}")
    return X, Y, W1, W2


def relu_gamma(W1, X, extra: int = 8) -> float:
    """γₙ with n = extra·(n₀ + r + m): the rounding unit of one evaluation of a two-layer network
    with input weights W1 (n₀ × r) on data X (n₀ × m)."""
    W1, X, extra = checks.matrix(W1, "W1"), checks.matrix(X, "X"), checks.integer(extra, "extra")
    return roundoff_tolerance(extra * (W1.shape[0] + W1.shape[1] + X.shape[1]))


def relu_magnitude(X, W1, W2) -> np.ndarray:
    """|W₂|(|W₁|ᵀ|X|): the entrywise size of the sums that make the network's output Φ."""
    X, W1, W2 = checks.matrix(X, "X"), checks.matrix(W1, "W1"), checks.matrix(W2, "W2")
    if W1.shape[0] != X.shape[0] or W2.shape[1] != W1.shape[1]:
        raise ValueError(f"W1 and W2 must be (n₀, r) and (n₂, r) to match X {X.shape}, got {W1.shape} and {W2.shape}")
    return np.abs(W2) @ (np.abs(W1).T @ np.abs(X))


def relu_value(X, Y, W1, W2, decay: float) -> float:
    """Rounding bound γₙ[(‖Y‖_F + ‖|W₂|(|W₁|ᵀ|X|)‖_F)² + λ(‖W₁‖²_F + ‖W₂‖²_F)] on one evaluation of F,
    γₙ = :func:`relu_gamma` (n = 8(n₀ + r + m)), ``decay`` = λ, the weight decay."""
    X, Y, W1, W2 = _relu(X, Y, W1, W2)
    decay = checks.nonnegative(decay, "decay")
    return relu_gamma(W1, X) * ((np.linalg.norm(Y) + np.linalg.norm(relu_magnitude(X, W1, W2))) ** 2
                                + decay * (np.sum(W1**2) + np.sum(W2**2)))


def relu_gradient(X, Y, W1, W2, decay: float) -> float:
    """Rounding bound γₙ[(‖Y‖_F + ‖|W₂|(|W₁|ᵀ|X|)‖_F)(‖X‖_F‖W₂‖_F + ‖|W₁|ᵀ|X|‖_F) + λ‖W‖_F] on the
    computed ∇F, γₙ = :func:`relu_gamma` (n = 8(n₀ + r + m))."""
    X, Y, W1, W2 = _relu(X, Y, W1, W2)
    decay = checks.nonnegative(decay, "decay")
    residual = np.linalg.norm(Y) + np.linalg.norm(relu_magnitude(X, W1, W2))
    return relu_gamma(W1, X) * (residual * (np.linalg.norm(X) * np.linalg.norm(W2) + np.linalg.norm(np.abs(W1).T @ np.abs(X)))
                                + decay * np.sqrt(np.sum(W1**2) + np.sum(W2**2)))
