"""L-BFGS with Newton polish and its certificate; the flat dropout objective."""

import numpy as np
import pytest
import torch

from dropnb import linear, masks, optimize


def quadratic(x):
    """½(x₀² + 4x₁²): minimum 0 at the origin, curvatures 1 and 4, no flat direction."""
    return 0.5 * (x[0] ** 2 + 4 * x[1] ** 2)


def test_certificate_of_a_quadratic():
    certificate = optimize.certify(quadratic, np.array([1e-3, 0.0]))
    assert certificate.gradient_norm == pytest.approx(1e-3)
    assert certificate.curvature == pytest.approx(1.0)
    assert certificate.null == 0
    assert certificate.distance == pytest.approx(1e-3)
    assert certificate.value_gap == pytest.approx(certificate.value)  # exact for a quadratic along x₀


def test_minimize_finds_the_minimum_of_a_quadratic():
    certificate = optimize.minimize(quadratic, np.array([3.0, -2.0]))
    assert certificate.value < 1e-20 and certificate.gradient_norm < 1e-10


def test_certificate_counts_flat_directions():
    def valley(x):  # minima on the line x₀ = x₁
        return (x[0] - x[1]) ** 2

    certificate = optimize.minimize(valley, np.array([1.0, -2.0]))
    assert certificate.null == 1 and certificate.curvature == pytest.approx(4.0)


def test_newton_polish_converges_on_a_manifold_of_minima_without_a_hessian_matrix(monkeypatch):
    M = np.diag([3.0, 2.0, 1.0])
    fun, _ = linear.flat_objective(M, 4, None, mask=masks.Bernoulli(4, 0.6))  # minima: a manifold (rotations)
    start = optimize.lbfgs(fun, 0.3 * np.random.default_rng(0).standard_normal(24), gtol=1e-5)

    def no_matrix(*args, **kwargs):
        raise AssertionError("the polish formed a Hessian matrix")

    monkeypatch.setattr(torch.autograd.functional, "hessian", no_matrix)
    polished = optimize.newton_polish(fun, start, steps=4)
    before = np.linalg.norm(optimize.value_and_gradient(fun, start)[1])
    after = np.linalg.norm(optimize.value_and_gradient(fun, polished)[1])
    assert after < 1e-13 < before


def test_hessian_matches_finite_differences():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((3, 2))
    fun, _ = linear.flat_objective(M, 2, 0.7)
    x = rng.standard_normal(10)
    H = optimize.hessian(fun, x)
    eps = 1e-5
    for k in range(10):
        e = np.zeros(10)
        e[k] = eps
        column = (optimize.value_and_gradient(fun, x + e)[1] - optimize.value_and_gradient(fun, x - e)[1]) / (2 * eps)
        np.testing.assert_allclose(H[:, k], column, atol=1e-6)


@pytest.mark.parametrize("tied", [False, True])
def test_flat_objective_matches_the_closed_form(tied):
    rng = np.random.default_rng(1)
    M = rng.standard_normal((4, 4))
    M = M @ M.T if tied else M
    fun, unpack = linear.flat_objective(M, 3, 0.5, tied=tied)
    x = rng.standard_normal(12 if tied else 24)
    U, V = unpack(x)
    expected = linear.objective(M, U, V, masks.Bernoulli(3, 1 / 1.5))
    assert float(fun(torch.tensor(x))) == pytest.approx(expected, rel=1e-13)


def test_batched_objective_over_runs():
    rng = np.random.default_rng(2)
    M, U, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 3, 2)), rng.standard_normal((5, 4, 2))
    mask = masks.Blocks(2, 2, 0.6)
    S = np.cov(rng.standard_normal((4, 50)))
    values = linear.batched_objective(*(torch.tensor(a) for a in (M, U, V, mask.characteristic, S)))
    expected = [linear.objective(M, U[n], V[n], mask, S) for n in range(5)]
    np.testing.assert_allclose(values.numpy(), expected, rtol=1e-13)


