"""Rounding models: each bound covers the observed error of the float64 computation it models
(against exact rational arithmetic), scales as its formula says, and rejects bad input."""

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

from dropnb import factorization as fz
from dropnb import landscape, relu_decay, rounding
from dropnb.rounding import hessian_cutoff, roundoff_tolerance


def exact(a):
    """An object array of Fractions with the same values as the float array ``a``."""
    return np.vectorize(Fraction, otypes=[object])(np.asarray(a, dtype=np.float64))


def frobenius(a) -> float:
    """‖a‖_F of an object array of Fractions, as a float (the sum of squares is exact)."""
    return float(np.sum(a * a)) ** 0.5


# --- γₙ --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 10, 1000, 2**40])
def test_roundoff_tolerance_is_gamma_n(n):
    u = Fraction(1, 2**53)
    value = n * u / (1 - n * u)
    # Three rounded operations (product, subtraction, division) in float64: relative error ≤ γ₃.
    assert abs(Fraction(roundoff_tolerance(n)) - value) <= Fraction(roundoff_tolerance(3)) * value


def test_roundoff_tolerance_of_one_operation():
    assert roundoff_tolerance(1) == pytest.approx(2.0**-53, rel=2.0**-50)
    assert rounding.UNIT_ROUNDOFF == 2.0**-53


@pytest.mark.parametrize("n", [1, 2, 10, 1000, 2**20])
def test_roundoff_tolerance_in_single_precision_is_gamma_n(n):
    u = Fraction(1, 2**24)
    value = n * u / (1 - n * u)
    assert abs(Fraction(roundoff_tolerance(n, unit=2.0**-24)) - value) <= Fraction(roundoff_tolerance(3)) * value


def test_roundoff_tolerance_in_single_precision_covers_float32_sums():
    """A float32 sum of n terms, added one by one, is within γ_{n−1}·Σ|xᵢ| (u = 2⁻²⁴) of the exact sum."""
    rng = np.random.default_rng(7)
    for n in (2, 10, 300):
        for _ in range(20):
            x = rng.standard_normal(n).astype(np.float32)
            total = np.float32(0)
            for term in x:
                total = np.float32(total + term)
            exact_sum = sum(Fraction(float(t)) for t in x)
            bound = roundoff_tolerance(n - 1, unit=2.0**-24) * float(np.abs(x.astype(np.float64)).sum())
            assert abs(Fraction(float(total)) - exact_sum) <= Fraction(bound)


@pytest.mark.parametrize("unit", [0.0, 1.0, -2.0**-24, float("nan")])
def test_roundoff_tolerance_rejects_a_bad_unit(unit):
    with pytest.raises(ValueError, match="unit"):
        roundoff_tolerance(3, unit=unit)


def test_roundoff_tolerance_increases():
    values = [roundoff_tolerance(n) for n in (1, 2, 3, 100, 10**6)]
    assert values == sorted(values) and len(set(values)) == len(values)


@pytest.mark.parametrize("n", [0, -1, 2**53, 2**60, True, 2.0])
def test_roundoff_tolerance_rejects_bad_counts(n):
    with pytest.raises(ValueError, match="^operations must"):
        roundoff_tolerance(n)


def test_gamma_covers_a_float64_sum():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.uniform(0, 1, 1000)
        total = 0.0
        for value in x:  # 999 rounded additions in sequence
            total += value
        error = abs(Fraction(total) - sum(map(Fraction, x)))
        assert error <= Fraction(roundoff_tolerance(999)) * sum(map(Fraction, x))


def test_hessian_cutoff_is_the_rounding_bound_of_a_square_matrix():
    H = np.diag([3.0, -4.0])
    assert hessian_cutoff(H) == pytest.approx(roundoff_tolerance(40) * 5.0)
    assert hessian_cutoff(3 * H) == pytest.approx(3 * hessian_cutoff(H))
    with pytest.raises(ValueError, match="square"):
        hessian_cutoff(np.ones((2, 3)))


# --- linear networks -------------------------------------------------------------------------------


def test_deep_regularizer_operations():
    assert rounding.deep_regularizer_operations((3, 5, 2)) == 2**2 * 5**3
    assert rounding.deep_regularizer_operations([6] * 6) == 25 * 216
    for bad in ((4,), (3, 0, 2), (3, 2.5)):
        with pytest.raises(ValueError, match="^sizes"):
            rounding.deep_regularizer_operations(bad)


def test_certified_linear_value_adds_the_gap_to_the_rounding_bound():
    rng = np.random.default_rng(2)
    M, A = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    S = A @ A.T
    certificate = SimpleNamespace(value_gap=1e-9, x=np.zeros(7 * 2))
    rounding_part = roundoff_tolerance(4 * 14 * 4) * (np.trace(M @ S @ M.T) + 2.0)
    assert rounding.certified_linear_value(certificate, M, S, 2.0) == pytest.approx(1e-9 + rounding_part, rel=1e-12)
    with pytest.raises(ValueError, match="^certificate"):
        rounding.certified_linear_value(object(), M, S, 2.0)


