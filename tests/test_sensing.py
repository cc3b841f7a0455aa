"""dropnb.sensing against independent computations: enumeration, brute force, autograd, Monte Carlo."""

import numpy as np
import pytest
import torch

from dropnb import sensing
from dropnb.stats import spearman_critical


def _problem(seed=0, d1=4, d2=3, r=5, n=15):
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(d1, r)), rng.normal(size=(d2, r))
    A = rng.normal(size=(n, d1, d2))
    y = rng.normal(size=n)
    return rng, U, V, A, y


def test_proposition3_by_enumeration():
    _, U, V, A, y = _problem()
    for theta in (0.3, 0.8, 1.0):
        closed = sensing.dropout_objective(U, V, A, y, theta)
        assert sensing.enumerated_dropout_loss(U, V, A, y, theta) == pytest.approx(closed["objective"], rel=1e-12)
    assert closed["loss"] == pytest.approx(np.mean((y - np.einsum("ab,jab->j", U @ V.T, A)) ** 2))


def test_sampled_losses_all_kept_is_the_plain_loss():
    _, U, V, A, y = _problem()
    losses = sensing.sampled_dropout_losses(U, V, A, y, 1.0, np.ones((3, U.shape[1])))
    assert np.allclose(losses, sensing.dropout_objective(U, V, A, y, 1.0)["loss"])


def test_completion_measurements_and_population_regularizer():
    rng = np.random.default_rng(1)
    d1, d2, r = 4, 3, 2
    U, V = rng.normal(size=(d1, r)), rng.normal(size=(d2, r))
    p, q = rng.dirichlet(np.ones(d1)), rng.dirichlet(np.ones(d2))
    rows, cols = np.repeat(np.arange(d1), d2), np.tile(np.arange(d2), d1)
    A = sensing.completion_measurements(rows, cols, (d1, d2))
    assert A.sum() == d1 * d2 and A[5, rows[5], cols[5]] == 1
    terms = np.einsum("ai,jab,bi->ji", U, A, V) ** 2
    weighted = np.sum((p[rows] * q[cols])[:, None] * terms)  # E over p ⊗ q of Σᵢ (uᵢᵀAvᵢ)²
    assert sensing.population_regularizer(U, V, p, q) == pytest.approx(weighted, rel=1e-12)
    assert sensing.population_regularizer(U, V) == pytest.approx(np.sum(np.sum(U**2, 0) * np.sum(V**2, 0)))


def test_induced_regularizer_and_equalized_factors():
    rng = np.random.default_rng(2)
    M = rng.normal(size=(6, 2)) @ rng.normal(size=(2, 5))
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(5))
    for width in (2, 3, 7):
        Theta = sensing.induced_regularizer(M, width, p, q)
        U, V = sensing.equalized_sensing_factors(M, width, p, q)
        assert np.allclose(U @ V.T, M, atol=1e-12)
        assert sensing.population_regularizer(U, V, p, q) == pytest.approx(Theta, rel=1e-10)
    assert sensing.induced_regularizer(M, 2) == pytest.approx(np.linalg.norm(M, "nuc") ** 2 / 2)
    with pytest.raises(ValueError, match="rank"):
        sensing.induced_regularizer(M, 1)
    with pytest.raises(ValueError, match="positive"):
        sensing.equalized_sensing_factors(M, 2, np.r_[0.0, p[1:]], q)


def test_marginals_sampling_and_condition():
    rng = np.random.default_rng(3)
    p = sensing.zipf_marginal(50, 1.0, rng, 0.5)
    assert p.sum() == pytest.approx(1) and p.min() >= 0.5 / 50
    q = np.full(20, 1 / 20)
    rows, cols = sensing.sample_entries(p, q, 200_000, rng)
    assert np.abs(np.bincount(rows, minlength=50) / 200_000 - p).max() < 5e-3
    uniform = sensing.nondegeneracy_ratio(np.full(50, 0.02), q, 1000)
    assert uniform == pytest.approx(1000 / (np.sqrt(50 * 20) * np.log(50)))


def test_rademacher_norms_against_dense_matrix():
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(4))
    rows, cols = rng.integers(5, size=30), rng.integers(4, size=30)
    signs = rng.choice([-1.0, 1.0], size=(3, 30))
    values = sensing.rademacher_spectral_norms(rows, cols, p, q, signs)
    for zeta, value in zip(signs, values):
        Z = np.zeros((5, 4))
        np.add.at(Z, (rows, cols), zeta)
        assert value == pytest.approx(np.linalg.norm(np.diag(p**-0.5) @ Z @ np.diag(q**-0.5), 2), rel=1e-12)


def test_theorem11_bound_formula():
    value = sensing.theorem11_bound(0.1, 2.0, 1000, 100, 0.05)
    assert value == pytest.approx(0.1 + 8 * np.sqrt((4 * 100 * np.log(100) + np.log(40) / 4) / 1000))


