"""Deep linear networks with dropout: three computations of the explicit regularizer, and ν."""

import itertools

import numpy as np
import torch
import pytest

from dropnb import deep, linear, masks, optimize


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
    (lambda: deep.moment_regularizer([np.ones((2, 3)), np.ones((1, 2))], 0.5, S=np.ones((2, 2))), "S must"),
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


@pytest.mark.parametrize("widths", ARCHITECTURES)
def test_sub_regularizers_by_moments_and_by_pivots_agree(widths):
    layers, S = network(widths, seed=7 + sum(widths))
    np.testing.assert_allclose(deep.sub_regularizers(layers, S), deep.pivot_sub_regularizers(layers, S), rtol=1e-12)


def test_batched_regularizer_matches_per_network_values_with_a_rate_per_network():
    nets = [network((3, 2, 4, 2), seed=s)[0] for s in range(3)]
    S = network((3, 2, 4, 2), seed=0)[1]
    stacked = [torch.tensor(np.stack(layer)) for layer in zip(*nets)]
    retains = np.array([0.3, 0.6, 0.9])
    batched = deep.batched_regularizer(stacked, torch.tensor((1 - retains) / retains), torch.tensor(S)).numpy()
    expected = [deep.moment_regularizer(layers, retain, S) for layers, retain in zip(nets, retains)]
    np.testing.assert_allclose(batched, expected, rtol=1e-12)


@pytest.mark.parametrize("widths", [(2,), (3, 5), (4, 4, 1, 7)])
def test_envelope_weights_sum_to_nu(widths):
    lam = 0.8
    weights = deep.envelope_weights(widths)
    assert len(weights) == len(widths)
    assert np.polyval(np.append(weights[::-1], 0.0), lam) == pytest.approx(deep.effective_rate(widths, lam), rel=1e-14)


def test_gaps_are_nonnegative_and_vanish_for_the_rank_one_construction():
    layers, S = network((3, 4, 2, 5, 2), seed=11)
    assert np.all(deep.equalization_gaps(layers, S) > 0)
    rng = np.random.default_rng(12)
    equalized = deep.rank_one_implementation(rng.standard_normal(2), rng.standard_normal(3), (4, 2, 5))
    np.testing.assert_allclose(deep.equalization_gaps(equalized, S), 0, atol=1e-13)
    nu = deep.effective_rate((4, 2, 5), 0.5 / 0.5)
    assert deep.moment_regularizer(equalized, 0.5, S) == pytest.approx(
        nu * deep.nuclear_norm(deep.network_map(equalized), S) ** 2, rel=1e-13)


def test_balanced_implementation_computes_the_map():
    rng = np.random.default_rng(13)
    W = rng.standard_normal((4, 2)) @ rng.standard_normal((2, 5))
    layers = deep.balanced_implementation(W, (3, 2, 6))
    assert [L.shape for L in layers] == [(3, 5), (2, 3), (6, 2), (4, 6)]
    np.testing.assert_allclose(deep.network_map(layers), W, atol=1e-13)
    with pytest.raises(ValueError, match="rank"):
        deep.balanced_implementation(rng.standard_normal((4, 5)), (3, 2))


def test_global_optimum_under_the_gap_condition_is_implemented_and_bounds_every_network():
    rng = np.random.default_rng(14)
    S = network((3, 3, 3, 3), seed=15)[1]
    M = rng.standard_normal((3, 3)) * 0.1 + 2 * np.outer(rng.standard_normal(3), rng.standard_normal(3))
    optimum = deep.global_optimum(M, (3, 3), 1.0, S)
    assert optimum.rank == 1 and optimum.rate == pytest.approx(7 / 9)
    assert deep.objective(M, optimum.layers, 0.5, S) == pytest.approx(optimum.value, rel=1e-12)
    np.testing.assert_allclose(deep.network_map(optimum.layers), optimum.W, atol=1e-12)
    for seed in range(20):
        layers = network((3, 3, 3, 3), seed=100 + seed)[0]
        assert deep.objective(M, layers, 0.5, S) >= optimum.value


def test_global_optimum_without_the_gap_has_higher_rank_and_no_layers():
    optimum = deep.global_optimum(np.diag([1.0, 0.9, 0.2]), (3, 3), 1.0)
    assert optimum.rank == 2 and optimum.layers is None
    alpha = optimum.rate * 1.9 / (1 + 2 * optimum.rate)
    assert optimum.threshold == pytest.approx(alpha)
    np.testing.assert_allclose(optimum.W, np.diag([1.0 - alpha, 0.9 - alpha, 0.0]), atol=1e-14)