def test_certified_factorization_bounds():
    rng = np.random.default_rng(3)
    M, U, V = rng.standard_normal((5, 4)), rng.standard_normal((5, 2)), rng.standard_normal((4, 2))
    without = rounding.certified_factorization(SimpleNamespace(value_gap=0.0, distance=0.0), U, V, M, 1.0)
    gamma = roundoff_tolerance(4 * (5 * 4 * 4 + 4 * 9))
    assert without["value"] == pytest.approx(gamma * (np.sum(M**2) + 1.0))
    assert without["product"] == without["score"] == pytest.approx(gamma * np.linalg.norm(M))
    moved = rounding.certified_factorization(SimpleNamespace(value_gap=1e-6, distance=1e-3), U, V, M, 1.0)
    assert moved["value"] > without["value"] and moved["product"] >= moved["score"] > without["score"]
    with pytest.raises(ValueError, match="^U and V"):
        rounding.certified_factorization(SimpleNamespace(value_gap=0.0, distance=0.0), U, V.T, M, 1.0)


# --- the tied objective ----------------------------------------------------------------------------


def tied_point(rng, d=4, r=3):
    A = rng.standard_normal((d, d))
    return A @ A.T, rng.standard_normal((d, r)), float(rng.uniform(0.1, 2.0))


def test_tied_value_covers_the_rounding_error_of_the_objective():
    rng = np.random.default_rng(4)
    for _ in range(20):
        M, U, lam = tied_point(rng)
        Mx, Ux, lamx = exact(M), exact(U), Fraction(lam)
        value = np.sum((Mx - Ux @ Ux.T) ** 2) + lamx * np.sum(np.sum(Ux * Ux, axis=0) ** 2)
        error = abs(Fraction(landscape.tied_objective(M, U, lam)) - value)
        assert 0 < rounding.tied_value(M, U, lam)
        assert error <= Fraction(rounding.tied_value(M, U, lam))


def test_tied_gradient_covers_the_rounding_error_of_the_gradient():
    rng = np.random.default_rng(5)
    for _ in range(20):
        M, U, lam = tied_point(rng)
        Mx, Ux, lamx = exact(M), exact(U), Fraction(lam)
        gradient = 4 * (Ux @ Ux.T - Mx) @ Ux + 4 * lamx * Ux * np.sum(Ux * Ux, axis=0)
        error = frobenius(exact(landscape.tied_gradient(M, U, lam)) - gradient)
        assert error <= rounding.tied_gradient(M, U, lam)


def test_untied_gradient_covers_the_rounding_error_of_the_gradient():
    rng = np.random.default_rng(8)
    for _ in range(20):
        d1, d2, r = rng.integers(1, 6, size=3)
        M, U, V = rng.standard_normal((d1, d2)), rng.standard_normal((d1, r)), rng.standard_normal((d2, r))
        lam = float(rng.uniform(0.0, 2.0))
        Mx, Ux, Vx, lamx = exact(M), exact(U), exact(V), Fraction(lam)
        residual = Ux @ Vx.T - Mx
        exact_u = 2 * residual @ Vx + 2 * lamx * Ux * np.sum(Vx * Vx, axis=0)
        exact_v = 2 * residual.T @ Ux + 2 * lamx * Vx * np.sum(Ux * Ux, axis=0)
        g_u, g_v = landscape.untied_gradient(M, U, V, lam)
        error = (frobenius(exact(g_u) - exact_u) ** 2 + frobenius(exact(g_v) - exact_v) ** 2) ** 0.5
        assert 0 < rounding.untied_gradient(M, U, V, lam)
        assert error <= rounding.untied_gradient(M, U, V, lam)
    # ‖4M‖ + (1+λ)‖2U‖‖2V‖ = 4(‖M‖ + (1+λ)‖U‖‖V‖): the bound scales by 8
    assert rounding.untied_gradient(4 * M, 2 * U, 2 * V, lam) == pytest.approx(8 * rounding.untied_gradient(M, U, V, lam), rel=1e-14)
    with pytest.raises(ValueError, match="^U and V must"):
        rounding.untied_gradient(M, U, V[:-1] if len(V) > 1 else np.ones((2, r)), lam)
    with pytest.raises(ValueError, match="^lam must"):
        rounding.untied_gradient(M, U, V, -1.0)


