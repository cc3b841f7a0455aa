"""Deep linear networks with dropout: three computations of the explicit regularizer, and ν."""

import itertools

import numpy as np
import pytest

from dropnb import deep, linear, masks


def network(widths, seed):
    rng = np.random.default_rng(seed)
    layers = [rng.standard_normal((widths[i + 1], widths[i])) for i in range(len(widths) - 1)]
    A = rng.standard_normal((widths[0], widths[0]))
    return layers, A @ A.T / widths[0] + 0.1 * np.eye(widths[0])


ARCHITECTURES = [(3, 2, 3, 2, 2), (2, 3, 1), (3, 2, 2, 2, 2, 3), (4, 3, 4), (2, 4, 1, 3)]


@pytest.mark.parametrize("widths", ARCHITECTURES)
@pytest.mark.parametrize("retain", [0.3, 0.7, 0.9])
def test_three_computations_agree(widths, retain):
    layers, C = network(widths, seed=sum(widths))
    exact = deep.enumerated_regularizer(layers, retain, C)
    assert deep.moment_regularizer(layers, retain, C) == pytest.approx(exact, rel=1e-12)
    assert deep.pivot_regularizer(layers, retain, C) == pytest.approx(exact, rel=1e-12)


def test_one_hidden_layer_is_the_shallow_regularizer():
    layers, C = network((4, 5, 3), seed=1)
    W1, W2 = layers
    shallow = linear.bernoulli_regularizer(W2, W1.T, 0.6, C)
    assert deep.moment_regularizer(layers, 0.6, C) == pytest.approx(shallow, rel=1e-13)


def test_objective_is_loss_plus_regularizer_and_matches_the_shallow_objective():
    layers, C = network((4, 5, 3), seed=2)
    M = np.random.default_rng(3).standard_normal((3, 4))
    W1, W2 = layers
    expected = linear.objective(M, W2, W1.T, masks.Bernoulli(5, 0.6), C)
    assert deep.objective(M, layers, 0.6, C) == pytest.approx(expected, rel=1e-13)


def test_rescaling_the_layers_keeps_the_regularizer():
    layers, C = network((3, 2, 3, 2, 2), seed=4)
    scales = [2.0, 0.25, 4.0, 0.5]
    scaled = [a * W for a, W in zip(scales, layers)]
    assert deep.pivot_regularizer(scaled, 0.5, C) == pytest.approx(deep.pivot_regularizer(layers, 0.5, C), rel=1e-12)


@pytest.mark.parametrize("widths, lam, expected", [((2, 2), 1.0, 1.25), ((3, 3), 1.0, 7 / 9), ((5,), 0.5, 0.1)])
def test_effective_rate(widths, lam, expected):
    assert deep.effective_rate(widths, lam) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("widths", [(1,), (3, 2), (5, 5, 5, 5, 5), (7, 1, 4)])
def test_effective_rate_is_the_sum_over_pivot_sets(widths):
    lam = 0.7
    total = sum(lam**size / np.prod([widths[j] for j in J])
                for size in range(1, len(widths) + 1) for J in itertools.combinations(range(len(widths)), size))
    assert deep.effective_rate(widths, lam) == pytest.approx(total, rel=1e-14)


def test_network_map():
    layers, _ = network((3, 4, 2), seed=5)
    np.testing.assert_allclose(deep.network_map(layers), layers[1] @ layers[0])


@pytest.mark.parametrize("call, match", [
    (lambda: deep.moment_regularizer([np.ones((2, 3))], 0.5), "at least two"),
    (lambda: deep.moment_regularizer([np.ones((2, 3)), np.ones((2, 3))], 0.5), "columns"),
    (lambda: deep.moment_regularizer([np.ones((2, 3)), np.ones((1, 2))], 0.5, C=np.ones((2, 2))), "C"),
    (lambda: deep.moment_regularizer([np.ones((2, 3)), np.ones((1, 2))], 0.0), "retain"),
    (lambda: deep.enumerated_regularizer([np.ones((9, 3)), np.ones((9, 9)), np.ones((1, 9))], 0.5), "enumerate"),
    (lambda: deep.objective(np.ones((2, 3)), [np.ones((2, 3)), np.ones((1, 2))], 0.5), "M"),
    (lambda: deep.effective_rate([], 1.0), "hidden_widths"),
    (lambda: deep.effective_rate([2, 0], 1.0), "hidden_widths"),
    (lambda: deep.effective_rate([2], -1.0), "lam"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
