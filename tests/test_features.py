"""The digits feature-extractor experiment: data, the deterministic objective, training, inputs."""

import numpy as np
import pytest
import torch

from dropnb import features, masks, structured
from dropnb.engine import Schedule
from dropnb.rounding import roundoff_tolerance


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tensors here are tiny: with two threads on a busy two-core machine, synchronizing the
    threads costs ten times the arithmetic."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def digits():
    return features.load_digit_subset(30, np.random.default_rng(0))


def tiny_problem(seed: int, runs: int = 2):
    """Random X (3, 5), Y (2, 5) and weights of 3 → 3 → ReLU → 4 → head (2 outputs), as tensors."""
    rng = np.random.default_rng(seed)
    X, Y = torch.tensor(rng.standard_normal((3, 5))), torch.tensor(rng.standard_normal((2, 5)))
    return X, Y, features.init_weights([3, 3, 4], 2, runs, rng)


def test_subset_is_balanced_and_standardized(digits):
    X, labels, onehot = digits.inputs, digits.labels, digits.onehot
    assert X.shape == (64, 30) and labels.shape == (30,) and onehot.shape == (10, 30)
    assert np.array_equal(np.bincount(labels, minlength=10), np.full(10, 3))
    assert np.array_equal(onehot.argmax(axis=0), labels) and np.array_equal(onehot.sum(axis=0), np.ones(30))
    np.testing.assert_allclose(X.mean(axis=1), 0.0, atol=1e-12)
    constant = np.all(X == 0, axis=1)
    assert constant.any()  # the corner pixels are blank in every image
    np.testing.assert_allclose(X[~constant].std(axis=1), 1.0, rtol=1e-12)


def test_subset_depends_only_on_the_generator():
    first = features.load_digit_subset(20, np.random.default_rng(3))
    again = features.load_digit_subset(20, np.random.default_rng(3))
    other = features.load_digit_subset(20, np.random.default_rng(4))
    assert np.array_equal(first.inputs, again.inputs)
    assert not np.array_equal(first.inputs, other.inputs)


def test_spread_targets_scale_each_class(digits):
    Y = features.spread_targets(digits.onehot)
    np.testing.assert_allclose(Y.sum(axis=0), 3 * 0.6 ** digits.labels)
    # balanced classes: the singular values are 3·0.6^{i−1}·√(N/c)
    np.testing.assert_allclose(np.linalg.svd(Y, compute_uv=False), 3 * 0.6 ** np.arange(10) * np.sqrt(3), rtol=1e-12)


def test_features_shape_and_relu():
    X, _, weights = tiny_problem(1)
    G = features.features(weights, X)
    assert G.shape == (2, 4, 5)
    W1, b1, W2, b2, _ = weights
    np.testing.assert_allclose(G[1], W2[1] @ torch.relu(W1[1] @ X + b1[1]) + b2[1], rtol=1e-14)


@pytest.mark.parametrize("block_size", [1, 2, 4])
def test_objective_is_the_expectation_over_every_mask(block_size):
    X, Y, weights = tiny_problem(2)
    theta = 0.3
    mask = masks.Blocks(4, block_size, theta)
    value = features.deterministic_objective(weights, X, Y, torch.tensor(mask.characteristic))
    patterns, probs = mask.enumerate()
    G, U = features.features(weights, X).numpy(), weights[-1].numpy()
    predictions = np.einsum("Rci,ki,RiN->RkcN", U, patterns / theta, G)
    expected = np.sum((Y.numpy() - predictions) ** 2, axis=(2, 3)) @ probs
    scale = (np.linalg.norm(Y) + np.abs(predictions).sum(axis=(1, 2, 3)).max()) ** 2
    np.testing.assert_allclose(value.numpy(), expected, rtol=0, atol=roundoff_tolerance(1000) * scale)


def test_autograd_step_lowers_the_objective():
    X, Y, weights = tiny_problem(3, runs=1)
    cbar = torch.tensor(masks.Blocks(4, 2, 0.6).characteristic)
    for weight in weights:
        weight.requires_grad_(True)
    before = features.deterministic_objective(weights, X, Y, cbar).sum()
    gradients = torch.autograd.grad(before, weights)
    slope = sum(float((g**2).sum()) for g in gradients)
    with torch.no_grad():
        step = 1e-4
        after = features.deterministic_objective([w - step * g for w, g in zip(weights, gradients)], X, Y, cbar).sum()
    # first order: f(w − η∇f) = f(w) − η‖∇f‖² + O(η²)
    decrease = float(before.detach() - after)
    assert 0 < decrease and abs(decrease - step * slope) < 0.01 * step * slope


