"""Risk, derivatives and critical points of linear networks, against data, autograd and L-BFGS."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import networks, optimize


def relative_error(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300)


def regression_data(n0, n2, m, rng):
    X = rng.standard_normal((n0, m))
    return X, rng.standard_normal((n2, n0)) @ X + 0.5 * rng.standard_normal((n2, m))


def torch_shallow_risk(moments, shape_u, shape_v):
    """R(U, V) of x = (vec U, vec V) in torch, written from (1.13)."""
    Sxx, Sxy, Syy = (torch.tensor(S) for S in moments)
    split = shape_u[0] * shape_u[1]

    def fun(x):
        U, V = x[:split].reshape(shape_u), x[split:].reshape(shape_v)
        return torch.trace(Syy - 2 * Sxy.T @ V @ U.T + U @ V.T @ Sxx @ V @ U.T)

    return fun


def test_risk_with_empirical_moments_is_the_empirical_risk():
    rng = np.random.default_rng(0)
    X, Y = regression_data(5, 3, 200, rng)
    U, V = rng.standard_normal((3, 2)), rng.standard_normal((5, 2))
    empirical = np.sum((Y - U @ V.T @ X) ** 2) / X.shape[1]
    assert networks.shallow_risk(networks.moments(X, Y), U, V) == pytest.approx(empirical, rel=1e-12)


@settings(max_examples=12, deadline=None)
@given(n0=st.integers(1, 5), n1=st.integers(1, 3), n2=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_shallow_derivatives_match_autograd(n0, n1, n2, seed):
    rng = np.random.default_rng(seed)
    moments = networks.moments(*regression_data(n0, n2, 30, rng))
    U, V = rng.standard_normal((n2, n1)), rng.standard_normal((n0, n1))
    x = np.concatenate([U.ravel(), V.ravel()])
    fun = torch_shallow_risk(moments, U.shape, V.shape)
    value, gradient = optimize.value_and_gradient(fun, x)
    assert networks.shallow_risk(moments, U, V) == pytest.approx(value, rel=1e-12)
    assert relative_error(np.concatenate([g.ravel() for g in networks.shallow_gradient(moments, U, V)]),
                          gradient) <= 1e-10
    assert relative_error(networks.shallow_hessian(moments, U, V), optimize.hessian(fun, x)) <= 1e-10


def test_hessian_form_is_twice_the_printed_expression():
    rng = np.random.default_rng(1)
    moments = networks.moments(*regression_data(5, 4, 100, rng))
    Sxx, Sxy, _ = moments
    U, V, DU, DV = (rng.standard_normal(shape) for shape in [(4, 2), (5, 2), (4, 2), (5, 2)])
    root = np.linalg.cholesky(Sxx)  # ‖A Σxx^{1/2}‖_F = ‖A L‖_F for Σxx = LLᵀ
    printed = (np.sum(((U @ DV.T + DU @ V.T) @ root) ** 2)
               + 2 * np.sum((DU @ DV.T) * (U @ V.T @ Sxx - Sxy.T)))
    delta = np.concatenate([DU.ravel(), DV.ravel()])
    assert delta @ networks.shallow_hessian(moments, U, V) @ delta == pytest.approx(2 * printed, rel=1e-10)


def test_deep_risk_of_two_layers_is_the_shallow_risk():
    rng = np.random.default_rng(2)
    moments = networks.moments(*regression_data(5, 4, 50, rng))
    U, V = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    fun, unpack = networks.deep_flat_risk(moments, (5, 3, 4))
    x = np.concatenate([V.T.ravel(), U.ravel()])
    W1, W2 = unpack(x)
    np.testing.assert_array_equal(W1, V.T)
    np.testing.assert_array_equal(W2, U)
    shallow = networks.shallow_risk(moments, U, V)
    assert networks.deep_risk(moments, [V.T, U]) == pytest.approx(shallow, rel=1e-12)
    assert optimize.value_and_gradient(fun, x)[0] == pytest.approx(shallow, rel=1e-12)


@pytest.fixture(scope="module")
def instance():
    rng = np.random.default_rng(3)
    moments = networks.moments(*regression_data(5, 4, 200, rng))
    C = rng.standard_normal((2, 2)) + 2 * np.eye(2)
    return moments, networks.shallow_critical_points(moments, 2, C)


def test_key_matrix_is_the_eigendecomposition():
    rng = np.random.default_rng(4)
    moments = networks.moments(*regression_data(5, 4, 60, rng))
    Sxx, Sxy, _ = moments
    values, Q = networks.key_matrix(moments)
    Sigma = Sxy.T @ np.linalg.solve(Sxx, Sxy)
    assert np.all(np.diff(values) <= 0)
    assert relative_error(Q * values @ Q.T, Sigma) <= 1e-12
    np.testing.assert_allclose(Q.T @ Q, np.eye(4), rtol=0, atol=1e-13)


def test_critical_points_have_zero_gradient_and_the_predicted_value(instance):
    moments, points = instance
    assert [p.subset for p in points] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for point in points:
        norm_u, norm_v = np.linalg.norm(point.U), np.linalg.norm(point.V)  # size of the terms of 2(UVᵀΣxx − Σyx)V
        scale = (norm_u * norm_v * np.linalg.norm(moments[0]) + np.linalg.norm(moments[1])) * max(norm_u, norm_v)
        for gradient in networks.shallow_gradient(moments, point.U, point.V):
            assert np.abs(gradient).max() <= 1e-10 * scale
        assert networks.shallow_risk(moments, point.U, point.V) == pytest.approx(
            networks.critical_value(moments, point.subset), rel=1e-12)


def test_first_subset_is_the_global_minimum_and_lbfgs_cannot_beat_it(instance):
    moments, points = instance
    values, _ = networks.key_matrix(moments)
    risks = [networks.shallow_risk(moments, p.U, p.V) for p in points]
    optimum = np.trace(moments[2]) - values[:2].sum()
    assert int(np.argmin(risks)) == 0 and risks[0] == pytest.approx(optimum, rel=1e-12)
    fun, _ = networks.deep_flat_risk(moments, (5, 2, 4))
    rng = np.random.default_rng(5)
    for _ in range(3):
        found = optimize.minimize(fun, rng.standard_normal(5 * 2 + 2 * 4))
        assert found.value >= optimum * (1 - 1e-9)
        assert found.value == pytest.approx(optimum, rel=1e-9)


def test_only_the_global_minimum_lacks_negative_curvature(instance):
    moments, points = instance
    for point in points:
        H = networks.shallow_hessian(moments, point.U, point.V)
        eigenvalues = np.linalg.eigvalsh(H)
        cutoff = 1e-9 * np.linalg.norm(H, 2)
        if point.subset == (0, 1):
            assert eigenvalues[0] >= -cutoff
        else:
            assert eigenvalues[0] < -cutoff
        # one negative direction per pair k < j with k ∉ J, j ∈ J
        swaps = sum(k < j for j in point.subset for k in range(4) if k not in point.subset)
        assert np.sum(eigenvalues < -cutoff) == swaps


def test_three_scalar_layers_are_flat_at_the_origin():
    moments = (np.array([[1.3]]), np.array([[0.7]]), np.array([[2.0]]))
    assert networks.deep_risk(moments, [np.zeros((1, 1))] * 3) == 2.0
    fun, _ = networks.deep_flat_risk(moments, (1, 1, 1, 1))
    value, gradient = optimize.value_and_gradient(fun, np.zeros(3))
    assert value == 2.0
    assert not gradient.any()
    assert not optimize.hessian(fun, np.zeros(3)).any()
    t = 0.1  # along (t, t, t): R − σyy = −2σyx t³ + σxx t⁶
    assert networks.deep_risk(moments, [np.full((1, 1), t)] * 3) - 2.0 == pytest.approx(-1.4 * t**3 + 1.3 * t**6)


def test_critical_value_of_the_empty_subset_is_the_risk_at_the_origin():
    rng = np.random.default_rng(6)
    moments = networks.moments(*regression_data(3, 2, 20, rng))
    assert networks.critical_value(moments, ()) == pytest.approx(np.trace(moments[2]), rel=1e-15)
    values, _ = networks.key_matrix(moments)
    assert networks.critical_value(moments, [1]) == pytest.approx(np.trace(moments[2]) - values[1], rel=1e-15)


SPD, CROSS, OUT = np.eye(3), np.ones((3, 2)), np.eye(2)
GOOD = (SPD, CROSS, OUT)


@pytest.mark.parametrize("call, match", [
    (lambda: networks.moments(np.ones((3, 4)), np.ones((2, 5))), "columns"),
    (lambda: networks.moments(np.ones((3, 4)), np.full((2, 4), np.nan)), "Y"),
    (lambda: networks.shallow_risk((SPD, CROSS), np.ones((2, 1)), np.ones((3, 1))), "moments"),
    (lambda: networks.shallow_risk((np.triu(np.ones((3, 3))), CROSS, OUT), np.ones((2, 1)), np.ones((3, 1))), "Sxx"),
    (lambda: networks.shallow_risk((SPD, np.ones((2, 3)), OUT), np.ones((2, 1)), np.ones((3, 1))), "Sxy"),
    (lambda: networks.shallow_risk((SPD, CROSS, np.full((2, 2), np.inf)), np.ones((2, 1)), np.ones((3, 1))), "Syy"),
    (lambda: networks.shallow_gradient(GOOD, np.ones((3, 1)), np.ones((3, 1))), "U"),
    (lambda: networks.shallow_hessian(GOOD, np.ones((2, 1)), np.ones((3, 2))), "V"),
    (lambda: networks.shallow_hessian(GOOD, np.ones((2, 1)), np.ones(3)), "V"),
    (lambda: networks.key_matrix((np.diag([1.0, 0.0, 1.0]), CROSS, OUT)), "positive definite"),
    (lambda: networks.shallow_critical_points((np.diag([1.0, -1.0, 1.0]), CROSS, OUT), 1), "positive definite"),
    (lambda: networks.shallow_critical_points(GOOD, 3), "width"),
    (lambda: networks.shallow_critical_points(GOOD, 0), "width"),
    (lambda: networks.shallow_critical_points(GOOD, 2, np.ones((2, 2))), "C"),
    (lambda: networks.shallow_critical_points(GOOD, 2, np.eye(3)), "C"),
    (lambda: networks.shallow_critical_points(GOOD, 1, np.array([[np.nan]])), "C"),
    (lambda: networks.critical_value(GOOD, (0, 2)), "subset"),
    (lambda: networks.critical_value(GOOD, (1, 1)), "subset"),
    (lambda: networks.critical_value(GOOD, (0.5,)), "subset"),
    (lambda: networks.deep_risk(GOOD, [np.ones((2, 3)), np.ones((2, 3))]), "layers"),
    (lambda: networks.deep_risk(GOOD, [np.ones((2, 2)), np.ones((2, 2))]), "layers"),
    (lambda: networks.deep_flat_risk(GOOD, (3, 2)), "sizes"),
    (lambda: networks.deep_flat_risk(GOOD, (3, 0, 2)), "sizes"),
    (lambda: networks.deep_flat_risk(GOOD, (3, 1, 3)), "sizes"),
])
def test_bad_input_raises_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_planted_moments_have_the_requested_key_spectrum():
    rng = np.random.default_rng(3)
    moments = networks.planted_moments(6, [4.0, 2.0, 1.0], rng)
    values, _ = networks.key_matrix(moments)
    assert values == pytest.approx([4.0, 2.0, 1.0], rel=1e-12)
    Sxx, Sxy, Syy = moments
    joint = np.block([[Sxx, Sxy], [Sxy.T, Syy]])
    assert np.linalg.eigvalsh(joint).min() > 0


@pytest.mark.parametrize("bad", [[], [1.0, -1.0], [np.nan]])
def test_planted_moments_reject_bad_spectra(bad):
    with pytest.raises(ValueError, match="eigenvalues"):
        networks.planted_moments(4, bad, np.random.default_rng(0))


def test_planted_moments_need_enough_inputs():
    with pytest.raises(ValueError, match="n0"):
        networks.planted_moments(2, [3.0, 2.0, 1.0], np.random.default_rng(0))


def test_balanced_scalar_steps_follow_gradient_descent_on_the_layers():
    """The balanced recurrence is gradient descent on (w₁, …, w_L) from the balanced start."""
    sxx, syx, syy, eta, level = 1.3, 0.7, 2.0, 0.05, 0.5
    for depth in (2, 3):
        w = torch.full((depth,), 0.05, dtype=torch.float64, requires_grad=True)
        steps = 0
        while w.detach()[0] < level:
            p = torch.prod(w)
            (g,) = torch.autograd.grad(syy - 2 * syx * p + sxx * p**2, w)
            w = (w - eta * g).detach().requires_grad_(True)
            steps += 1
        assert networks.balanced_scalar_steps(depth, [0.05], eta, sxx, syx, level)[0] == steps


def test_balanced_scalar_steps_reject_bad_levels():
    with pytest.raises(ValueError, match="level"):
        networks.balanced_scalar_steps(3, [0.1], 0.01, 1.3, 0.7, 0.05)
    with pytest.raises(ValueError, match="level"):
        networks.balanced_scalar_steps(3, [0.1], 0.01, 1.3, 0.7, 2.0)


def test_planted_moments_follow_their_documented_input_law():
    """Σxx = AAᵀ/n₀ + I/2 with A the generator's first Gaussian draw (n₀ × n₀): another scale keeps the
    key spectrum, so only this pins the law the chapter's instances are drawn from."""
    n0 = 5
    Sxx, _, _ = networks.planted_moments(n0, [3.0, 1.0], np.random.default_rng(4))
    A = np.random.default_rng(4).standard_normal((n0, n0))
    np.testing.assert_allclose(Sxx, A @ A.T / n0 + np.eye(n0) / 2, rtol=0, atol=1e-13)


def test_empirical_optimum_is_the_top_critical_value_and_depends_on_the_row_space_of_x_only():
    rng = np.random.default_rng(11)
    X, Y = regression_data(4, 3, 30, rng)
    for width in (1, 2, 3):
        best = networks.critical_value(networks.moments(X, Y), range(width))
        assert networks.empirical_optimum(X, Y, width) == pytest.approx(best, rel=1e-12)
    C = rng.standard_normal((3, 30))  # X = BC: a singular Σxx with the row space of C
    X_singular = rng.standard_normal((6, 3)) @ C
    for width in (1, 2):
        best = networks.critical_value(networks.moments(C, Y), range(width))
        assert networks.empirical_optimum(X_singular, Y, width) == pytest.approx(best, rel=1e-10)
