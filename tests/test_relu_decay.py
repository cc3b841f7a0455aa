"""Two-layer ReLU network with weight decay: derivatives, homogeneity, batched gradient descent,
flat path and split units."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import relu_decay as rd
from helpers import relu_decay_data as data


def torch_objective(X, Y, shape1, shape2, decay):
    Xt, Yt = torch.tensor(X), torch.tensor(Y)
    split = shape1[0] * shape1[1]

    def fun(w):
        W1, W2 = w[:split].reshape(shape1), w[split:].reshape(shape2)
        return 0.5 * torch.sum((Yt - W2 @ torch.relu(W1.T @ Xt)) ** 2) + decay * 0.5 * (torch.sum(W1**2) + torch.sum(W2**2))

    return fun


@settings(max_examples=15, deadline=None)
@given(n0=st.integers(1, 4), n2=st.integers(1, 3), r=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_gradient_matches_autograd_away_from_kinks(n0, n2, r, seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((n0, 9)), rng.standard_normal((n2, 9))
    W1, W2 = rng.standard_normal((n0, r)), rng.standard_normal((n2, r))
    assert np.abs(W1.T @ X).min() > 1e-8  # almost surely away from kinks
    w = torch.tensor(np.concatenate([W1.ravel(), W2.ravel()]), requires_grad=True)
    value = torch_objective(X, Y, W1.shape, W2.shape, 0.3)(w)
    (grad,) = torch.autograd.grad(value, w)
    g1, g2 = rd.gradient(X, Y, W1, W2, 0.3)
    assert rd.objective(X, Y, W1, W2, 0.3) == pytest.approx(float(value.detach()), rel=1e-12)
    assert np.allclose(np.concatenate([g1.ravel(), g2.ravel()]), grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_matches_central_differences():
    X, Y = data()
    rng = np.random.default_rng(3)
    W1, W2 = rng.standard_normal((2, 5)), rng.standard_normal((1, 5))
    g1, _ = rd.gradient(X, Y, W1, W2, 0.1)
    h = 1e-6
    for i in range(2):
        for j in range(5):
            E = np.zeros_like(W1)
            E[i, j] = h
            fd = (rd.objective(X, Y, W1 + E, W2, 0.1) - rd.objective(X, Y, W1 - E, W2, 0.1)) / (2 * h)
            assert fd == pytest.approx(g1[i, j], rel=1e-6, abs=1e-8)


def test_relu_derivative_at_zero_is_zero():
    X = np.array([[1.0, -1.0], [0.0, 0.0]])
    Y = np.array([[1.0, 2.0]])
    W1, W2 = np.array([[0.0], [1.0]]), np.array([[1.0]])  # pre-activations exactly 0
    g1, g2 = rd.gradient(X, Y, W1, W2, 0.5)
    assert np.array_equal(g1, 0.5 * W1) and np.array_equal(g2, 0.5 * W2)


def test_euler_identity_for_every_unit():
    X, Y = data()
    rng = np.random.default_rng(4)
    W1, W2 = rng.standard_normal((2, 7)), rng.standard_normal((1, 7))
    g1, g2 = rd.gradient(X, Y, W1, W2, 0.1)
    per_unit = np.sum(g1 * W1, axis=0) + np.sum(g2 * W2, axis=0)
    G = Y - rd.outputs(X, W1, W2)
    residuals = 0.1 * rd.unit_regularizers(W1, W2) - np.sum(rd.unit_outputs(X, W1, W2) * G[None], axis=(-2, -1))
    assert np.allclose(per_unit, 2 * residuals, atol=1e-12)


def test_positive_homogeneity_of_degree_two_and_dropout_degree_four():
    X, _ = data()
    rng = np.random.default_rng(5)
    W1, W2 = rng.standard_normal((2, 3)), rng.standard_normal((1, 3))
    for alpha in (0.0, 0.3, 2.5):
        assert np.allclose(rd.unit_outputs(X, alpha * W1, alpha * W2), alpha**2 * rd.unit_outputs(X, W1, W2), atol=1e-13)
        assert np.allclose(rd.unit_regularizers(alpha * W1, alpha * W2), alpha**2 * rd.unit_regularizers(W1, W2))
        assert rd.dropout_penalty(X, alpha * W1, alpha * W2) == pytest.approx(alpha**4 * rd.dropout_penalty(X, W1, W2), abs=1e-12)


def test_outputs_are_sums_of_unit_outputs():
    X, _ = data()
    rng = np.random.default_rng(6)
    W1, W2 = rng.standard_normal((4, 2, 5)), rng.standard_normal((4, 3, 5))
    assert np.allclose(rd.unit_outputs(X, W1, W2).sum(axis=-3), rd.outputs(X, W1, W2))
    assert rd.regularizer(W1, W2) == pytest.approx(0.5 * (np.sum(W1**2, axis=(1, 2)) + np.sum(W2**2, axis=(1, 2))))


def test_batched_equals_unbatched():
    X, Y = data()
    rng = np.random.default_rng(8)
    W1, W2 = 0.5 * rng.standard_normal((3, 2, 6)), 0.5 * rng.standard_normal((3, 1, 6))
    batch = rd.gradient_descent(X, Y, W1, W2, 0.1, [(0.01, 300), (0.003, 200)], every=100)
    g1, g2 = rd.gradient(X, Y, W1, W2, 0.1)
    assert np.allclose(g1[1], rd.gradient(X, Y, W1[1], W2[1], 0.1)[0]) and np.allclose(g2[2], rd.gradient(X, Y, W1[2], W2[2], 0.1)[1])
    assert np.allclose(rd.objective(X, Y, W1, W2, 0.1)[0], rd.objective(X, Y, W1[0], W2[0], 0.1))
    for s in range(3):
        single = rd.gradient_descent(X, Y, W1[s], W2[s], 0.1, [(0.01, 300), (0.003, 200)], every=100)
        assert np.allclose(single.final["W1"], batch.final["W1"][s], atol=1e-13) and np.allclose(single.final["W2"], batch.final["W2"][s], atol=1e-13)
        assert np.allclose(single.metrics["objective"], batch.metrics["objective"][:, s], atol=1e-13)
    assert list(batch.steps) == [0, 100, 200, 300, 400, 500]


def test_gradient_descent_is_plain_gradient_descent():
    X, Y = data()
    rng = np.random.default_rng(9)
    W1, W2 = 0.5 * rng.standard_normal((2, 4)), 0.5 * rng.standard_normal((1, 4))
    A, B = W1.copy(), W2.copy()
    for eta, n in [(0.02, 50), (0.005, 50)]:
        for _ in range(n):
            g1, g2 = rd.gradient(X, Y, A, B, 0.1)
            A, B = A - eta * g1, B - eta * g2
    run = rd.gradient_descent(X, Y, W1, W2, 0.1, [(0.02, 50), (0.005, 50)])
    assert np.allclose(run.final["W1"], A, atol=1e-14) and np.allclose(run.final["W2"], B, atol=1e-14)


def test_zero_units_stay_zero_under_descent():
    X, Y = data()
    rng = np.random.default_rng(10)
    W1, W2 = rng.standard_normal((2, 4)), rng.standard_normal((1, 4))
    W1[:, 2], W2[:, 2] = 0, 0
    run = rd.gradient_descent(X, Y, W1, W2, 0.1, [(0.01, 500)])
    assert np.all(run.final["W1"][:, 2] == 0) and np.all(run.final["W2"][:, 2] == 0)


def test_flat_path_keeps_outputs_and_moves_theta_linearly():
    Xt = np.vstack([np.array([-0.5, 0.2, 0.9]), np.ones(3)])
    rng = np.random.default_rng(15)
    W1, W2 = rng.standard_normal((2, 4)), rng.standard_normal((1, 4))
    W1[1] = np.abs(W1[1]) + 1.5
    W1[0] *= 0.5  # every unit active on every sample
    path = rd.flat_path(Xt, W1, W2)
    assert path.slope <= 0 and path.tau_end > 0 and path.beta[path.index] < 0
    base_phi, base_theta = rd.outputs(Xt, W1, W2), rd.regularizer(W1, W2)
    for tau in np.linspace(0, path.tau_end, 7):
        A, B = path.weights(tau)
        assert np.allclose(rd.outputs(Xt, A, B), base_phi, atol=1e-13)
        assert rd.regularizer(A, B) == pytest.approx(base_theta + tau * path.slope, abs=1e-12)
    A, B = path.weights(path.tau_end)
    assert np.all(A[:, path.index] == 0) and np.all(B[:, path.index] == 0)


def test_split_units_keep_the_network_and_divide_the_dropout_penalty():
    X, Y = data()
    rng = np.random.default_rng(16)
    W1, W2 = rng.standard_normal((2, 3)), rng.standard_normal((1, 3))
    shares = np.full(4, 0.25)
    A, B = rd.split_units(W1, W2, shares)
    assert A.shape == (2, 12)
    assert np.allclose(rd.outputs(X, A, B), rd.outputs(X, W1, W2))
    assert rd.regularizer(A, B) == pytest.approx(rd.regularizer(W1, W2))
    assert rd.dropout_penalty(X, A, B) == pytest.approx(rd.dropout_penalty(X, W1, W2) / 4)
    path = rd.flat_path(X, A, B)
    assert abs(path.slope) <= 1e-12  # parallel copies: a plateau


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda X, Y: rd.objective(X, Y, np.ones((3, 2)), np.ones((1, 2)), 0.1), "W1"),
        (lambda X, Y: rd.objective(X, Y, np.ones((2, 2)), np.ones((2, 2)), 0.1), "W2"),
        (lambda X, Y: rd.objective(X, Y, np.ones((2, 2)), np.ones((1, 3)), 0.1), "W1 and W2"),
        (lambda X, Y: rd.objective(X, Y, np.ones((2, 2)), np.ones((1, 2)), -1.0), "decay"),
        (lambda X, Y: rd.objective(X, Y[:, :3], np.ones((2, 2)), np.ones((1, 2)), 0.1), "X and Y"),
        (lambda X, Y: rd.objective(X, Y, np.full((2, 2), np.nan), np.ones((1, 2)), 0.1), "W1"),
        (lambda X, Y: rd.gradient_descent(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, [(0.0, 10)]), "schedule"),
        (lambda X, Y: rd.gradient_descent(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, [(0.1, 0)]), "schedule"),
        (lambda X, Y: rd.gradient_descent(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, [(0.1, 5)], every=-1), "every"),
        (lambda X, Y: rd.split_units(np.ones((2, 2)), np.ones((1, 2)), [0.5, 0.6]), "shares"),
        (lambda X, Y: rd.flat_path(X, np.ones((2, 2)), np.ones((1, 2)), units=[0]), "units"),
    ],
)
def test_bad_inputs_raise(call, name):
    X, Y = data()
    with pytest.raises(ValueError, match=name):
        call(X, Y)