def test_tied_bounds_scale_with_the_data():
    rng = np.random.default_rng(6)
    M, U, lam = tied_point(rng)
    # ‖4M‖ + (1+λ)‖2U‖² = 4(‖M‖ + (1+λ)‖U‖²): the value bound scales by 16, the gradient bound by 8.
    assert rounding.tied_value(4 * M, 2 * U, lam) == pytest.approx(16 * rounding.tied_value(M, U, lam), rel=1e-14)
    assert rounding.tied_gradient(4 * M, 2 * U, lam) == pytest.approx(8 * rounding.tied_gradient(M, U, lam), rel=1e-14)


def test_tied_bounds_reject_bad_input():
    M, U, lam = tied_point(np.random.default_rng(7))
    with pytest.raises(ValueError, match="^M must"):
        rounding.tied_value(M[:3], U, lam)
    with pytest.raises(ValueError, match="^lam must"):
        rounding.tied_gradient(M, U, -1.0)
    with pytest.raises(ValueError, match="^U must"):
        rounding.tied_value(M, np.full_like(U, np.nan), lam)


# --- matrix factorization --------------------------------------------------------------------------


def test_factorization_gradient_covers_the_gradient_at_the_optimum():
    rng = np.random.default_rng(8)
    for _ in range(10):
        Y = rng.standard_normal((6, 5))
        lam = float(np.linalg.svd(Y, compute_uv=False)[2])  # three singular values above λ
        U, V = fz.optimal_factors(Y, lam)
        Yx, Ux, Vx, lamx = exact(Y), exact(U), exact(V), Fraction(lam)
        R = Yx - Ux @ Vx.T
        grad_u, grad_v = fz.gradient(Y, U, V, lam)
        error = (frobenius(exact(grad_u) - (-R @ Vx + lamx * Ux)) ** 2
                 + frobenius(exact(grad_v) - (-R.T @ Ux + lamx * Vx)) ** 2) ** 0.5
        assert error <= rounding.factorization_gradient(Y, U, V, lam, fz.spectral_rounding(Y, U, V))


def factorization_exact_value(Y, U, V, lam, kappa) -> Fraction:
    """F(U, V) = ½‖Y − UVᵀ‖² + (λ/2)(‖U‖² + ‖V‖²) + κ Σᵢ‖uᵢ‖²‖vᵢ‖² in exact arithmetic."""
    Yx, Ux, Vx, lamx, kappax = exact(Y), exact(U), exact(V), Fraction(lam), Fraction(kappa)
    R = Yx - Ux @ Vx.T
    units = np.sum(Ux * Ux, axis=0) * np.sum(Vx * Vx, axis=0)
    return np.sum(R * R) / 2 + lamx * (np.sum(Ux * Ux) + np.sum(Vx * Vx)) / 2 + kappax * np.sum(units)


@pytest.mark.parametrize("lam, kappa", [(0.0, 0.0), (0.3, 0.0), (30.0, 0.0), (0.3, 5.0), (30.0, 300.0)])
def test_factorization_value_covers_the_rounding_error_of_the_objective(lam, kappa):
    """The bound covers the observed error, and each of its terms covers its own part of F: with a
    large λ or κ the penalty dominates F and its rounding, so a bound that drops or subtracts the
    penalty's term falls below γₙ times that term."""
    rng = np.random.default_rng(9)
    for _ in range(10):
        Y, U, V = rng.standard_normal((5, 4)), rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
        bound = fz.value_rounding(Y, U, V, lam, kappa)
        error = abs(Fraction(fz.objective(Y, U, V, lam, kappa)) - factorization_exact_value(Y, U, V, lam, kappa))
        assert error <= Fraction(bound)
        su, sv = np.sum(U**2), np.sum(V**2)
        gamma = roundoff_tolerance(10 * 5 * 4 * 3)
        assert bound >= gamma * (np.linalg.norm(Y) ** 2 + lam * (su + sv) + kappa * su * sv)


def test_factorization_bounds_formula_and_bad_input():
    Y, U, V = np.ones((6, 5)), np.ones((6, 3)), np.ones((5, 3))
    assert rounding.factorization_operations(Y, U) == 900
    assert rounding.factorization_operations(Y, np.ones((4, 6, 2))) == 600
    size = np.linalg.norm(U) + np.linalg.norm(V)
    assert rounding.factorization_gradient(Y, U, V, 2.0, 1e-12) == pytest.approx(
        (2e-12 + roundoff_tolerance(900) * 2.0) * size)
    with pytest.raises(ValueError, match="^residual_rounding"):
        rounding.factorization_gradient(Y, U, V, 2.0, -1.0)
    with pytest.raises(ValueError, match="^Y must"):
        rounding.factorization_operations(np.ones(3), U)


# --- two-layer ReLU networks -----------------------------------------------------------------------


