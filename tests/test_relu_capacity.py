"""Activation scales and the co-adaptation measure of two-layer ReLU networks."""

import numpy as np
import pytest
import torch

from dropnb import relu_capacity


def test_activation_scales_are_root_mean_squares_of_the_relu():
    rng = np.random.default_rng(0)
    V, X = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 50))
    expected = [[np.sqrt(np.mean(np.maximum(V[k, :, j] @ X, 0) ** 2)) for j in range(4)] for k in range(2)]
    np.testing.assert_allclose(relu_capacity.activation_scales(V, X), expected, rtol=1e-14)


def test_coadaptation_ranges_from_one_unit_to_equal_flows():
    assert relu_capacity.coadaptation(np.ones(9), np.full(9, 2.0)) == pytest.approx(1.0, rel=1e-15)
    assert relu_capacity.coadaptation([3.0, 0, 0, 0], np.ones(4)) == pytest.approx(0.5, rel=1e-15)
    phi = relu_capacity.coadaptation(np.random.default_rng(1).standard_normal((5, 6)), np.ones((5, 6)))
    assert phi.shape == (5,) and np.all((phi >= 1 / np.sqrt(6)) & (phi <= 1))


def test_coadaptation_refuses_a_zero_flow():
    with pytest.raises(ValueError, match="zero flow"):
        relu_capacity.coadaptation(np.zeros(3), np.ones(3))


def test_dropout_regularizer_is_the_enumerated_dropout_loss_minus_the_plain_loss():
    rng = np.random.default_rng(2)
    U, V, X, Y = rng.standard_normal((2, 5)), rng.standard_normal((3, 5)), rng.standard_normal((3, 20)), rng.standard_normal((2, 20))
    retain = 0.7
    plain = np.mean(np.sum((Y - U @ np.maximum(V.T @ X, 0)) ** 2, axis=0))
    exact = relu_capacity.enumerated_dropout_loss(U, V, X, Y, retain)
    assert exact - plain == pytest.approx(relu_capacity.dropout_regularizer(U, V, X, (1 - retain) / retain), rel=1e-12)


def test_path_regularizer_is_half_the_squared_path_norm():
    U, V = np.array([[1.0, 2.0]]), np.array([[1.0, 0.0], [1.0, 3.0]])
    assert relu_capacity.path_regularizer(U, V, 0.5) == pytest.approx(0.25 * (2 + 4 * 9))


def test_gaussian_relu_moment_against_monte_carlo_and_the_symmetric_case():
    rng = np.random.default_rng(3)
    mean, cov, v = np.array([0.5, -1.0]), np.array([[1.0, 0.3], [0.3, 0.5]]), np.array([1.0, -0.4])
    x = rng.multivariate_normal(mean, cov, size=400_000)
    samples = np.maximum(x @ v, 0) ** 2
    assert abs(relu_capacity.gaussian_relu_moment(v, mean, cov) - samples.mean()) < 5 * samples.std() / np.sqrt(len(samples))
    assert relu_capacity.gaussian_relu_moment(v, np.zeros(2), cov) == pytest.approx(v @ cov @ v / 2, rel=1e-14)


def test_gaussian_retentivity_is_the_minimum_over_directions():
    mean, cov = np.array([1.0, 0.5]), np.array([[1.0, 0.3], [0.3, 0.5]])
    beta, direction = relu_capacity.gaussian_retentivity(mean, cov)
    angles = np.linspace(0, 2 * np.pi, 4001)
    v = np.stack([np.cos(angles), np.sin(angles)], 1)
    ratio = relu_capacity.gaussian_relu_moment(v, mean, cov) / ((v @ mean) ** 2 + np.einsum("mi,ij,mj->m", v, cov, v))
    assert beta <= ratio.min() + 1e-15 and ratio.min() - beta < 1e-6
    assert relu_capacity.gaussian_relu_moment(direction, mean, cov) / ((direction @ mean) ** 2 + direction @ cov @ direction) \
        == pytest.approx(beta, rel=1e-12)
    assert relu_capacity.gaussian_retentivity(np.zeros(2), cov)[0] == pytest.approx(0.5, rel=1e-15)


def test_retentivity_2d_of_known_laws():
    for delta in (0.3, 0.05):
        assert relu_capacity.retentivity_2d(*relu_capacity.proposition2_atoms(delta))[0] == pytest.approx(delta, rel=1e-12)
    Z = np.abs(np.random.default_rng(4).standard_normal((2, 30)))
    assert relu_capacity.retentivity_2d(Z, np.full(30, 1 / 30))[0] == 0
    both = np.concatenate([Z, -Z], axis=1)
    assert relu_capacity.retentivity_2d(both, np.full(60, 1 / 60))[0] == pytest.approx(0.5, rel=1e-12)