def test_clipped_gaussian_moments_by_monte_carlo():
    rng = np.random.default_rng(5)
    mean = np.array([-0.9, 0.0, 0.4, 1.3])
    first, second = sensing.clipped_gaussian_moments(mean, 0.7)
    draws = np.clip(mean + 0.7 * rng.normal(size=(400_000, 4)), -1, 1)
    assert np.allclose(first, draws.mean(0), atol=5 * draws.std(0).max() / np.sqrt(400_000))
    assert np.allclose(second, (draws**2).mean(0), atol=5e-3)


def test_completion_gradient_is_autograd_and_descent_descends():
    rng = np.random.default_rng(6)
    d1, d2, r, n = 7, 5, 3, 40
    rows, cols = rng.integers(d1, size=n), rng.integers(d2, size=n)
    y = rng.uniform(-1, 1, size=n)
    lam = torch.tensor([0.0, 0.5, 2.0])
    U = torch.tensor(rng.normal(size=(3, d1, r)), requires_grad=True)
    V = torch.tensor(rng.normal(size=(3, d2, r)), requires_grad=True)
    sensing.completion_objective(U, V, rows, cols, y, lam).sum().backward()
    gU, gV = sensing.completion_gradient(U.detach(), V.detach(), rows, cols, y, lam)
    assert torch.allclose(gU, U.grad, atol=1e-12) and torch.allclose(gV, V.grad, atol=1e-12)
    start = sensing.completion_objective(U.detach(), V.detach(), rows, cols, y, lam)
    U1, V1 = sensing.completion_descent(0.3 * U.detach(), 0.3 * V.detach(), rows, cols, y, lam, 200, 0.05)
    assert torch.all(sensing.completion_objective(U1, V1, rows, cols, y, lam) < start)


def test_input_dropout_is_a_weighted_ridge():
    rng = np.random.default_rng(7)
    M, A, y = rng.normal(size=(2, 3)), rng.normal(size=(9, 2, 3)), rng.normal(size=9)
    theta = 0.4
    closed = np.mean((y - np.einsum("ab,jab->j", M, A)) ** 2) + (1 - theta) / theta * sensing.input_dropout_regularizer(M, A)
    assert sensing.enumerated_input_dropout_loss(M, A, y, theta) == pytest.approx(closed, rel=1e-12)


def test_spearman_critical_values():
    # k = 7: P(ρ = 1) = 1/5040, P(ρ ≥ 0.964) = 7/5040, P(ρ ≥ 0.929) = 17/5040.
    assert spearman_critical(7, 17 / 5040) == pytest.approx(1 - 24 / 336)
    assert spearman_critical(7, 1e-3) == 1.0
    assert spearman_critical(7, 1e-4) > 1.0


def test_bad_inputs_name_the_argument():
    _, U, V, A, y = _problem()
    with pytest.raises(ValueError, match="retain"):
        sensing.dropout_objective(U, V, A, y, 0.0)
    with pytest.raises(ValueError, match="y"):
        sensing.dropout_objective(U, V, A, y[:-1], 0.5)
    with pytest.raises(ValueError, match="rows"):
        sensing.completion_measurements([0, 9], [0, 1], (3, 3))


def test_rating_biases_is_ridge_least_squares():
    rng = np.random.default_rng(7)
    d1, d2, n, ridge = 6, 4, 40, 0.7
    rows, cols = rng.integers(d1, size=n), rng.integers(d2, size=n)
    values = rng.normal(size=n) + 3
    mean, b, c = sensing.rating_biases(rows, cols, values, (d1, d2), ridge)
    design = np.zeros((n, d1 + d2))
    design[np.arange(n), rows] = 1
    design[np.arange(n), d1 + cols] = 1
    augmented = np.vstack([design, np.sqrt(ridge) * np.eye(d1 + d2)])  # ridge as extra rows of least squares
    target = np.concatenate([values - values.mean(), np.zeros(d1 + d2)])
    expected = np.linalg.lstsq(augmented, target, rcond=None)[0]
    assert mean == pytest.approx(values.mean())
    assert np.allclose(np.concatenate([b, c]), expected, atol=1e-12)
    unobserved = np.setdiff1d(np.arange(d1), rows)
    assert np.all(b[unobserved] == 0)  # no rating, no evidence: the ridge keeps the bias at 0
    with pytest.raises(ValueError, match="ridge"):
        sensing.rating_biases(rows, cols, values, (d1, d2), 0.0)
    with pytest.raises(ValueError, match="rows"):
        sensing.rating_biases(rows + d1, cols, values, (d1, d2), ridge)
    with pytest.raises(ValueError, match="values"):
        sensing.rating_biases(rows, cols, values[:-1], (d1, d2), ridge)


def test_trace_norm_rate():
    assert sensing.trace_norm_rate(400, 1000) == pytest.approx(np.sqrt(400 * np.log(400) / 1000))
    assert sensing.trace_norm_rate(10, 50, alpha=4.0) == pytest.approx(2 * sensing.trace_norm_rate(10, 50))
    with pytest.raises(ValueError, match="d1"):
        sensing.trace_norm_rate(1, 10)
    with pytest.raises(ValueError, match="alpha"):
        sensing.trace_norm_rate(10, 10, alpha=-1.0)