def test_sampled_regularizer_is_unbiased():
    layers, _ = network((3, 4, 3, 2), seed=16)
    samples = deep.sampled_regularizer(layers, 0.6, 200_000, np.random.default_rng(17))
    z = (samples.mean() - deep.moment_regularizer(layers, 0.6)) / (samples.std() / np.sqrt(samples.size))
    assert abs(z) < 5


def test_flat_objective_matches_the_objective():
    layers, S = network((3, 2, 4, 2), seed=18)
    M = np.random.default_rng(19).standard_normal((2, 3))
    fun, unpack = deep.flat_objective(M, (3, 2, 4, 2), 1.5, S)
    x = np.concatenate([W.ravel() for W in layers])
    assert float(fun(torch.tensor(x))) == pytest.approx(deep.objective(M, layers, 1 / 2.5, S), rel=1e-13)
    for a, b in zip(unpack(x), layers):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("call, match", [
    (lambda: deep.envelope_weights([0]), "hidden_widths"),
    (lambda: deep.global_optimum(np.ones((2, 2)), (2,), 1.0, S=-np.eye(2)), "positive definite"),
    (lambda: deep.flat_objective(np.ones((2, 3)), (3, 2, 3), 1.0), "architecture"),
    (lambda: deep.sampled_regularizer([np.ones((2, 3)), np.ones((1, 2))], 0.5, 0, np.random.default_rng()), "n must"),
    (lambda: deep.rank_one_implementation(np.ones(2), np.ones(3), ()), "hidden_widths"),
])
def test_new_functions_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("widths", [(np.inf, 5), (5, np.nan), (-np.inf,)])
def test_widths_that_are_not_finite_are_refused(widths):
    """inf == round(inf): without a finiteness check (inf, 5) became [-2⁶³, 5] and a negative weight."""
    with pytest.raises(ValueError, match="^hidden_widths must be a non-empty list of positive integers"):
        deep.check_widths(widths)


def deep_starts(sizes, runs, seed, scale=0.3):
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal((runs, b, a)) for a, b in zip(sizes, sizes[1:])]


def test_deep_gradient_descent_decreases_the_objective_for_each_rate():
    sizes, M = (3, 4, 4, 2), np.random.default_rng(30).standard_normal((2, 3))
    lams = np.array([0.1, 1.0, 3.0])
    run = deep.deep_gradient_descent(M, deep_starts(sizes, 3, 31), lams, 0.02, 300,
                                         metrics=deep.deep_metrics(M, lams), progress=False)
    f = run.metrics["objective"]
    assert f.shape == (len(run.steps), 3) and np.all(np.diff(f, axis=0) <= 1e-12)
    for n, lam in enumerate(lams):
        layers = [run.final[f"W{i + 1}"][n] for i in range(len(sizes) - 1)]
        assert f[-1, n] == pytest.approx(deep.objective(M, layers, 1 / (1 + lam)), rel=1e-12)
        assert f[-1, n] >= deep.global_optimum(M, sizes[1:-1], lam).value
    sub = run.metrics["sub_regularizers"]
    assert sub.shape == (len(run.steps), 3, 2)
    assert run.metrics["singular_values"].shape == (len(run.steps), 3, 2)


def test_deep_gradient_descent_follows_the_autograd_gradient_for_one_step():
    sizes, M = (2, 3, 2), np.random.default_rng(32).standard_normal((2, 2))
    starts = deep_starts(sizes, 1, 33)
    run = deep.deep_gradient_descent(M, starts, 0.5, 0.1, 1, progress=False)
    fun, unpack = deep.flat_objective(M, sizes, 0.5)
    x = np.concatenate([W[0].ravel() for W in starts])
    _, gradient = optimize.value_and_gradient(fun, x)
    for got, expected in zip(run.final.values(), unpack(x - 0.1 * gradient)):
        np.testing.assert_allclose(got[0], expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs, match", [
    (dict(layers0=[np.ones((1, 2, 2))]), "at least two"),
    (dict(layers0=[np.ones((1, 3, 2)), np.ones((1, 2, 2))]), "chain"),
    (dict(M=np.ones((3, 2))), "M must"),
    (dict(lam=-1.0), "lam"),
    (dict(steps=0), "steps"),
    (dict(lr=0.0), "lr"),
    (dict(checkpoints=[5]), "checkpoints"),
])
def test_deep_gradient_descent_rejects_bad_input(kwargs, match):
    arguments = dict(M=np.ones((2, 2)), layers0=[np.ones((1, 3, 2)), np.ones((1, 2, 3))], lam=0.5, lr=0.1, steps=2,
                     progress=False)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        deep.deep_gradient_descent(**arguments)