def test_proposition2_atoms_are_unit_centred_with_unit_activation():
    Z, p = relu_capacity.proposition2_atoms(0.1)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=0), 1, rtol=1e-15)
    np.testing.assert_allclose(Z @ p, 0, atol=1e-16)
    w = np.array([1 / np.sqrt(0.1), 0.0])
    assert p @ np.maximum(w @ Z, 0) ** 2 == pytest.approx(1, rel=1e-14)


def test_relu_rademacher_2d_beats_every_grid_direction_and_is_attained():
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((2, 40)) + np.array([[1.0], [0.3]])
    p = np.full(40, 1 / 40)
    X, signs = Z[:, rng.integers(0, 40, 25)], rng.choice([-1.0, 1.0], (6, 25))
    values, directions = relu_capacity.relu_rademacher_2d(X, Z, p, signs)
    angles = np.linspace(0, 2 * np.pi, 3000, endpoint=False)
    grid = relu_capacity.relu_ratio(np.stack([np.cos(angles), np.sin(angles)], 1), X, signs, Z, p)
    assert np.all(grid.max(axis=1) <= values + 1e-12) and np.all(values - grid.max(axis=1) < 1e-3)
    direct = [relu_capacity.relu_ratio(directions[k][None], X, signs[k:k + 1], Z, p)[0, 0] for k in range(6)]
    np.testing.assert_allclose(direct, values, rtol=1e-12)


def test_linear_class_sup_and_mahalanobis_norm():
    X, S, signs = np.array([[1.0, 0.0], [0.0, 2.0]]), np.diag([1.0, 4.0]), np.array([[1.0, -1.0]])
    assert relu_capacity.linear_class_sup(X, S, signs)[0] == pytest.approx(np.sqrt(2) / 2)
    assert relu_capacity.mahalanobis_norm(X, S) == pytest.approx(np.sqrt(2))


def test_linear_as_relu_implements_the_linear_function():
    rng = np.random.default_rng(6)
    w, x = rng.standard_normal(3), rng.standard_normal((3, 10))
    u, V = relu_capacity.linear_as_relu(w, 6)
    np.testing.assert_allclose(u @ np.maximum(V.T @ x, 0), w @ x, atol=1e-14)
    with pytest.raises(ValueError, match="width"):
        relu_capacity.linear_as_relu(w, 3)


def test_finite_class_rademacher_of_small_classes():
    assert relu_capacity.finite_class_rademacher(np.ones((1, 4))) == pytest.approx(0.0, abs=1e-16)
    assert relu_capacity.finite_class_rademacher(np.array([[1.0, 1.0], [-1.0, -1.0]])) == pytest.approx(0.5)



def test_outputs_and_clipped_loss_of_a_batch_of_networks():
    rng = np.random.default_rng(2)
    u, V, X = rng.standard_normal((2, 4)), rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 7))
    y = rng.choice((-1.0, 1.0), 7)
    expected = np.array([[u[k] @ np.maximum(V[k].T @ X[:, i], 0) for i in range(7)] for k in range(2)])
    np.testing.assert_allclose(relu_capacity.outputs(u, V, X), expected, rtol=1e-13)
    loss = np.mean((y - np.clip(expected, -1, 1)) ** 2, axis=1)
    np.testing.assert_allclose(relu_capacity.clipped_squared_loss(u, V, X, y), loss, rtol=1e-13)


def test_symmetrized_flips_whole_columns():
    X = np.random.default_rng(3).standard_normal((3, 50))
    S = relu_capacity.symmetrized(X, np.random.default_rng(0))
    signs = S[0] / X[0]
    assert set(np.round(signs).tolist()) == {-1.0, 1.0}
    np.testing.assert_array_equal(S, X * signs)


# --- dropout training, batched over runs (relu_dropout_training) ---------------------------------


def test_relu_dropout_training_full_batch_sgd_is_gradient_descent():
    """θ = 1, the whole sample as one minibatch: one step of SGD on the mean squared loss."""
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((3, 6)), rng.standard_normal(6)
    u0, V0 = rng.standard_normal((1, 4)), rng.standard_normal((1, 3, 4))
    eta = 0.05
    run = relu_capacity.relu_dropout_training(X, y, u0, V0, 1.0, 4, eta, 1, 6, torch.Generator().manual_seed(0),
                                         optimizer="sgd", progress=False)
    pre = V0[0].T @ X
    hidden = np.maximum(pre, 0)
    error = u0[0] @ hidden - y
    grad_u = 2 * hidden @ error / 6
    grad_V = 2 * X @ ((pre > 0) * np.outer(u0[0], error)).T / 6
    np.testing.assert_allclose(run.final["u"][0], u0[0] - eta * grad_u, rtol=1e-12)
    np.testing.assert_allclose(run.final["V"][0], V0[0] - eta * grad_V, rtol=1e-12)