@pytest.mark.parametrize("call, match", [
    (lambda: optimize.lbfgs(quadratic, np.array([np.nan, 1.0])), "x0"),
    (lambda: optimize.lbfgs(quadratic, np.ones(2), gtol=0.0), "gtol"),
    (lambda: linear.flat_objective(np.ones((2, 3)), 2, 1.0, tied=True), "square"),
    (lambda: linear.flat_objective(np.ones((2, 3)), 0, 1.0), "width"),
    (lambda: linear.flat_objective(np.ones((2, 3)), 2, -1.0), "lam"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_strict_saddle_reports_its_negative_curvature_and_gives_no_bound():
    """At the saddle of x₀² − x₁² the gradient vanishes, but the certificate must not certify a minimum."""
    certificate = optimize.certify(lambda x: x[0] ** 2 - x[1] ** 2, np.zeros(2))
    assert certificate.gradient_norm == 0 and certificate.negative == 1 and certificate.lowest == pytest.approx(-2.0)
    assert not certificate.is_minimum and certificate.curvature == pytest.approx(2.0)
    for bound in ("distance", "value_gap"):
        with pytest.raises(optimize.NotAMinimum, match="not a minimum"):
            getattr(certificate, bound)
    assert optimize.certify(quadratic, np.zeros(2)).require_minimum().is_minimum


def test_certificate_without_curvature_gives_no_bound():
    certificate = optimize.certify(lambda x: 0.0 * x.sum(), np.ones(2))
    assert certificate.curvature == 0.0 and certificate.distance == float("inf") and certificate.value_gap == float("inf")


def test_curve_second_derivative_of_a_quadratic_along_a_parabola():
    # f(x) = ½(x₀² + 4x₁²) along x(t) = (1 + t², t): g(t) = ½(1 + t²)² + 2t², g''(0) = 2 + 4 = 6.
    def curve(t):
        return torch.stack([1 + t**2, t])

    assert optimize.curve_second_derivative(quadratic, curve) == pytest.approx(6.0, abs=1e-14)
    # g''(t) = 6t² + 2 + 4 at t = 0.5
    assert optimize.curve_second_derivative(quadratic, curve, 0.5) == pytest.approx(7.5, abs=1e-14)


def test_curve_second_derivative_rejects_nonfinite_t():
    with pytest.raises(ValueError, match="finite"):
        optimize.curve_second_derivative(quadratic, lambda t: torch.stack([t, t]), float("nan"))


def test_column_rotation_keeps_the_product_and_turns_the_columns():
    rng = np.random.default_rng(0)
    U = torch.tensor(rng.standard_normal((4, 3)))
    t = torch.tensor(0.6, dtype=torch.float64)
    turned = linear.column_rotation(U, 0, 2, t)
    torch.testing.assert_close(turned @ turned.T, U @ U.T, rtol=0, atol=1e-13)
    torch.testing.assert_close(turned[:, 0], 0.8 * U[:, 0] + 0.6 * U[:, 2], rtol=0, atol=1e-15)
    torch.testing.assert_close(turned[:, 1], U[:, 1], rtol=0, atol=0)


def test_tied_curvature_along_a_column_rotation():
    # at u₁ ⊥ u₂ the rotation changes only λ(‖u₁‖⁴ + ‖u₂‖⁴): g''(0) = −4λ(‖u₁‖² − ‖u₂‖²)²
    U = np.diag([2.0, 1.0, 0.5])[:, :2]
    lam = 0.3
    fun, _ = linear.flat_objective(np.eye(3), 2, lam, tied=True)
    U_t = torch.tensor(U)
    def curve(t):
        return linear.column_rotation(U_t, 0, 1, t).reshape(-1)

    assert optimize.curve_second_derivative(fun, curve) == pytest.approx(-4 * lam * (4.0 - 1.0) ** 2, abs=1e-12)


@pytest.mark.parametrize("i, j, t, match", [(0, 0, 0.1, "different"), (0, 3, 0.1, "different"), (0, 1, 1.0, "t must")])
def test_column_rotation_rejects_bad_input(i, j, t, match):
    with pytest.raises(ValueError, match=match):
        linear.column_rotation(torch.ones(2, 3), i, j, torch.tensor(t))


def test_flat_objective_with_a_mask_and_second_moment_matches_the_closed_form():
    rng = np.random.default_rng(3)
    M, U, V = rng.standard_normal((3, 4)), rng.standard_normal((3, 6)), rng.standard_normal((4, 6))
    A = rng.standard_normal((4, 4))
    S, mask = A @ A.T, masks.Blocks(6, 2, 0.4)
    fun, unpack = linear.flat_objective(M, 6, None, mask=mask, S=S)
    x = np.concatenate([U.ravel(), V.ravel()])
    assert float(fun(torch.tensor(x))) == pytest.approx(linear.objective(M, U, V, mask, S), rel=1e-13)


@pytest.mark.parametrize("kwargs, match", [(dict(mask=masks.Blocks(4, 2, 0.5)), "width"),
                                           (dict(S=np.eye(3)), "S"),
                                           (dict(tied=True, S=np.eye(3)), "tied")])
def test_flat_objective_rejects_bad_mask_or_S(kwargs, match):
    M = np.ones((3, 3)) if kwargs.get("tied") else np.ones((3, 4))
    with pytest.raises(ValueError, match=match):
        linear.flat_objective(M, 6, 1.0, **kwargs)


def test_bisection_ends_within_half_its_bracket_of_the_root_and_refuses_an_empty_bracket():
    from dropnb.optimize import bisect

    assert abs(bisect(lambda z: z**3 - 2.0, 0.0, 2.0, 2.0**-30) - 2.0 ** (1 / 3)) <= 2.0**-31
    with pytest.raises(ValueError, match="^low must be below high"):
        bisect(lambda z: z - 0.5, 1.0, 0.0, 1e-6)