def test_deep_gradient_descent_reports_divergence():
    with pytest.raises(FloatingPointError, match="diverged"):
        deep.deep_gradient_descent(np.ones((2, 2)) * 10, deep_starts((2, 3, 2), 1, 34, scale=3.0), 0.5, 10.0, 50,
                                       progress=False)


# --- deep dropout SGD -----------------------------------------------------------------------------


def test_deep_dropout_sgd_losses_average_to_the_exact_objective():
    """E[(1/B)Σ‖Mx − W̄x‖²] = tr((M − W)S(M − W)ᵀ) + R: the first losses of identical runs, whose
    mean lies within 5 standard errors of the exact objective (probability > 1 − 6e-7)."""
    sizes, M = (3, 4, 3, 2), np.random.default_rng(40).standard_normal((2, 3))
    A = np.array([[1.0, 0.0, 0.0], [0.4, 0.8, 0.0], [0.0, -0.3, 1.2]])
    single = deep_starts(sizes, 1, 41)
    starts = [np.repeat(W, 4000, axis=0) for W in single]
    run = deep.deep_dropout_sgd(M, starts, 0.6, 1e-9, 1, torch.Generator().manual_seed(42), batch_size=2,
                                    input_factor=A, progress=False)
    losses = run.losses[:, 0]
    exact = deep.objective(M, [W[0] for W in single], 1 / 1.6, A @ A.T)
    assert abs(losses.mean() - exact) <= 5 * losses.std(ddof=1) / np.sqrt(len(losses))


def test_deep_dropout_sgd_step_averages_to_the_gradient_descent_step():
    """The expected step is the step of deep_gradient_descent: entrywise, the mean step of many
    identical runs lies within 5 standard errors of it."""
    sizes, M = (2, 3, 3, 2), np.random.default_rng(43).standard_normal((2, 2))
    single = deep_starts(sizes, 1, 44)
    starts = [np.repeat(W, 6000, axis=0) for W in single]
    lr = 1e-3
    sgd = deep.deep_dropout_sgd(M, starts, 0.5, lr, 1, torch.Generator().manual_seed(45), batch_size=1,
                                    progress=False)
    exact = deep.deep_gradient_descent(M, single, 0.5, lr, 1, progress=False)
    for name, final in sgd.final.items():
        steps = final - single[int(name[1:]) - 1]
        expected = exact.final[name][0] - single[int(name[1:]) - 1][0]
        error = np.abs(steps.mean(axis=0) - expected)
        assert np.all(error <= 5 * steps.std(axis=0, ddof=1) / np.sqrt(len(steps)) + 1e-15)


def test_deep_dropout_sgd_with_retain_one_and_one_input_is_plain_sgd():
    sizes, M = (2, 3, 2), np.random.default_rng(46).standard_normal((2, 2))
    single = deep_starts(sizes, 1, 47)
    run = deep.deep_dropout_sgd(M, single, 0.0, 0.1, 1, torch.Generator().manual_seed(48), progress=False)
    x = torch.randn((1, 1, 2), generator=torch.Generator().manual_seed(48), dtype=torch.float32).double()[0, 0].numpy()
    W1, W2 = single[0][0], single[1][0]
    error = W2 @ W1 @ x - M @ x
    np.testing.assert_allclose(run.final["W2"][0], W2 - 0.1 * 2 * np.outer(error, W1 @ x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(run.final["W1"][0], W1 - 0.1 * 2 * np.outer(W2.T @ error, x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs, match", [
    (dict(layers0=[np.ones((1, 2, 2))]), "at least two"),
    (dict(layers0=[np.ones((1, 3, 2)), np.ones((1, 2, 2))]), "chain"),
    (dict(M=np.ones((3, 2))), "M must"),
    (dict(lam=-1.0), "lam"),
    (dict(batch_size=0), "batch_size"),
    (dict(input_factor=np.ones((3, 3))), "input_factor"),
])
def test_deep_dropout_sgd_rejects_bad_input(kwargs, match):
    arguments = dict(M=np.ones((2, 2)), layers0=[np.ones((1, 3, 2)), np.ones((1, 2, 3))], lam=0.5, lr=0.1, steps=2,
                     generator=torch.Generator().manual_seed(0), progress=False)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        deep.deep_dropout_sgd(**arguments)