def test_completion_descent_that_diverges_stops_with_a_clear_error():
    """lr = 2 overshoots: the factors become infinite, and no non-finite factor is returned."""
    rng = np.random.default_rng(6)
    d1, d2, r, n = 7, 5, 3, 40
    rows, cols = rng.integers(d1, size=n), rng.integers(d2, size=n)
    y = rng.uniform(-1, 1, size=n)
    U, V = torch.tensor(rng.normal(size=(2, d1, r))), torch.tensor(rng.normal(size=(2, d2, r)))
    with pytest.raises(FloatingPointError, match=r"completion descent diverged before step \d+: U is not finite"):
        sensing.completion_descent(U, V, rows, cols, y, torch.tensor([0.0, 0.5]), 300, 2.0)


@pytest.mark.parametrize("p", [[-0.2, 1.2], [3.0, 5.0], [0.5, 0.6]])
def test_nondegeneracy_ratio_refuses_marginals_that_are_not_probabilities(p):
    """Theorem 20's condition is about the marginals of the sampling law: negative or unnormalised
    ones gave ratios of −98.9 or 353 without a word."""
    with pytest.raises(ValueError, match="^p must be non-negative entries that sum to 1"):
        sensing.nondegeneracy_ratio(p, [0.2, 0.3, 0.5], 100)


# --- dropout SGD for completion, batched over runs (completion_sgd) -----------------------------


def test_completion_sgd_step_is_the_gradient_of_the_squared_error():
    """One rating, θ = 1: every minibatch repeats it, so one step is U_a ← U_a − 2η e V_c (and V
    likewise with the old U); the unit beyond the run's width never moves."""
    rng = np.random.default_rng(0)
    U0, V0 = rng.standard_normal((1, 3, 4)), rng.standard_normal((1, 2, 4))
    U0[..., 3] = V0[..., 3] = 0.5
    eta, y = 0.01, 0.7
    run = sensing.completion_sgd([1], [0], [y], U0, V0, 1.0, 3, eta, 1, 5, torch.Generator().manual_seed(0),
                                  progress=False)
    u, v = U0[0, 1, :3], V0[0, 0, :3]
    e = u @ v - y
    np.testing.assert_allclose(run.final["U"][0, 1, :3], u - 2 * eta * e * v, rtol=1e-13)
    np.testing.assert_allclose(run.final["V"][0, 0, :3], v - 2 * eta * e * u, rtol=1e-13)
    np.testing.assert_array_equal(run.final["U"][0, :, 3], U0[0, :, 3])
    np.testing.assert_array_equal(np.delete(run.final["U"][0], 1, axis=0), np.delete(U0[0], 1, axis=0))


def test_completion_sgd_blocks_of_runs_compute_what_one_batch_does(monkeypatch):
    """The CPU's cache-sized blocks of runs: runs of any mix of rates and widths, trained in blocks of
    one run or all at once from the same generator state, end at the same factors (same draws)."""
    rng = np.random.default_rng(3)
    rows, cols, y = rng.integers(0, 6, 40), rng.integers(0, 5, 40), rng.standard_normal(40)
    U0, V0 = rng.standard_normal((5, 6, 3)), rng.standard_normal((5, 5, 3))
    finals = []
    for block in (1, 10**9):
        monkeypatch.setattr(sensing, "_CPU_BLOCK", block)
        run = sensing.completion_sgd(rows, cols, y, U0, V0, [1.0, 0.5, 0.8, 0.6, 0.9], [3, 3, 2, 2, 1], 0.05, 3, 7,
                                      torch.Generator().manual_seed(4), progress=False)
        finals.append((run.final["U"], run.final["V"], run.losses))
    for one, whole in zip(*finals):
        np.testing.assert_array_equal(one, whole)


def test_completion_metrics_are_the_rmse_and_the_dropout_objective():
    rng = np.random.default_rng(1)
    U, V = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3))
    rows, cols, y = np.array([0, 1, 3, 3]), np.array([4, 0, 2, 1]), rng.standard_normal(4)
    out = sensing.completion_metrics({"a": (rows, cols, y)}, [0.5, 0.8], objective="a", chunk=7)(
        dict(U=torch.tensor(U), V=torch.tensor(V)))
    for k, theta in enumerate((0.5, 0.8)):
        pred = np.einsum("nk,nk->n", U[k, rows], V[k, cols])
        penalty = np.mean(np.sum(U[k, rows] ** 2 * V[k, cols] ** 2, axis=1))
        assert out["a_rmse"][k].item() == pytest.approx(np.sqrt(np.mean((pred - y) ** 2)), rel=1e-13)
        assert out["a_objective"][k].item() == pytest.approx(np.mean((pred - y) ** 2) + (1 - theta) / theta * penalty,
                                                             rel=1e-13)
