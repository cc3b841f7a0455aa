"""Structured dropout: the s-support norm four ways, the prox against Theorem 2.7, the DropBlock bound."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from dropnb import data, linear, masks, shrinkage, structured

FAST = settings(max_examples=60, deadline=None, database=None)
entries = st.one_of(st.just(0.0), st.floats(1e-3, 10.0))
vectors = st.lists(entries, min_size=1, max_size=12).map(np.array)
sizes = st.integers(1, 8)

WORKED = np.array([7.3, 6.3, 2.0, 1.3, 0.9, 0.6])


def random_spectrum(rng: np.random.Generator, n: int) -> np.ndarray:
    """n sorted non-negative values; about a third of the draws end in zeros."""
    m = np.sort(rng.exponential(1.0, n) * rng.choice([1.0, 5.0]))[::-1]
    if rng.random() < 0.3:
        m[rng.integers(1, n + 1):] = 0.0
    return m


def random_moment(rng: np.random.Generator, d: int, rank: int) -> np.ndarray:
    """S = XXᵀ for X of shape (d, rank): positive semidefinite of rank min(d, rank)."""
    X = rng.standard_normal((d, rank))
    return X @ X.T


def dual_norm_squared(a: np.ndarray, s: int) -> float:
    """(sup ⟨a, x⟩ over ‖x‖*_(s) = (Σ_{i≤s} x↓ᵢ²)^{1/2} ≤ 1)², by SLSQP on the ordered cone x₁ ≥ … ≥ xₙ ≥ 0."""
    a = np.sort(a)[::-1]
    n = len(a)
    constraints = [dict(type="ineq", fun=lambda x: np.append(x[:-1] - x[1:], x[-1]),
                        jac=lambda x: np.eye(n) - np.eye(n, k=1)),
                   dict(type="ineq", fun=lambda x: 1 - np.sum(x[:s] ** 2),
                        jac=lambda x: np.concatenate([-2 * x[:s], np.zeros(max(0, n - s))]))]
    result = minimize(lambda x: -a @ x, np.full(n, 0.5 / np.sqrt(min(s, n))), jac=lambda x: -a, method="SLSQP",
                      constraints=constraints, options=dict(ftol=1e-13, maxiter=1000))
    assert result.success
    return result.fun**2


def scipy_prox_value(m: np.ndarray, s: int, lam_bar: float) -> float:
    """min_a ‖m − a‖² + λ̄‖a‖²_(s) over a ≥ 0 by L-BFGS-B; the gradient of ‖a‖²_(s) is 2aᵢ on the
    top ρ* − 1 entries and 2T_{ρ*}/(s − ρ* + 1) on the others."""

    def F(a):
        order = np.argsort(-a, kind="stable")
        rho = structured.support_index(a, s)
        grad = np.full(len(a), 2 * np.sort(a)[::-1][rho - 1:].sum() / (s - rho + 1))
        grad[order[:rho - 1]] = 2 * a[order[:rho - 1]]
        return structured.convex_objective(m, a, s, lam_bar), -2 * (m - a) + lam_bar * grad

    result = minimize(F, m / 2, jac=True, method="L-BFGS-B", bounds=[(0, None)] * len(m),
                      options=dict(ftol=0, gtol=1e-12, maxiter=10_000))
    return result.fun


# The squared s-support norm ------------------------------------------------------------------------------------

def test_reference_vectors_and_the_papers_max_rule():
    values, feasible = structured.ksupport_candidates(np.ones(10), 2)
    assert structured.ksupport_squared(np.ones(10), 2) == 50 and structured.support_index(np.ones(10), 2) == 1
    np.testing.assert_array_equal(values, [50, 82])  # "ρ* maximises (11)" would give 82
    np.testing.assert_array_equal(feasible, [True, False])
    spike = np.array([10.0] + [1.0] * 9)
    assert structured.ksupport_squared(spike, 2) == 181 and structured.support_index(spike, 2) == 2
    np.testing.assert_array_equal(structured.ksupport_candidates(spike, 2)[0], [180.5, 181])


def test_unsorted_short_and_zero_vectors():
    assert structured.ksupport_squared([1.0, 10.0, 1.0], 2) == 104
    assert structured.support_index([1.0, 10.0, 1.0], 2) == 2
    assert structured.ksupport_squared([1.0, 3.0], 5) == 10 and structured.support_index([1.0, 3.0], 5) == 3
    assert structured.ksupport_squared([0.0, 0.0], 3) == 0 and structured.support_index([0.0, 0.0], 3) == 1
    assert structured.ksupport_variational([0.0, 0.0], 3) == 0
    assert structured.ksupport_squared([1.0, 4.0, 1.0, 2.0], 2) == structured.ksupport_squared([4.0, 2.0, 1.0, 1.0], 2)


@FAST
@given(a=vectors, s=sizes)
def test_support_index_is_the_unique_index_and_agrees_with_the_variational_form(a, s):
    rho = structured.support_index(a, s)
    padded = np.concatenate([np.sort(a)[::-1], np.zeros(s)])
    share = padded[rho - 1:].sum() / (s - rho + 1)
    assert rho == 1 or padded[rho - 2] > share
    assert share >= padded[rho - 1] * (1 - 1e-12)
    value = structured.ksupport_squared(a, s)
    assert structured.ksupport_variational(a, s) == pytest.approx(value, rel=1e-12)


def test_variational_form_on_random_vectors():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 13))
        a, s = random_spectrum(rng, n), int(rng.integers(1, n + 1))
        rng.shuffle(a)
        assert structured.ksupport_variational(a, s) == pytest.approx(structured.ksupport_squared(a, s), rel=1e-12)


@FAST
@given(a=vectors, s=sizes)
def test_limits_and_monotonicity_in_s(a, s):
    assert structured.ksupport_squared(a, 1) == pytest.approx(np.sum(a) ** 2, rel=1e-12)
    big = max(s, np.count_nonzero(a))
    assert structured.ksupport_squared(a, big) == pytest.approx(np.sum(a**2), rel=1e-12)
    values = [t * structured.ksupport_squared(a, t) for t in range(1, big + 2)]
    assert np.all(np.diff(values) >= -1e-12 * values[-1])  # s‖a‖²_(s) is non-decreasing
    norms = [structured.ksupport_squared(a, t) for t in range(1, big + 2)]
    assert np.all(np.diff(norms) <= 1e-12 * norms[0])  # ‖a‖²_(s) is non-increasing


@pytest.mark.parametrize("a, s", [(np.ones(10), 2), (np.array([10.0] + [1.0] * 9), 2),
                                  (np.array([3.0, 2.5, 0.4, 0.3, 0.1]), 2), (np.array([5.0, 1.0, 0.9, 0.8, 0.2, 0.1]), 3),
                                  (np.array([2.0, 2.0, 1.0, 0.0]), 3), (np.array([4.0, 1.0, 0.5]), 1)])
def test_dual_characterisation(a, s):
    assert dual_norm_squared(a, s) == pytest.approx(structured.ksupport_squared(a, s), rel=1e-7)


def test_spectral_norm_uses_the_singular_values():
    rng = np.random.default_rng(1)
    sigma = np.array([3.0, 1.0, 0.5, 0.2])
    A = data.matrix_with_spectrum(sigma, (5, 6), rng)
    for s in (1, 2, 3, 4):
        expected = structured.ksupport_squared(sigma, s)
        assert structured.spectral_ksupport_squared(A, s) == pytest.approx(expected, rel=1e-12)
    assert structured.spectral_ksupport_squared(A, 1) == pytest.approx(np.linalg.norm(A, "nuc") ** 2, rel=1e-12)
    assert structured.spectral_ksupport_squared(A, 4) == pytest.approx(np.linalg.norm(A) ** 2, rel=1e-12)


# The prox and Theorem 2.7 -------------------------------------------------------------------------------------

def test_worked_example():
    a, value, rho, ell = structured.closed_form(WORKED, 3, 1 / 3)
    assert value == pytest.approx(26.545, rel=1e-13) and (rho, ell) == (3, 5)
    np.testing.assert_allclose(a, [5.475, 4.725, 1.3, 0.6, 0.2, 0.0], rtol=1e-13, atol=1e-14)
    assert structured.support_index(a, 3) == 3
    a, value, rho, ell = structured.closed_form(WORKED, 3, 1 / 2)
    assert value == pytest.approx(float(Fraction(26161, 750)), rel=1e-13) and (rho, ell) == (3, 5)  # 34.881333…
    np.testing.assert_allclose(a, [7.3 / 1.5, 4.2, 1.16, 0.46, 0.06, 0.0], rtol=1e-13, atol=1e-14)
    for lam_bar, expected in ((1 / 3, 26.545), (1 / 2, 26161 / 750)):
        assert structured.prox(WORKED, 3, lam_bar)[1] == pytest.approx(expected, rel=1e-13)


def test_prox_equals_the_closed_form():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n, s = int(rng.integers(1, 10)), int(rng.integers(1, 7))
        m, lam_bar = random_spectrum(rng, n), float(np.exp(rng.uniform(np.log(1e-2), np.log(30.0))))
        a, value = structured.prox(m, s, lam_bar)
        b, best, _, _ = structured.closed_form(m, s, lam_bar)
        assert value == pytest.approx(best, rel=1e-10, abs=1e-14)
        assert structured.convex_objective(m, a, s, lam_bar) == pytest.approx(value, rel=1e-10, abs=1e-14)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9 * (1 + m[0]))


@pytest.mark.parametrize("m, s, lam_bar", [(WORKED, 3, 1 / 3), (np.array([4.0, 1.0, 0.9, 0.8, 0.2]), 2, 0.7),
                                           (np.array([2.0, 1.9, 1.8, 1.0, 0.5, 0.1]), 4, 3.0),
                                           (np.array([1.0, 1.0, 1.0, 1.0]), 2, 0.05)])
def test_prox_against_scipy(m, s, lam_bar):
    _, value = structured.prox(m, s, lam_bar)
    found = scipy_prox_value(m, s, lam_bar)
    assert value <= found * (1 + 1e-12)
    assert found == pytest.approx(value, rel=1e-8)


def test_prox_special_cases_and_order():
    m = np.array([0.5, 3.0, 0.0, 1.0])
    a, value = structured.prox(m, 3, 0.5)  # at most s non-zero entries: ridge
    np.testing.assert_allclose(a, m / 1.5, rtol=1e-15)
    assert value == pytest.approx(0.5 / 1.5 * np.sum(m**2), rel=1e-14)
    a, value = structured.prox(m, 2, 0.0)
    np.testing.assert_array_equal(a, m)
    assert value == 0
    a, _ = structured.prox(m, 2, 0.4)
    b, _ = structured.prox(np.sort(m)[::-1], 2, 0.4)
    np.testing.assert_allclose(np.sort(a)[::-1], b, rtol=1e-13)


def test_candidates_cover_the_full_range():
    m = np.array([3.0, 1.0, 0.5])
    candidates = structured.closed_form_candidates(m, 2, 0.4)
    assert [(rho, ell) for rho, ell, _ in candidates] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    _, _, a = candidates[3]  # ℓ ≤ ρ − 1: ridge on the first ℓ entries only
    np.testing.assert_allclose(a, [3.0 / 1.4, 0.0, 0.0])
    _, _, a = candidates[5]  # head ridge, tail (mᵢ − λ̄S/c)₊ with S = 1.5, c = 1 + 0.4·2
    np.testing.assert_allclose(a, [3.0 / 1.4, 1.0 - 0.4 * 1.5 / 1.8, 0.5 - 0.4 * 1.5 / 1.8])


def test_block_size_one_is_the_shallow_dropout_shrinkage():
    rng = np.random.default_rng(3)
    for _ in range(50):
        d1, d2 = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        width, retain = int(rng.integers(min(d1, d2), 8)), float(rng.uniform(0.1, 1.0))
        M, S = rng.standard_normal((d1, d2)), random_moment(rng, d2, int(rng.integers(1, d2 + 2)))
        bound = structured.dropblock_bound(M, S, width, 1, retain)
        expected = shrinkage.optimal_value(bound.spectrum, width, linear.dropout_lambda(retain))
        assert bound.value == pytest.approx(expected, rel=1e-12, abs=1e-13)
        assert bound.rho == 1


# The DropBlock bound -----------------------------------------------------------------------------------------

def test_worked_example_as_a_network():
    for width, lam_bar, value in ((9, 1 / 3, 26.545), (6, 1 / 2, 26161 / 750)):
        bound = structured.dropblock_bound(np.diag(WORKED), None, width, 3, 0.5)
        assert bound.lam_bar == pytest.approx(lam_bar, rel=1e-15)
        assert bound.value == pytest.approx(value, rel=1e-13)
        assert (bound.rho, bound.ell) == (3, 5)
        np.testing.assert_allclose(bound.product, np.diag(bound.singular_values), atol=1e-14)


def test_singular_second_moment_matches_the_finite_data_form():
    rng = np.random.default_rng(4)
    d1, d2, N, width, block_size, retain = 4, 6, 3, 8, 2, 0.3
    M, X = rng.standard_normal((d1, d2)), rng.standard_normal((d2, N))
    S = X @ X.T  # rank 3 < 6
    bound = structured.dropblock_bound(M, S, width, block_size, retain)
    lam_bar = block_size / width * (1 - retain) / retain
    _, expected = structured.prox(np.linalg.svd(M @ X, compute_uv=False), block_size, lam_bar)
    assert bound.value == pytest.approx(expected, rel=1e-12)
    on_spectra = structured.convex_objective(bound.spectrum, bound.singular_values, block_size, lam_bar)
    assert bound.value == pytest.approx(on_spectra, rel=1e-13)
    values, vectors = np.linalg.eigh(S)
    Y = M @ (vectors * np.sqrt(np.maximum(values, 0))) @ vectors.T
    penalty = structured.spectral_ksupport_squared(bound.product, block_size)
    assert bound.value == pytest.approx(np.sum((Y - bound.product) ** 2) + lam_bar * penalty, rel=1e-12)
    outside = np.eye(d2) - X @ np.linalg.pinv(X)  # projector on the null space of S
    assert np.abs(bound.product @ outside).max() < 1e-12


def test_every_factorisation_lies_above_the_bound():
    rng = np.random.default_rng(5)
    for _ in range(200):
        d1, d2 = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        block_size = int(rng.integers(1, 4))
        width, retain = block_size * int(rng.integers(1, 4)), float(rng.uniform(0.1, 0.95))
        M, S = rng.standard_normal((d1, d2)), random_moment(rng, d2, int(rng.integers(1, d2 + 2)))
        U, V = rng.standard_normal((d1, width)), rng.standard_normal((d2, width)) * rng.uniform(0.05, 1.0)
        mask = masks.Blocks(width, block_size, retain)
        f = linear.expected_loss(M, U, V, S) + linear.regularizer(U, V, mask, S)
        bound = structured.dropblock_bound(M, S, width, block_size, retain)
        assert f >= bound.value - 1e-12 * (1 + f)


# Block norms, duplication, replication -------------------------------------------------------------------------

def test_block_norms_give_the_dropblock_regularizer():
    rng = np.random.default_rng(6)
    U, V, S = rng.standard_normal((3, 6)), rng.standard_normal((4, 6)), random_moment(rng, 4, 2)
    for block_size in (1, 2, 3, 6):
        alpha = structured.block_norms(U, V, S, block_size)
        assert alpha.shape == (6 // block_size,)
        mask = masks.Blocks(6, block_size, 0.3)
        regularizer = linear.regularizer(U, V, mask, S)
        assert linear.dropout_lambda(0.3) * np.sum(alpha**2) == pytest.approx(regularizer, rel=1e-12)
    np.testing.assert_allclose(structured.block_norms(U, V, None, 2),
                               [np.linalg.norm(U[:, j:j + 2] @ V[:, j:j + 2].T) for j in (0, 2, 4)], rtol=1e-13)


def test_duplicate_keeps_the_product_and_halves_the_penalty():
    rng = np.random.default_rng(7)
    U, V, S = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), random_moment(rng, 5, 5)
    U2, V2 = structured.duplicate(U, V)
    np.testing.assert_allclose(U2 @ V2.T, U @ V.T, atol=1e-10)
    before = np.sum(structured.block_norms(U, V, S, 2) ** 2)
    assert np.sum(structured.block_norms(U2, V2, S, 2) ** 2) == pytest.approx(before / 2, rel=1e-12)
    for _ in range(5):
        U2, V2 = structured.duplicate(U2, V2)
    np.testing.assert_allclose(U2 @ V2.T, U @ V.T, atol=1e-10)
    assert linear.regularizer(U2, V2, masks.Blocks(U2.shape[1], 2, 0.4), S) == pytest.approx(
        linear.regularizer(U, V, masks.Blocks(4, 2, 0.4), S) / 2**6, rel=1e-12)


def test_balanced_replication_keeps_the_product_and_approaches_the_l1_bound():
    rng = np.random.default_rng(8)
    U, V, S = rng.standard_normal((4, 6)), rng.standard_normal((5, 6)), random_moment(rng, 5, 7)
    U[:, :2] *= 3.0  # unbalanced blocks
    alpha = structured.block_norms(U, V, S, 2)
    l1, k = alpha.sum() ** 2, len(alpha)
    ratios = []
    for d_hat in (10, 100, 1000, 10_000):
        U2, V2 = structured.balanced_replication(U, V, S, 2, d_hat)
        np.testing.assert_allclose(U2 @ V2.T, U @ V.T, rtol=0, atol=1e-10 * np.abs(U @ V.T).max())
        beta = structured.block_norms(U2, V2, S, 2)
        ratios.append(len(beta) * np.sum(beta**2))
        assert l1 * (1 - 1e-12) <= ratios[-1] <= (d_hat + k) / d_hat * l1 * (1 + 1e-12)
    assert np.all(np.diff(ratios) < 0)
    assert ratios[-1] < k * np.sum(alpha**2) and ratios[-1] == pytest.approx(l1, rel=1e-3)


def test_balanced_replication_skips_zero_blocks():
    rng = np.random.default_rng(9)
    U, V = rng.standard_normal((3, 6)), rng.standard_normal((4, 6))
    U[:, 2:4] = 0.0
    U2, V2 = structured.balanced_replication(U, V, None, 2, 50)
    np.testing.assert_allclose(U2 @ V2.T, U @ V.T, atol=1e-10)
    assert np.all(structured.block_norms(U2, V2, None, 2) <= structured.block_norms(U, V, None, 2).max())
    assert U2.shape[1] % 2 == 0 and U2.shape[1] <= 2 * (50 + 2)


# Input checks -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: structured.ksupport_squared([1.0, -1.0], 2), "^a must"),
    (lambda: structured.ksupport_squared([[1.0]], 2), "^a must"),
    (lambda: structured.ksupport_squared([], 2), "^a must"),
    (lambda: structured.support_index([1.0, np.nan], 2), "^a must"),
    (lambda: structured.ksupport_variational([1.0], 0), "^s must"),
    (lambda: structured.ksupport_candidates([1.0], 1.5), "^s must"),
    (lambda: structured.spectral_ksupport_squared(np.ones(3), 1), "^A must"),
    (lambda: structured.prox([1.0, -2.0], 1, 1.0), "^m must"),
    (lambda: structured.prox([1.0], 1, -1.0), "lam_bar"),
    (lambda: structured.prox([1.0], 1, float("inf")), "lam_bar"),
    (lambda: structured.closed_form([1.0, 2.0], 1, 1.0), "^m must"),
    (lambda: structured.closed_form_candidates([2.0, 1.0], 0, 1.0), "^s must"),
    (lambda: structured.convex_objective([1.0, 2.0], [1.0], 1, 1.0), "^a must"),
    (lambda: structured.dropblock_bound(np.ones(3), None, 2, 1, 0.5), "^M must"),
    (lambda: structured.dropblock_bound(np.ones((2, 3)), np.eye(2), 2, 1, 0.5), "^S must"),
    (lambda: structured.dropblock_bound(np.ones((2, 3)), -np.eye(3), 2, 1, 0.5), "^S must"),
    (lambda: structured.dropblock_bound(np.ones((2, 2)), np.array([[1.0, 1.0], [0.0, 1.0]]), 2, 1, 0.5), "^S must"),
    (lambda: structured.dropblock_bound(np.ones((2, 2)), None, 0, 1, 0.5), "width"),
    (lambda: structured.dropblock_bound(np.ones((2, 2)), None, 4, 3, 0.5), "block_size"),
    (lambda: structured.dropblock_bound(np.ones((2, 2)), None, 4, 2, 0.0), "retain"),
    (lambda: structured.block_norms(np.ones((2, 3)), np.ones((2, 2)), None, 1), "U and V"),
    (lambda: structured.block_norms(np.ones((2, 4)), np.ones((2, 4)), None, 3), "block_size"),
    (lambda: structured.duplicate(np.ones(3), np.ones((2, 3))), "^U must"),
    (lambda: structured.balanced_replication(np.ones((2, 2)), np.ones((2, 2)), None, 1, 0), "copies"),
    (lambda: structured.balanced_replication(np.zeros((2, 2)), np.ones((2, 2)), None, 1, 5), "U and V"),
])
def test_bad_input_raises_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("mask", [masks.Blocks(6, 2, 0.7), masks.Blocks(6, 3, 0.4), masks.Bernoulli(6, 0.6)])
def test_enumerated_penalty_is_the_thinned_loss_minus_the_averaged_loss(mask):
    rng = np.random.default_rng(5)
    M, U, V = rng.standard_normal((4, 5)), rng.standard_normal((4, 6)), rng.standard_normal((5, 6))
    S = data.second_moment(rng.standard_normal((5, 5)))
    penalty, count = structured.enumerated_penalty(U, V, S, mask)
    assert count == len(mask.enumerate()[1])
    expected = linear.enumerated_objective(M, U, V, mask, S) - linear.expected_loss(M, U, V, S)
    assert penalty == pytest.approx(expected, rel=1e-10)


def test_enumerated_penalty_of_dropblock_is_lambda_times_the_squared_block_norms():
    rng = np.random.default_rng(6)
    U, V = rng.standard_normal((3, 6)), rng.standard_normal((4, 6))
    penalty, _ = structured.enumerated_penalty(U, V, None, masks.Blocks(6, 3, 0.6))
    assert penalty == pytest.approx((1 - 0.6) / 0.6 * np.sum(structured.block_norms(U, V, None, 3) ** 2), rel=1e-12)
    with pytest.raises(ValueError):
        structured.enumerated_penalty(U, V, None, masks.Blocks(3, 3, 0.6))