def test_training_stays_above_the_bound_and_descends(digits):
    Y = np.stack([digits.onehot, features.spread_targets(digits.onehot)])
    mask = masks.Blocks(10, 5, 0.6)
    run = features.train(digits.inputs, Y, mask, (16,), runs=2, steps=150, lr=1e-2,
                         rng=np.random.default_rng(5), checkpoints=[0, 15, 150], progress=False)
    objective, lowest, rises = run.metrics["objective"], run.outcome["lowest"], run.outcome["rises"]
    assert objective.shape == (3, 2) and lowest.shape == (2,) and rises.shape == (2,)
    assert np.all((0 <= rises) & (rises <= 150))
    assert run.final["U"].shape == (2, 10, 10) and run.outcome["G"].shape == (2, 10, 30)
    bounds = np.array([structured.dropblock_bound(y, None, 10, 5, 0.6).value for y in Y])
    assert np.all(lowest >= bounds * (1 - 1e-12))
    assert np.all(objective[-1] - bounds < 0.01 * (objective[0] - bounds))
    assert np.all(lowest <= objective.min(axis=0))
    np.testing.assert_array_equal(run.outcome["final"], objective[-1])
    # the recorded final objective is the objective of the returned head and features
    U, G = torch.tensor(run.final["U"]), torch.tensor(run.outcome["G"])
    direct = ((torch.tensor(Y) - U @ G) ** 2).sum((-2, -1)) + \
        (torch.tensor(mask.characteristic) * (U.mT @ U) * (G @ G.mT)).sum((-2, -1))
    np.testing.assert_allclose(objective[-1], direct.numpy(), rtol=1e-12)


def test_runs_are_independent(digits):
    """The first run of a batch of two trains exactly like a batch of one from the same generator."""
    mask = masks.Blocks(10, 5, 0.6)
    schedule = Schedule.inverse_time(1e-3, 5, 20)
    both = features.train(digits.inputs, digits.onehot, mask, (8,), runs=2, lr=schedule,
                          rng=np.random.default_rng(6), progress=False).metrics["objective"]
    single = features.train(digits.inputs, digits.onehot, mask, (8,), runs=1, lr=schedule,
                            rng=np.random.default_rng(6), progress=False).metrics["objective"]
    assert both[0, 0] != both[0, 1]
    np.testing.assert_allclose(single[:, 0], both[:, 0], rtol=1e-12)


@pytest.mark.parametrize("n", [0, 15, 1750, 2.0])
def test_bad_subset_size(n):
    with pytest.raises(ValueError, match="n must"):
        features.load_digit_subset(n, np.random.default_rng(0))


@pytest.mark.parametrize("kwargs, match", [
    (dict(Y=np.zeros((10, 29))), "Y must"),
    (dict(Y=np.zeros((3, 10, 30))), "Y must"),
    (dict(Y=np.full((10, 30), np.nan)), "Y must be finite"),
    (dict(lr=0.0), "lr must"),
    (dict(lr=True), "lr must"),
    (dict(lr=lambda t: -1e-3), r"lr\(0\) must"),
    (dict(steps=0), "steps must"),
    (dict(runs=1.5), "runs must"),
    (dict(hidden=(8, 0)), "hidden must"),
    (dict(mask=np.eye(10)), "mask must"),
    (dict(checkpoints=[0, 11]), "checkpoints must"),
])
def test_bad_training_input(digits, kwargs, match):
    arguments = dict(X=digits.inputs, Y=digits.onehot, mask=masks.Blocks(10, 5, 0.6), hidden=(8,),
                     runs=2, steps=10, lr=1e-3, rng=np.random.default_rng(0), progress=False)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        features.train(**arguments)


def test_bad_spread_parameters(digits):
    with pytest.raises(ValueError, match="ratio must"):
        features.spread_targets(digits.onehot, ratio=-0.5)
    with pytest.raises(ValueError, match="onehot must"):
        features.spread_targets(np.ones(10))


def test_init_weights_follow_torch_default_law():
    """Every entry uniform on ±1/√(fan-in): the largest |entry|·√fan near 1 and never above it, the
    second moment·fan near 1/3 (no claim sees the scale: a run from another start still reaches F*)."""
    weights = features.init_weights([40, 30, 20], 10, runs=50, rng=np.random.default_rng(0))
    assert [tuple(w.shape) for w in weights] == [(50, 30, 40), (50, 30, 1), (50, 20, 30), (50, 20, 1), (50, 10, 20)]
    for weight, fan in zip(weights, (40, 40, 30, 30, 20)):
        scaled = weight.numpy() * np.sqrt(fan)
        assert 0.99 < np.abs(scaled).max() <= 1.0
        assert abs(np.mean(scaled**2) - 1 / 3) < 6 * np.sqrt(4 / 45 / scaled.size)  # Var(u²) = 4/45 for u ~ U(−1, 1)
