"""Exact gradients, Hessians and critical points of the dropout objectives, against autograd and the closed form."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import data, landscape, linear, optimize, shrinkage


def relative_error(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300)


def symmetric(d, rng):
    A = rng.standard_normal((d, d))
    return A + A.T


def psd_with_eigenvalues(values, rng):
    E = data.haar_orthogonal(len(values), rng)
    return (E * values) @ E.T


@settings(max_examples=12, deadline=None)
@given(d=st.integers(1, 5), r=st.integers(1, 4), lam=st.sampled_from([0.0, 0.3]) | st.floats(0.0, 5.0),
       seed=st.integers(0, 2**32 - 1))
def test_tied_derivatives_match_autograd(d, r, lam, seed):
    rng = np.random.default_rng(seed)
    M, U = symmetric(d, rng), rng.standard_normal((d, r))
    fun, _ = linear.flat_objective(M, r, lam, tied=True)
    value, gradient = optimize.value_and_gradient(fun, U.ravel())
    assert landscape.tied_objective(M, U, lam) == pytest.approx(value, rel=1e-12)
    assert relative_error(landscape.tied_gradient(M, U, lam).ravel(), gradient) <= 1e-12
    assert relative_error(landscape.tied_hessian(M, U, lam), optimize.hessian(fun, U.ravel())) <= 1e-12


@settings(max_examples=12, deadline=None)
@given(d1=st.integers(1, 5), d2=st.integers(1, 5), r=st.integers(1, 4),
       lam=st.sampled_from([0.0, 0.3]) | st.floats(0.0, 5.0), seed=st.integers(0, 2**32 - 1))
def test_untied_derivatives_match_autograd(d1, d2, r, lam, seed):
    rng = np.random.default_rng(seed)
    M, U, V = rng.standard_normal((d1, d2)), rng.standard_normal((d1, r)), rng.standard_normal((d2, r))
    x = np.concatenate([U.ravel(), V.ravel()])
    fun, _ = linear.flat_objective(M, r, lam)
    value, gradient = optimize.value_and_gradient(fun, x)
    assert landscape.untied_objective(M, U, V, lam) == pytest.approx(value, rel=1e-12)
    grad_u, grad_v = landscape.untied_gradient(M, U, V, lam)
    assert relative_error(np.concatenate([grad_u.ravel(), grad_v.ravel()]), gradient) <= 1e-12
    assert relative_error(landscape.untied_hessian(M, U, V, lam), optimize.hessian(fun, x)) <= 1e-12


@pytest.mark.parametrize("lam", [0.0, 0.7, 3.0])
def test_hessian_products_are_the_matrices_applied_and_self_adjoint(lam):
    rng = np.random.default_rng(11)
    M, U = symmetric(4, rng), rng.standard_normal((4, 3))
    D, E = rng.standard_normal((2, 4, 3))
    HD = landscape.tied_hessian_product(M, U, lam, D)
    assert relative_error(HD.ravel(), landscape.tied_hessian(M, U, lam) @ D.ravel()) <= 1e-13
    assert np.sum(HD * E) == pytest.approx(np.sum(D * landscape.tied_hessian_product(M, U, lam, E)), rel=1e-12)

    M, U, V = rng.standard_normal((4, 5)), rng.standard_normal((4, 2)), rng.standard_normal((5, 2))
    DU, DV, EU, EV = rng.standard_normal((4, 2)), rng.standard_normal((5, 2)), rng.standard_normal((4, 2)), \
        rng.standard_normal((5, 2))
    HU, HV = landscape.untied_hessian_product(M, U, V, lam, DU, DV)
    flat = landscape.untied_hessian(M, U, V, lam) @ np.concatenate([DU.ravel(), DV.ravel()])
    assert relative_error(np.concatenate([HU.ravel(), HV.ravel()]), flat) <= 1e-13
    GU, GV = landscape.untied_hessian_product(M, U, V, lam, EU, EV)
    assert np.sum(HU * EU) + np.sum(HV * EV) == pytest.approx(np.sum(DU * GU) + np.sum(DV * GV), rel=1e-12)


def feasible_subsets(values, r, lam):
    """Subsets E (|E| ≤ r) with min_{j∈E} λⱼ > λ Σ_{j∈E} λⱼ / (r + λ|E|), by a loop over bitmasks."""
    d, count = len(values), 0
    for bits in range(2**d):
        chosen = [values[j] for j in range(d) if bits >> j & 1]
        if len(chosen) <= r and all(v > lam * sum(chosen) / (r + lam * len(chosen)) for v in chosen):
            count += 1
    return count


@pytest.mark.parametrize("lam", [0.2, 3.0, 20.0])
def test_equalized_critical_points(lam):
    values, r = np.array([4.0, 2.5, 1.5, 0.7]), 3
    M = psd_with_eigenvalues(values, np.random.default_rng(3))
    points = landscape.equalized_critical_points(M, r, lam)
    assert len(points) == feasible_subsets(list(values), r, lam)
    keys = [(len(p.subset), p.subset) for p in points]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    scale = (1 + np.linalg.norm(M)) ** 1.5
    optimum = shrinkage.optimal_value(values, r, lam)
    objective_values = []
    for point in points:
        assert point.U.shape == (4, r)
        assert np.abs(landscape.tied_gradient(M, point.U, lam)).max() <= 1e-12 * scale
        norms = np.diag(point.U.T @ point.U)
        np.testing.assert_allclose(norms, np.sum(point.U**2) / r, rtol=0, atol=1e-12 * scale)
        objective_values.append(landscape.tied_objective(M, point.U, lam))
        eigenvalues = np.linalg.eigvalsh(landscape.tied_hessian(M, point.U, lam))
        is_minimum = objective_values[-1] == pytest.approx(optimum, rel=1e-12)
        assert (eigenvalues[0] < -1e-9 * scale) != is_minimum  # strict saddle unless global
    assert min(objective_values) == pytest.approx(optimum, rel=1e-12)


def test_zero_subset_gives_the_zero_factor():
    points = landscape.equalized_critical_points(np.diag([2.0, 1.0]), 2, 0.5)
    assert points[0].subset == () and not points[0].U.any()


def test_critical_point_search_finds_critical_points():
    rng = np.random.default_rng(4)
    values, r, lam = np.array([3.0, 1.0]), 2, 0.5
    M = psd_with_eigenvalues(values, rng)
    fun, _ = linear.flat_objective(M, r, lam, tied=True)
    found = landscape.critical_point_search(lambda x: landscape.tied_gradient(M, x.reshape(2, r), lam).ravel(),
                                            lambda x: landscape.tied_hessian(M, x.reshape(2, r), lam),
                                            rng.standard_normal((6, 2 * r)), gtol=1e-10)
    assert found
    for x in found:
        _, gradient = optimize.value_and_gradient(fun, x)
        assert np.linalg.norm(gradient) <= 1e-9
        assert landscape.tied_objective(M, x.reshape(2, r), lam) >= shrinkage.optimal_value(values, r, lam) - 1e-10


GOOD = np.eye(2)


@pytest.mark.parametrize("call, match", [
    (lambda: landscape.tied_gradient(np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones((2, 1)), 1.0), "symmetric"),
    (lambda: landscape.tied_objective(np.ones((2, 3)), np.ones((2, 1)), 1.0), "symmetric"),
    (lambda: landscape.tied_hessian(GOOD, np.ones((3, 1)), 1.0), "U"),
    (lambda: landscape.tied_hessian(GOOD, np.ones(2), 1.0), "U"),
    (lambda: landscape.tied_gradient(GOOD, np.ones((2, 1)), -0.1), "lam"),
    (lambda: landscape.tied_gradient(GOOD, np.full((2, 1), np.nan), 1.0), "U"),
    (lambda: landscape.tied_objective(np.full((2, 2), np.inf), np.ones((2, 1)), 1.0), "M"),
    (lambda: landscape.tied_hessian_product(GOOD, np.ones((2, 1)), 1.0, np.ones((2, 2))), "D"),
    (lambda: landscape.untied_gradient(np.ones((2, 3)), np.ones((2, 1)), np.ones((2, 1)), 1.0), "V"),
    (lambda: landscape.untied_hessian(np.ones((2, 3)), np.ones((2, 1)), np.ones((3, 2)), 1.0), "columns"),
    (lambda: landscape.untied_objective(np.ones((2, 3)), np.ones((2, 1)), np.ones((3, 1)), float("inf")), "lam"),
    (lambda: landscape.untied_hessian_product(np.ones((2, 3)), np.ones((2, 1)), np.ones((3, 1)), 1.0,
                                              np.ones((2, 1)), np.ones((2, 1))), "DV"),
    (lambda: landscape.equalized_critical_points(np.diag([1.0, -1.0]), 2, 1.0), "semidefinite"),
    (lambda: landscape.equalized_critical_points(np.array([[1.0, 1.0], [0.0, 1.0]]), 2, 1.0), "symmetric"),
    (lambda: landscape.equalized_critical_points(GOOD, 0, 1.0), "width"),
    (lambda: landscape.equalized_critical_points(GOOD, 2, -1.0), "lam"),
    (lambda: landscape.critical_point_search(np.sin, np.diag, np.ones(2), 1e-8), "starts"),
    (lambda: landscape.critical_point_search(np.sin, np.diag, np.full((1, 2), np.nan), 1e-8), "starts"),
    (lambda: landscape.critical_point_search(np.sin, np.diag, np.ones((1, 2)), 0.0), "gtol"),
])
def test_bad_input_raises_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()

