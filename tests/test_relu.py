"""Activation scales and the co-adaptation measure of two-layer ReLU networks."""

import numpy as np
import pytest

from dropnb import relu


def test_activation_scales_are_root_mean_squares_of_the_relu():
    rng = np.random.default_rng(0)
    V, X = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 50))
    expected = [[np.sqrt(np.mean(np.maximum(V[k, :, j] @ X, 0) ** 2)) for j in range(4)] for k in range(2)]
    np.testing.assert_allclose(relu.activation_scales(V, X), expected, rtol=1e-14)


def test_coadaptation_ranges_from_one_unit_to_equal_flows():
    assert relu.coadaptation(np.ones(9), np.full(9, 2.0)) == pytest.approx(1.0, rel=1e-15)
    assert relu.coadaptation([3.0, 0, 0, 0], np.ones(4)) == pytest.approx(0.5, rel=1e-15)
    phi = relu.coadaptation(np.random.default_rng(1).standard_normal((5, 6)), np.ones((5, 6)))
    assert phi.shape == (5,) and np.all((phi >= 1 / np.sqrt(6)) & (phi <= 1))


def test_coadaptation_refuses_a_zero_flow():
    with pytest.raises(ValueError, match="zero flow"):
        relu.coadaptation(np.zeros(3), np.ones(3))


def test_outputs_and_clipped_loss_of_a_batch_of_networks():
    rng = np.random.default_rng(2)
    u, V, X = rng.standard_normal((2, 4)), rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 7))
    y = rng.choice((-1.0, 1.0), 7)
    expected = np.array([[u[k] @ np.maximum(V[k].T @ X[:, i], 0) for i in range(7)] for k in range(2)])
    np.testing.assert_allclose(relu.outputs(u, V, X), expected, rtol=1e-13)
    loss = np.mean((y - np.clip(expected, -1, 1)) ** 2, axis=1)
    np.testing.assert_allclose(relu.clipped_squared_loss(u, V, X, y), loss, rtol=1e-13)


def test_symmetrized_flips_whole_columns():
    X = np.random.default_rng(3).standard_normal((3, 50))
    S = relu.symmetrized(X, np.random.default_rng(0))
    signs = S[0] / X[0]
    assert set(np.round(signs).tolist()) == {-1.0, 1.0}
    np.testing.assert_array_equal(S, X * signs)
