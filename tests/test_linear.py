"""The shallow linear network with dropout: closed forms against enumeration, sampling and autograd."""

import numpy as np
import pytest
import torch

from dropnb import linear
from dropnb.rounding import roundoff_tolerance
from dropnb.masks import Bernoulli, Blocks
from helpers import random_finite

D1, D2 = 3, 4


def network(seed: int, width: int, d1: int = D1, d2: int = D2):
    """Random M, U, V and a random positive semi-definite, exactly symmetric S."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((d1, d2))
    U = rng.standard_normal((d1, width))
    V = rng.standard_normal((d2, width))
    A = rng.standard_normal((d2, d2 + 1)) / np.sqrt(d2)
    S = A @ A.T
    return M, U, V, (S + S.T) / 2


def blocks(width: int, retain: float) -> Blocks:
    return Blocks(width, next(s for s in (5, 2, 1) if width % s == 0), retain)


MASKS = {
    "bernoulli": lambda width, retain, seed: Bernoulli(width, retain),
    "blocks": lambda width, retain, seed: blocks(width, retain),
    "finite": lambda width, retain, seed: random_finite(seed + int(100 * retain), width),  # no θ: vary the seed
}


def quadratic_magnitude(N, S):
    """Σᵢⱼₖ Nᵢⱼ |Sⱼₖ| Nᵢₖ for a non-negative N."""
    return float(np.sum(N * (N @ np.abs(S))))


def objective_magnitude(M, U, V, mask, S):
    """An upper bound on Σ|terms| of both the closed form and the enumerated objective.

    The enumeration's terms are bounded by E_b Q(|M| + |U| |diag(b/μ)| |V|ᵀ) with Q(N) = Σ N|S|N;
    the closed form's loss by Q(|M| + |U||V|ᵀ) and its regularizer, through
    |C̄ᵢⱼ| ≤ E|bᵢbⱼ/(μᵢμⱼ)| + 1, by the sum of the same two quantities.
    """
    patterns, probs = mask.enumerate()
    expected = sum(p * quadratic_magnitude(np.abs(M) + np.abs(U) * np.abs(b / mask.mean) @ np.abs(V).T, S)
                   for b, p in zip(patterns, probs))
    return expected + quadratic_magnitude(np.abs(M) + np.abs(U) @ np.abs(V).T, S)


def objective_operations(mask, d1=D1, d2=D2) -> int:
    """Longest chain of rounded operations leading to any term of either computation of f.

    Two pattern sums of K terms (the expectation, or E[bbᵀ] and μ inside C̄), a sum over the
    r² entries of C̄ or the d₁d₂² entries of the quadratic form, inner products of length r, d₁
    and d₂ (twice each: the residual or the Gram matrix appears twice in every term), and at
    most 20 further products, subtractions and divisions.
    """
    K, r = mask.support_size(), mask.width
    return 2 * K + r * r + d1 * d2 * d2 + 2 * (r + d1 + d2) + 20


# --- the objective in closed form -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("retain", [0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("width", [1, 4, 10])
@pytest.mark.parametrize("kind", MASKS)
def test_objective_matches_enumeration(kind, width, retain, seed):
    M, U, V, S = network(seed, width)
    mask = MASKS[kind](width, retain, seed)
    closed = linear.objective(M, U, V, mask, S)
    enumerated = linear.enumerated_objective(M, U, V, mask, S)
    # Each computation is off by at most γₙ·Σ|terms|, Σ|terms| ≤ objective_magnitude.
    bound = 2 * roundoff_tolerance(objective_operations(mask)) * objective_magnitude(M, U, V, mask, S)
    assert abs(closed - enumerated) <= bound


def test_objective_without_dropout_is_the_loss():
    # θ = 1: C̄ = 1·1 − 1·1 = 0 exactly in floating point, so the regularizer adds exactly 0.
    M, U, V, S = network(3, 5)
    assert linear.objective(M, U, V, Bernoulli(5, 1.0), S) == linear.expected_loss(M, U, V, S)


@pytest.mark.parametrize("retain", [0.1, 0.5, 0.9, 1.0])
def test_bernoulli_regularizer_matches_general_regularizer(retain):
    M, U, V, S = network(4, 6)
    specific = linear.bernoulli_regularizer(U, V, retain, S)
    general = linear.regularizer(U, V, Bernoulli(6, retain), S)
    # Every term of either side is bounded by (λ + 1/θ)(|U|ᵀ|U|)ᵢⱼ(|V|ᵀ|S||V|)ᵢⱼ: λ times the
    # absolute Gram entries, plus the absolute error (≤ γ/θ) of a computed C̄ entry that should be
    # 0 or λ. Along any term: inner products of length d₁ and d₂², the sum over r² entries and at
    # most 20 products, subtractions and divisions.
    magnitude = ((1 - retain) / retain + 1 / retain) * np.sum(
        (np.abs(U).T @ np.abs(U)) * (np.abs(V).T @ np.abs(S) @ np.abs(V)))
    n = D1 + D2 * D2 + 6 * 6 + 20
    assert abs(specific - general) <= 2 * roundoff_tolerance(n) * magnitude


@pytest.mark.parametrize("retain", [0.2, 0.5, 0.8])
def test_regularizer_with_identity_input_is_lambda_path_norm(retain):
    _, U, V, _ = network(5, 7)
    lam = (1 - retain) / retain
    # λψ₂² is a sum of d₁·r·d₂ non-negative terms; the regularizer's r² terms are bounded by
    # (λ + 1/θ)(|U|ᵀ|U|)ᵢⱼ(|V|ᵀ|V|)ᵢⱼ (a computed C̄ entry is λ or 0 up to γ/θ). Along any term:
    # d₁·r·d₂ + r² additions and at most 20 products, squares and divisions.
    magnitude = (lam + 1 / retain) * np.sum((np.abs(U).T @ np.abs(U)) * (np.abs(V).T @ np.abs(V)))
    bound = 2 * roundoff_tolerance(D1 * 7 * D2 + 7 * 7 + 20) * magnitude
    assert abs(linear.regularizer(U, V, Bernoulli(7, retain)) - lam * linear.path_norm_squared(U, V)) <= bound


def test_path_norm_squared_matches_triple_loop():
    U = np.array([[1.0, -2.0], [0.5, 3.0]])
    V = np.array([[2.0, 1.0], [-1.0, 0.0], [0.0, 4.0]])
    total = 0.0
    for j in range(U.shape[0]):  # output unit
        for i in range(U.shape[1]):  # hidden unit
            for k in range(V.shape[0]):  # input unit
                total += (U[j, i] * V[k, i]) ** 2
    # 12 non-negative terms, each a product and a square: relative error ≤ γ₁₄ on either side.
    assert abs(linear.path_norm_squared(U, V) - total) <= 2 * roundoff_tolerance(14) * total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expected_loss_with_identity_is_frobenius_norm(seed):
    M, U, V, _ = network(seed, 5)
    frobenius = np.linalg.norm(M - U @ V.T, "fro") ** 2
    # Non-negative squares of residuals (inner products of length r plus a subtraction) summed
    # over d₁d₂ entries; the residual enters each term twice: γ_{2(r+1) + d₁d₂ + 4} relative
    # to Σ (|M| + |U||V|ᵀ)².
    magnitude = np.sum((np.abs(M) + np.abs(U) @ np.abs(V).T) ** 2)
    bound = 2 * roundoff_tolerance(2 * 6 + D1 * D2 + 4) * magnitude
    assert abs(linear.expected_loss(M, U, V) - frobenius) <= bound
    assert abs(linear.expected_loss(M, U, V, np.eye(D2)) - frobenius) <= bound


def test_expected_loss_with_factored_second_moment():
    M, U, V, _ = network(6, 5)
    A = np.random.default_rng(6).standard_normal((D2, D2))
    S = A @ A.T
    expected = np.linalg.norm((M - U @ V.T) @ A, "fro") ** 2
    # E‖(M − UVᵀ)x‖² with E[xxᵀ] = AAᵀ is ‖(M − UVᵀ)A‖²_F; error relative to the absolute-value
    # version, with at most 2(r + 1) + 2d₂ + d₁d₂² + 8 roundings along any term.
    N = np.abs(M) + np.abs(U) @ np.abs(V).T
    magnitude = np.sum(N * (N @ (np.abs(A) @ np.abs(A).T)))
    bound = 2 * roundoff_tolerance(2 * 6 + 2 * D2 + D1 * D2 * D2 + 8) * magnitude
    assert abs(linear.expected_loss(M, U, V, S) - expected) <= bound


@pytest.mark.parametrize("kind", MASKS)
def test_objective_gradient_matches_central_differences(kind):
    width = 5
    M, U, V, S = network(7, width)
    mask = MASKS[kind](width, 0.6, 7)
    grad_u, grad_v = linear.objective_gradient(M, U, V, mask, S)
    # f is quadratic in every single weight (quadratic in U for fixed V and in V for fixed U), so
    # the central difference has no truncation error. Its roundoff is about γ·magnitude/h
    # ≈ 1e-14·magnitude/1e-3 ≈ 1e-11·magnitude, far below 1e-7·‖∇f‖ for these unit-scale weights.
    h = 1e-3

    def central(matrix, index, evaluate):
        plus, minus = matrix.copy(), matrix.copy()
        plus[index] += h
        minus[index] -= h
        return (evaluate(plus) - evaluate(minus)) / (2 * h)

    fd_u = np.array([central(U, ix, lambda W: linear.objective(M, W, V, mask, S)) for ix in np.ndindex(U.shape)])
    fd_v = np.array([central(V, ix, lambda W: linear.objective(M, U, W, mask, S)) for ix in np.ndindex(V.shape)])
    fd = np.concatenate([fd_u, fd_v])
    exact = np.concatenate([grad_u.ravel(), grad_v.ravel()])
    assert np.linalg.norm(fd - exact) <= 1e-7 * np.linalg.norm(exact)


# --- sampled losses -------------------------------------------------------------------------------


def test_sampled_losses_match_explicit_loop():
    width = 4
    M, U, V, _ = network(9, width)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, D2))
    b = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.5, 0.0]])
    mean = np.array([0.5, 0.25, 1.0, 2.0])
    expected = []
    for xn, bn in zip(x, b):
        total = 0.0
        for j in range(D1):
            target = sum(M[j, k] * xn[k] for k in range(D2))
            output = sum(U[j, i] * bn[i] / mean[i] * sum(V[k, i] * xn[k] for k in range(D2)) for i in range(width))
            total += (target - output) ** 2
        expected.append(total)
    expected = np.array(expected)
    # Each residual is a difference of sums of at most r·d₂ + d₂ products with ≤ 4 roundings; its
    # square doubles the count: γ_{2(r d₂ + d₂ + 4) + d₁} relative to the absolute-value version.
    N = np.abs(x) @ np.abs(M).T + (np.abs(x) @ np.abs(V)) * np.abs(b / mean) @ np.abs(U).T
    bound = 2 * roundoff_tolerance(2 * (width * D2 + D2 + 4) + D1) * np.sum(N**2, axis=1)
    assert np.all(np.abs(linear.sampled_losses(M, U, V, x, b, mean) - expected) <= bound)


@pytest.mark.parametrize("kind", MASKS)
def test_sampled_losses_average_to_objective(kind):
    width = 6
    M, U, V, _ = network(10, width)
    mask = MASKS[kind](width, 0.6, 10)
    rng = np.random.default_rng(10)
    n = 100_000
    x = rng.standard_normal((n, D2))  # isotropic: S = I
    losses = linear.sampled_losses(M, U, V, x, mask.sample(n, rng), mask.mean)
    # Independent samples: the mean is within 5 standard errors (std/√n) with probability
    # > 1 − 6e-7 (normal approximation, n = 1e5).
    standard_error = losses.std(ddof=1) / np.sqrt(n)
    assert abs(losses.mean() - linear.objective(M, U, V, mask)) <= 5 * standard_error


# --- Algorithm 1 directions -----------------------------------------------------------------------


def autograd_gradients(U, V, x, y, b, retain):
    """∇ of the single-sample loss ‖y − (1/θ) U diag(b) Vᵀx‖² with respect to U and V, by torch."""
    U_t = torch.tensor(U, requires_grad=True)
    V_t = torch.tensor(V, requires_grad=True)
    x_t, y_t, b_t = torch.tensor(x), torch.tensor(y), torch.tensor(b)
    loss = torch.sum((y_t - U_t @ torch.diag(b_t) @ V_t.T @ x_t / retain) ** 2)
    loss.backward()
    return U_t.grad.numpy(), V_t.grad.numpy()


@pytest.mark.parametrize("retain", [0.3, 0.7, 1.0])
def test_algorithm1_directions_are_scaled_autograd_gradients(retain):
    width, n = 5, 3
    M, U, V, _ = network(11, width)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, D2))
    y = x @ M.T + 0.1 * rng.standard_normal((n, D1))
    b = Bernoulli(width, retain).sample(n, rng)
    dir_u, dir_v = linear.algorithm1_directions(U, V, x, y, b, np.full(width, retain))
    assert dir_u.shape == (n, D1, width) and dir_v.shape == (n, D2, width)
    # Elementwise roundoff bound: e = U diag(b/θ) Vᵀx − y and h = b ⊙ Vᵀx are bounded in
    # magnitude by E = |U| H/θ + |y| and H = |b| ⊙ |V|ᵀ|x|, and every term passes through at most
    # d₂ + r + d₁ + 6 roundings, on each side (numpy and torch).
    gamma = 2 * roundoff_tolerance(D2 + width + D1 + 6)
    for k in range(n):
        grad_u, grad_v = autograd_gradients(U, V, x[k], y[k], b[k], retain)
        H = np.abs(b[k]) * (np.abs(V).T @ np.abs(x[k]))
        E = np.abs(U) @ H / retain + np.abs(y[k])
        assert np.all(np.abs(dir_u[k] - retain / 2 * grad_u) <= gamma * np.outer(E, H))
        assert np.all(np.abs(dir_v[k] - retain / 2 * grad_v)
                      <= gamma * np.outer(np.abs(x[k]), np.abs(b[k]) * (np.abs(U).T @ E)))


def test_algorithm1_expected_direction_is_scaled_gradient():
    width, retain = 4, 0.6
    M, U, V, _ = network(13, width)
    mask = Bernoulli(width, retain)
    rng = np.random.default_rng(13)
    n = 100_000
    x = rng.standard_normal((n, D2))
    dir_u, dir_v = linear.algorithm1_directions(U, V, x, x @ M.T, mask.sample(n, rng), mask.mean)
    grad_u, grad_v = linear.objective_gradient(M, U, V, mask)
    # E[direction] = (θ/2)∇f for isotropic inputs; each entry's sample mean is within 5 standard
    # errors with probability > 1 − 6e-7 (normal approximation), 28 entries in all.
    for samples, gradient in ((dir_u, grad_u), (dir_v, grad_v)):
        standard_error = samples.std(axis=0, ddof=1) / np.sqrt(n)
        assert np.all(np.abs(samples.mean(axis=0) - retain / 2 * gradient) <= 5 * standard_error)


# --- bad input ------------------------------------------------------------------------------------

_M, _U, _V, _S = network(14, 3)
_MASK = Bernoulli(3, 0.5)


def _with_entry(matrix, value):
    changed = matrix.copy()
    changed[0, 0] = value
    return changed


BAD_CALLS = {
    "M 1-d": (lambda: linear.objective(_M[0], _U, _V, _MASK), "^M must"),
    "U rows": (lambda: linear.objective(_M, _U[:2], _V, _MASK), "^U must"),
    "V rows": (lambda: linear.objective(_M, _U, _V[:3], _MASK), "^V must"),
    "U and V columns": (lambda: linear.objective(_M, _U[:, :2], _V, _MASK), "^U and V must"),
    "U 3-d": (lambda: linear.expected_loss(_M, _U[None], _V), "^U must"),
    "S shape": (lambda: linear.objective(_M, _U, _V, _MASK, np.eye(D2 + 1)), "^S must"),
    "S not symmetric": (lambda: linear.objective(_M, _U, _V, _MASK, _S + np.triu(np.ones((D2, D2)), 1)), "^S must"),
    "M nan": (lambda: linear.expected_loss(_with_entry(_M, np.nan), _U, _V), "^M must"),
    "U inf": (lambda: linear.regularizer(_with_entry(_U, np.inf), _V, _MASK), "^U must"),
    "V nan": (lambda: linear.path_norm_squared(_U, _with_entry(_V, np.nan)), "^V must"),
    "S inf": (lambda: linear.expected_loss(_M, _U, _V, _with_entry(_S, -np.inf)), "^S must"),
    "mask width": (lambda: linear.objective(_M, _U, _V, Bernoulli(4, 0.5)), "^mask must"),
    "mask width (enumerated)": (lambda: linear.enumerated_objective(_M, _U, _V, Bernoulli(2, 0.5)), "^mask must"),
    "mask width (gradient)": (lambda: linear.objective_gradient(_M, _U, _V, Blocks(4, 2, 0.5)), "^mask must"),
    "mask type": (lambda: linear.regularizer(_U, _V, 0.5), "^mask must"),
    "retain 0": (lambda: linear.bernoulli_regularizer(_U, _V, 0), "^retain must"),
    "retain 1.5": (lambda: linear.bernoulli_regularizer(_U, _V, 1.5), "^retain must"),
    "retain nan": (lambda: linear.dropout_lambda(float("nan")), "^retain must"),
    "retain -0.1": (lambda: linear.dropout_lambda(-0.1), "^retain must"),
    "x width": (lambda: linear.sampled_losses(_M, _U, _V, np.ones((2, D2 + 1)), np.ones((2, 3)), np.ones(3)), "^x must"),
    "b shape": (lambda: linear.sampled_losses(_M, _U, _V, np.ones((2, D2)), np.ones((3, 3)), np.ones(3)), "and b "),
    "mean zero": (lambda: linear.sampled_losses(_M, _U, _V, np.ones((2, D2)), np.ones((2, 3)), [1, 0, 1]), "^mean must"),
    "mean length": (lambda: linear.sampled_losses(_M, _U, _V, np.ones((2, D2)), np.ones((2, 3)), [1, 1]), "^mean must"),
    "directions y": (lambda: linear.algorithm1_directions(_U, _V, np.ones((2, D2)), np.ones((2, D1 + 1)),
                                                          np.ones((2, 3)), np.ones(3)), "x, y, b must"),
    "directions x nan": (lambda: linear.algorithm1_directions(_U, _V, np.full((2, D2), np.nan), np.ones((2, D1)),
                                                              np.ones((2, 3)), np.ones(3)), "^x must"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_input_raises_naming_the_argument(case):
    call, name = BAD_CALLS[case]
    with pytest.raises(ValueError, match=name):
        call()


def test_non_numeric_retain_names_the_argument():
    with pytest.raises(ValueError, match="retain"):
        linear.dropout_lambda("a")


def test_batched_objective_refuses_a_missing_characteristic_matrix():
    M, U, V = torch.zeros((2, 3)), torch.zeros((2, 4)), torch.zeros((3, 4))
    with pytest.raises(ValueError, match="^cbar must be the characteristic matrix"):
        linear.batched_objective(M, U, V, None)