def relu_point(rng, r=4, m=15):
    X = np.vstack([rng.uniform(-1, 1, m), np.ones(m)])
    return X, rng.standard_normal((1, m)), rng.standard_normal((2, r)), rng.standard_normal((1, r)), 0.1


def relu_exact(X, Y, W1, W2, lam):
    """F and ∇F of the two-layer ReLU network in exact arithmetic (ReLU′(0) = 0)."""
    X, Y, W1, W2, lam = exact(X), exact(Y), exact(W1), exact(W2), Fraction(lam)
    Z = W1.T @ X
    active = np.vectorize(lambda z: z > 0, otypes=[bool])(Z)
    H = np.where(active, Z, Fraction(0))
    G = Y - W2 @ H
    value = np.sum(G * G) / 2 + lam * (np.sum(W1 * W1) + np.sum(W2 * W2)) / 2
    back = np.where(active, W2.T @ G, Fraction(0))
    return value, -X @ back.T + lam * W1, -G @ H.T + lam * W2


def test_relu_bounds_cover_the_rounding_errors_of_value_and_gradient():
    rng = np.random.default_rng(9)
    for _ in range(10):
        X, Y, W1, W2, lam = relu_point(rng)
        value, g1, g2 = relu_exact(X, Y, W1, W2, lam)
        assert abs(Fraction(relu_decay.objective(X, Y, W1, W2, lam)) - value) <= Fraction(
            rounding.relu_value(X, Y, W1, W2, lam))
        c1, c2 = relu_decay.gradient(X, Y, W1, W2, lam)
        error = (frobenius(exact(c1) - g1) ** 2 + frobenius(exact(c2) - g2) ** 2) ** 0.5
        assert error <= rounding.relu_gradient(X, Y, W1, W2, lam)


def test_relu_bounds_formula_scaling_and_bad_input():
    X, Y, W1, W2, lam = relu_point(np.random.default_rng(10))
    assert rounding.relu_gamma(W1, X) == roundoff_tolerance(8 * (2 + 4 + 15))
    assert rounding.relu_gamma(W1, X, 16) == roundoff_tolerance(16 * (2 + 4 + 15))
    np.testing.assert_array_equal(rounding.relu_magnitude(X, W1, W2), np.abs(W2) @ (np.abs(W1).T @ np.abs(X)))
    # Without weight decay the value bound is γₙ(‖Y‖ + ‖M‖)², homogeneous of degree 2 in (Y, W₂).
    assert rounding.relu_value(X, 2 * Y, W1, 2 * W2, 0.0) == pytest.approx(4 * rounding.relu_value(X, Y, W1, W2, 0.0))
    with pytest.raises(ValueError, match="^shapes"):
        rounding.relu_value(X, Y.T, W1, W2, lam)
    with pytest.raises(ValueError, match="^decay must"):
        rounding.relu_gradient(X, Y, W1, W2, float("nan"))


def test_certified_excursion_is_one_at_the_edges_of_its_tolerance():
    rng = np.random.default_rng(4)
    M, A = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    S, floor, gap = A @ A.T, 2.0, 1e-9
    certificate = SimpleNamespace(value_gap=gap, x=np.zeros(14))
    rho = roundoff_tolerance(4 * 14 * 4) * (np.trace(M @ S @ M.T) + floor)  # the rounding, by hand
    # f ± ρ is itself rounded near F*: the edges hold to the cancellation error ulp(F*)/ρ
    assert rounding.certified_excursion(floor + gap + rho, floor, certificate, M, S) == pytest.approx(1.0, rel=1e-3)
    assert rounding.certified_excursion(floor - rho, floor, certificate, M, S) == pytest.approx(1.0, rel=1e-3)
    assert rounding.certified_excursion(floor, floor, certificate, M, S) == 0.0
    widened = rounding.certified_excursion(floor - rho, floor, certificate, M, S, extra_rounding=rho)
    assert widened == pytest.approx(0.5, rel=1e-3)


def test_linear_value_rounding_is_the_value_part_of_the_factorization_bound():
    rng = np.random.default_rng(7)
    M, U, V = rng.standard_normal((5, 4)), rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    by_hand = roundoff_tolerance(4 * (5 * 4 * (3 + 2) + 9 * (5 + 4))) * (np.sum(M**2) + 1.5)
    assert rounding.linear_value_rounding(M, 3, 1.5) == pytest.approx(by_hand, rel=1e-15)
    assert rounding.linear_value_rounding(M, 3, -1.5) == rounding.linear_value_rounding(M, 3, 1.5)
    whole = rounding.certified_factorization(SimpleNamespace(value_gap=0.0, distance=0.0), U, V, M, 1.5)
    assert rounding.linear_value_rounding(M, 3, 1.5) == pytest.approx(whole["value"], rel=1e-15)
