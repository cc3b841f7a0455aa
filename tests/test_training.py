"""Algorithm 1 (dropout SGD, batched over runs) and its checkpoints."""

import numpy as np
import pytest
import torch

from dropnb import deep, linear, optimize, training
from dropnb.rounding import roundoff_tolerance
from dropnb.masks import Bernoulli, Blocks, Finite, PerRun
from dropnb.engine import Run, log_checkpoints
from dropnb.training import algorithm1

D1, D2, R = 2, 3, 4


def problem(runs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((D1, D2))
    U0 = np.broadcast_to(rng.standard_normal((D1, R)), (runs, D1, R)).copy()
    V0 = np.broadcast_to(rng.standard_normal((D2, R)), (runs, D2, R)).copy()
    return M, U0, V0


def run(M, U0, V0, mask=None, lr=0.01, steps=10, seed=0, keep=True, **kwargs) -> Run:
    mask = Bernoulli(R, 0.5) if mask is None else mask
    return algorithm1(M, U0, V0, mask, lr, steps, torch.Generator().manual_seed(seed), keep=keep, progress=False,
                      **kwargs)


# --- the trajectory -------------------------------------------------------------------------------


def test_trajectory_shapes():
    M, U0, V0 = problem(runs=3)
    trajectory = run(M, U0, V0, steps=20)
    checkpoints = log_checkpoints(20, 40)
    assert trajectory.losses.shape == (3, 20)
    np.testing.assert_array_equal(trajectory.steps, checkpoints)
    assert trajectory.kept["U"].shape == (len(checkpoints), 3, D1, R)
    assert trajectory.kept["V"].shape == (len(checkpoints), 3, D2, R)
    assert all(a.dtype == np.float64 for a in (trajectory.losses, trajectory.kept["U"], trajectory.kept["V"]))


def test_first_checkpoint_is_the_initialization():
    M, U0, V0 = problem(runs=2)
    trajectory = run(M, U0, V0)
    np.testing.assert_array_equal(trajectory.kept["U"][0], U0)
    np.testing.assert_array_equal(trajectory.kept["V"][0], V0)


def test_explicit_checkpoints_are_sorted():
    M, U0, V0 = problem(runs=2)
    trajectory = run(M, U0, V0, steps=6, checkpoints=np.array([6, 0, 3]))
    np.testing.assert_array_equal(trajectory.steps, [0, 3, 6])
    assert trajectory.kept["U"].shape[0] == 3


def test_repeated_checkpoints_keep_steps_and_snapshots_aligned():
    M, U0, V0 = problem(runs=2)
    trajectory = run(M, U0, V0, steps=6, checkpoints=np.array([0, 3, 3, 6]))
    assert len(trajectory.steps) == len(trajectory.kept["U"]) == len(trajectory.kept["V"])


def test_input_arguments_are_not_modified():
    M, U0, V0 = problem(runs=2)
    copies = M.copy(), U0.copy(), V0.copy()
    run(M, U0, V0)
    for original, copy in zip((M, U0, V0), copies):
        np.testing.assert_array_equal(original, copy)


def test_same_seed_same_trajectory():
    M, U0, V0 = problem(runs=3)
    first, second = run(M, U0, V0, seed=7), run(M, U0, V0, seed=7)
    for name in ("losses", "steps"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    for name in ("U", "V"):
        np.testing.assert_array_equal(first.kept[name], second.kept[name])


def test_different_seed_different_trajectory():
    M, U0, V0 = problem(runs=3)
    assert not np.array_equal(run(M, U0, V0, seed=7).losses, run(M, U0, V0, seed=8).losses)


def test_runs_are_independent():
    M, U0, V0 = problem(runs=2)  # identical starting points, different draws
    trajectory = run(M, U0, V0)
    assert not np.array_equal(trajectory.losses[0], trajectory.losses[1])


def test_tiny_learning_rate_barely_moves_the_weights():
    M, U0, V0 = problem(runs=2)
    lr, steps = 1e-12, 5
    trajectory = run(M, U0, V0, lr=lr, steps=steps)
    # Each step moves U by lr·e hᵀ; with unit-scale weights and 3-d Gaussian inputs |e| and |h|
    # are O(10) and exceed 400 only with negligible probability, so five steps move U by less than
    # lr·steps·400² < 1e-6. Not moving at all would mean the update was skipped.
    change = np.abs(trajectory.kept["U"][-1] - U0).max()
    assert 0 < change < 1e-6


def test_each_step_follows_algorithm1_directions():
    """Replay the documented draws (x = Az, then b, each step) and redo every step in numpy."""
    runs, steps, lr = 3, 4, 0.05
    M, U0, V0 = problem(runs, seed=1)
    A = np.array([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [0.0, -1.0, 0.5]])
    mask = Blocks(R, 2, 0.7)
    trajectory = run(M, U0, V0, mask=mask, lr=lr, steps=steps, seed=3, input_factor=A,
                     checkpoints=np.arange(steps + 1))
    generator = torch.Generator().manual_seed(3)
    # Roundoff, entrywise: e = U diag(b/μ) Vᵀx − Mx and h = b ⊙ Vᵀx are bounded by
    # E = |U| H/μ + |M||x| and H = |b| ⊙ |V|ᵀ|x|; every term passes through at most
    # 3d₂ + r + d₁ + 10 roundings (x = Az, y = Mx, Vᵀx, U·, the updates), on each side.
    gamma = 2 * roundoff_tolerance(3 * D2 + R + D1 + 10)
    for t in range(steps):
        x = (torch.randn((runs, D2), generator=generator, dtype=torch.float64) @ torch.tensor(A).T).numpy()
        b = mask.sample_torch(runs, generator, torch.float64).numpy()
        for n in range(runs):
            U, V = trajectory.kept["U"][t, n], trajectory.kept["V"][t, n]
            xn, bn = x[n:n + 1], b[n:n + 1]
            H = np.abs(bn[0]) * (np.abs(V).T @ np.abs(xn[0]))
            E = np.abs(U) @ (H / mask.mean) + np.abs(M) @ np.abs(xn[0])
            loss = linear.sampled_losses(M, U, V, xn, bn, mask.mean)[0]
            assert abs(trajectory.losses[n, t] - loss) <= 2 * gamma * np.sum(E**2)
            dir_u, dir_v = linear.algorithm1_directions(U, V, xn, xn @ M.T, bn, mask.mean)
            bound_u = gamma * (np.abs(U) + lr * np.outer(E, H))
            bound_v = gamma * (np.abs(V) + lr * np.outer(np.abs(xn[0]), np.abs(bn[0]) * (np.abs(U).T @ E)))
            assert np.all(np.abs(trajectory.kept["U"][t + 1, n] - (U - lr * dir_u[0])) <= bound_u)
            assert np.all(np.abs(trajectory.kept["V"][t + 1, n] - (V - lr * dir_v[0])) <= bound_v)


# --- statistics over many runs --------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_runs():
    """One step of 20 000 independent runs from the same point, with correlated inputs."""
    M, U0, V0 = problem(runs=20_000, seed=2)
    A = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.0, -0.5, 0.8]])
    mask = Finite([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0]], [0.5, 0.3, 0.2])
    lr = 0.01
    trajectory = run(M, U0, V0, mask=mask, lr=lr, steps=1, seed=4, input_factor=A)
    return M, U0[0], V0[0], A @ A.T, mask, lr, trajectory


def test_first_losses_average_to_objective(many_runs):
    M, U, V, S, mask, _, trajectory = many_runs
    losses = trajectory.losses[:, 0]
    # Independent runs: the mean is within 5 standard errors with probability > 1 − 6e-7.
    standard_error = losses.std(ddof=1) / np.sqrt(len(losses))
    assert abs(losses.mean() - linear.objective(M, U, V, mask, S)) <= 5 * standard_error


def test_first_step_averages_to_scaled_gradient(many_runs):
    M, U, V, S, mask, lr, trajectory = many_runs
    grad_u, grad_v = linear.objective_gradient(M, U, V, mask, S)
    # E[e hᵀ] = ½ ∇_U f diag(μ) and E[x (b ⊙ Uᵀe)ᵀ] = ½ ∇_V f diag(μ); entrywise within 5 standard
    # errors of the mean over runs (20 entries, each exceeded with probability < 6e-7).
    for snapshots, gradient in ((trajectory.kept["U"], grad_u), (trajectory.kept["V"], grad_v)):
        directions = (snapshots[0] - snapshots[-1]) / lr
        standard_error = directions.std(axis=0, ddof=1) / np.sqrt(len(directions))
        assert np.all(np.abs(directions.mean(axis=0) - gradient * mask.mean / 2) <= 5 * standard_error)


# --- bad input ------------------------------------------------------------------------------------

_M, _U0, _V0 = problem(runs=2)

BAD_CALLS = {
    "U0 2-d": (dict(U0=_U0[0]), "U0"),
    "runs differ": (dict(V0=_V0[:1]), "U0"),
    "widths differ": (dict(V0=_V0[:, :, :2]), "U0"),
    "U0 rows": (dict(U0=_U0[:, :1]), "U0"),
    "V0 rows": (dict(V0=_V0[:, :2]), "V0"),
    "mask width": (dict(mask=Bernoulli(R + 1, 0.5)), "mask"),
    "lr zero": (dict(lr=0.0), "lr"),
    "lr negative": (dict(lr=-0.1), "lr"),
    "lr nan": (dict(lr=float("nan")), "lr"),
    "lr inf": (dict(lr=float("inf")), "lr"),
    "steps zero": (dict(steps=0), "steps"),
    "steps float": (dict(steps=2.5), "steps"),
    "checkpoint negative": (dict(checkpoints=np.array([-1, 5])), "checkpoints"),
    "checkpoint too late": (dict(checkpoints=np.array([0, 11])), "checkpoints"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_input_raises_naming_the_argument(case):
    changes, name = BAD_CALLS[case]
    arguments = dict(M=_M, U0=_U0, V0=_V0, mask=Bernoulli(R, 0.5), lr=0.01, steps=10) | changes
    with pytest.raises(ValueError, match=name):
        algorithm1(**arguments, generator=torch.Generator().manual_seed(0), progress=False)


# --- minibatches, schedules, metrics, gradient descent --------------------------------------------


def test_minibatch_of_one_is_algorithm1():
    M, U0, V0 = problem(runs=2)
    single, batched = run(M, U0, V0, seed=5), run(M, U0, V0, seed=5, batch_size=1)
    np.testing.assert_array_equal(single.kept["U"], batched.kept["U"])


def test_minibatch_step_averages_the_sample_directions():
    """One step with B samples moves by η times the mean of the B single-sample directions."""
    M, U0, V0 = problem(runs=1, seed=3)
    mask, lr, batch = Bernoulli(R, 0.6), 0.05, 7
    trajectory = run(M, U0, V0, mask=mask, lr=lr, steps=1, seed=9, batch_size=batch)
    generator = torch.Generator().manual_seed(9)
    x = torch.randn((1, batch, D2), generator=generator, dtype=torch.float64).numpy()[0]
    b = mask.sample_torch((1, batch), generator, torch.float64).numpy()[0]
    dir_u, dir_v = linear.algorithm1_directions(U0[0], V0[0], x, x @ M.T, b, mask.mean)
    np.testing.assert_allclose(trajectory.kept["U"][-1, 0], U0[0] - lr * dir_u.mean(axis=0), atol=1e-13)
    np.testing.assert_allclose(trajectory.kept["V"][-1, 0], V0[0] - lr * dir_v.mean(axis=0), atol=1e-13)
    losses = linear.sampled_losses(M, U0[0], V0[0], x, b, mask.mean)
    assert trajectory.losses[0, 0] == pytest.approx(losses.mean())


def test_schedule_is_called_with_the_step():
    M, U0, V0 = problem(runs=1)
    seen = []
    run(M, U0, V0, lr=lambda t: seen.append(t) or 1e-3, steps=4)
    assert [t for t in seen if t > 0] == [1, 2, 3]


def test_metrics_are_recorded_at_checkpoints():
    M, U0, V0 = problem(runs=3)
    mask = Bernoulli(R, 0.5)
    trajectory = run(M, U0, V0, mask=mask, steps=8, checkpoints=[0, 4, 8],
                     metrics=training.objective_metrics(M, mask), keep=True)
    assert trajectory.metrics["objective"].shape == (3, 3) and trajectory.metrics["scores"].shape == (3, 3, R)
    for c in range(3):
        for n in range(3):
            U, V = trajectory.kept["U"][c, n], trajectory.kept["V"][c, n]
            assert trajectory.metrics["objective"][c, n] == pytest.approx(linear.objective(M, U, V, mask), rel=1e-13)
            assert trajectory.metrics["loss"][c, n] == pytest.approx(linear.expected_loss(M, U, V), rel=1e-13)
            np.testing.assert_allclose(trajectory.metrics["scores"][c, n],
                                       np.linalg.norm(U, axis=0) * np.linalg.norm(V, axis=0), rtol=1e-13)


def test_weights_can_be_dropped_but_final_weights_stay():
    M, U0, V0 = problem(runs=2)
    kept, dropped = run(M, U0, V0, seed=1), run(M, U0, V0, seed=1, keep=False)
    assert dropped.kept == {}
    np.testing.assert_array_equal(dropped.final["U"], kept.kept["U"][-1])
    np.testing.assert_array_equal(dropped.final["V"], kept.kept["V"][-1])


def test_divergence_raises():
    M, U0, V0 = problem(runs=2)
    with pytest.raises(FloatingPointError, match="step size"):
        run(M, 100 * U0, 100 * V0, lr=10.0, steps=200)


def test_gradient_descent_follows_the_expected_direction():
    M, U0, V0 = problem(runs=2)
    mask = Blocks(R, 2, 0.7)
    S = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])
    lr = 0.01
    trajectory = training.gradient_descent(M, U0, V0, mask, lr, 1, S=S, progress=False)
    grad_u, grad_v = linear.objective_gradient(M, U0[0], V0[0], mask, S)
    np.testing.assert_allclose(trajectory.final["U"][1], U0[0] - lr * grad_u * mask.mean / 2, atol=1e-14)
    np.testing.assert_allclose(trajectory.final["V"][1], V0[0] - lr * grad_v * mask.mean / 2, atol=1e-14)
    assert trajectory.losses is None


def test_gradient_descent_decreases_the_objective():
    M, U0, V0 = problem(runs=2)
    mask = Bernoulli(R, 0.5)
    trajectory = training.gradient_descent(M, U0, V0, mask, 0.01, 200, metrics=training.objective_metrics(M, mask),
                                           progress=False)
    assert np.all(np.diff(trajectory.metrics["objective"], axis=0) <= 1e-12)


@pytest.mark.parametrize("changes, match", [(dict(batch_size=0), "batch_size"), (dict(lr=lambda t: -1.0), "lr"),
                                            (dict(U0=np.full((2, D1, R), np.nan)), "finite")])
def test_more_bad_input(changes, match):
    arguments = dict(M=_M, U0=_U0, V0=_V0, mask=Bernoulli(R, 0.5), lr=0.01, steps=10) | changes
    with pytest.raises(ValueError, match=match):
        algorithm1(**arguments, generator=torch.Generator().manual_seed(0), progress=False)


def deep_starts(sizes, runs, seed, scale=0.3):
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal((runs, b, a)) for a, b in zip(sizes, sizes[1:])]


def test_deep_gradient_descent_decreases_the_objective_for_each_rate():
    sizes, M = (3, 4, 4, 2), np.random.default_rng(30).standard_normal((2, 3))
    lams = np.array([0.1, 1.0, 3.0])
    run = training.deep_gradient_descent(M, deep_starts(sizes, 3, 31), lams, 0.02, 300,
                                         metrics=training.deep_metrics(M, lams), progress=False)
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
    run = training.deep_gradient_descent(M, starts, 0.5, 0.1, 1, progress=False)
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
        training.deep_gradient_descent(**arguments)


def test_deep_gradient_descent_reports_divergence():
    with pytest.raises(FloatingPointError, match="diverged"):
        training.deep_gradient_descent(np.ones((2, 2)) * 10, deep_starts((2, 3, 2), 1, 34, scale=3.0), 0.5, 10.0, 50,
                                       progress=False)


# --- a finite input set and DropConnect ----------------------------------------------------------


def test_data_inputs_are_columns_of_the_set_and_average_to_its_second_moment():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((D2, 7))
    draw = training._input_sampler(D2, 4000, 3, None, X, torch.Generator().manual_seed(0), torch.float64)
    x = draw().numpy().reshape(-1, D2)
    assert np.all(np.min(np.abs(x[:, :, None] - X[None]).sum(axis=1), axis=1) == 0)  # every draw is a column
    # the empirical second moment of 12 000 draws: entrywise within 5 standard errors of XXᵀ/N
    products = x[:, :, None] * x[:, None, :]
    standard_error = products.std(axis=0, ddof=1) / np.sqrt(len(products))
    assert np.all(np.abs(products.mean(axis=0) - X @ X.T / 7) <= 5 * standard_error)


@pytest.mark.parametrize("kwargs, match", [
    (dict(data=np.ones((D2 + 1, 5))), "data"),
    (dict(data=np.full((D2, 5), np.nan)), "data"),
    (dict(data=np.ones((D2, 5)), input_factor=np.eye(D2)), "not both"),
    (dict(batch_size=0), "batch_size"),
])
def test_bad_inputs_of_the_sampler_raise(kwargs, match):
    M, U0, V0 = problem(runs=2)
    with pytest.raises(ValueError, match=match):
        run(M, U0, V0, **kwargs)


def dropconnect_objective(M, U, V, lam, S):
    """tr((M − UVᵀ)S(M − UVᵀ)ᵀ) + λ Σₖ ‖uₖ‖² vₖᵀ Diag(S) vₖ, in torch (for autograd)."""
    residual = M - U @ V.T
    return torch.trace(residual @ S @ residual.T) + lam * ((U**2).sum(0) * (torch.diag(S)[:, None] * V**2).sum(0)).sum()


@pytest.fixture(scope="module")
def dropconnect_runs():
    """One DropConnect step of 20 000 runs from the same point, inputs from a correlated finite set."""
    M, U0, V0 = problem(runs=20_000, seed=3)
    rng = np.random.default_rng(6)
    X = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, -0.5, 0.8]]) @ rng.standard_normal((D2, 9))
    retain, lr = 0.6, 0.01
    trajectory = training.dropconnect_sgd(M, U0, V0, retain, lr, 1, torch.Generator().manual_seed(1), data=X,
                                          batch_size=2, keep=True, progress=False)
    return M, U0[0], V0[0], X @ X.T / 9, retain, lr, trajectory


def test_dropconnect_losses_average_to_its_objective(dropconnect_runs):
    M, U, V, S, retain, _, trajectory = dropconnect_runs
    value = dropconnect_objective(*map(torch.tensor, (M, U, V)), (1 - retain) / retain, torch.tensor(S))
    losses = trajectory.losses[:, 0]
    assert abs(losses.mean() - float(value)) <= 5 * losses.std(ddof=1) / np.sqrt(len(losses))


def test_dropconnect_step_averages_to_scaled_gradient(dropconnect_runs):
    M, U, V, S, retain, lr, trajectory = dropconnect_runs
    U_t, V_t = torch.tensor(U, requires_grad=True), torch.tensor(V, requires_grad=True)
    value = dropconnect_objective(torch.tensor(M), U_t, V_t, (1 - retain) / retain, torch.tensor(S))
    gradients = torch.autograd.grad(value, (U_t, V_t))
    # expected direction (θ/2)∇f; 20 entries, each within 5 standard errors
    for snapshots, gradient in zip((trajectory.kept["U"], trajectory.kept["V"]), gradients):
        directions = (snapshots[0] - snapshots[-1]) / lr
        standard_error = directions.std(axis=0, ddof=1) / np.sqrt(len(directions))
        assert np.all(np.abs(directions.mean(axis=0) - retain / 2 * gradient.numpy()) <= 5 * standard_error)


def test_dropconnect_with_retain_one_is_plain_sgd_like_algorithm1():
    M, U0, V0 = problem(runs=2)
    X = np.random.default_rng(0).standard_normal((D2, 6))
    common = dict(lr=0.05, steps=1, progress=False, data=X, batch_size=3)  # one step: the same inputs
    connect = training.dropconnect_sgd(M, U0, V0, 1.0, generator=torch.Generator().manual_seed(2), **common)
    dropout = algorithm1(M, U0, V0, Bernoulli(R, 1.0), generator=torch.Generator().manual_seed(2), **common)
    np.testing.assert_allclose(connect.final["U"], dropout.final["U"], rtol=1e-12)
    np.testing.assert_allclose(connect.final["V"], dropout.final["V"], rtol=1e-12)


def test_dropconnect_rejects_a_bad_retain():
    M, U0, V0 = problem(runs=2)
    with pytest.raises(ValueError, match="retain"):
        training.dropconnect_sgd(M, U0, V0, 0.0, 0.1, 1, torch.Generator(), progress=False)


# --- deep dropout SGD -----------------------------------------------------------------------------


def test_deep_dropout_sgd_losses_average_to_the_exact_objective():
    """E[(1/B)Σ‖Mx − W̄x‖²] = tr((M − W)S(M − W)ᵀ) + R: the first losses of identical runs, whose
    mean lies within 5 standard errors of the exact objective (probability > 1 − 6e-7)."""
    sizes, M = (3, 4, 3, 2), np.random.default_rng(40).standard_normal((2, 3))
    A = np.array([[1.0, 0.0, 0.0], [0.4, 0.8, 0.0], [0.0, -0.3, 1.2]])
    single = deep_starts(sizes, 1, 41)
    starts = [np.repeat(W, 4000, axis=0) for W in single]
    run = training.deep_dropout_sgd(M, starts, 0.6, 1e-9, 1, torch.Generator().manual_seed(42), batch_size=2,
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
    sgd = training.deep_dropout_sgd(M, starts, 0.5, lr, 1, torch.Generator().manual_seed(45), batch_size=1,
                                    progress=False)
    exact = training.deep_gradient_descent(M, single, 0.5, lr, 1, progress=False)
    for name, final in sgd.final.items():
        steps = final - single[int(name[1:]) - 1]
        expected = exact.final[name][0] - single[int(name[1:]) - 1][0]
        error = np.abs(steps.mean(axis=0) - expected)
        assert np.all(error <= 5 * steps.std(axis=0, ddof=1) / np.sqrt(len(steps)) + 1e-15)


def test_deep_dropout_sgd_with_retain_one_and_one_input_is_plain_sgd():
    sizes, M = (2, 3, 2), np.random.default_rng(46).standard_normal((2, 2))
    single = deep_starts(sizes, 1, 47)
    run = training.deep_dropout_sgd(M, single, 0.0, 0.1, 1, torch.Generator().manual_seed(48), progress=False)
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
        training.deep_dropout_sgd(**arguments)


def test_completion_sgd_step_is_the_gradient_of_the_squared_error():
    """One rating, θ = 1: every minibatch repeats it, so one step is U_a ← U_a − 2η e V_c (and V
    likewise with the old U); the unit beyond the run's width never moves."""
    rng = np.random.default_rng(0)
    U0, V0 = rng.standard_normal((1, 3, 4)), rng.standard_normal((1, 2, 4))
    U0[..., 3] = V0[..., 3] = 0.5
    eta, y = 0.01, 0.7
    run = training.completion_sgd([1], [0], [y], U0, V0, 1.0, 3, eta, 1, 5, torch.Generator().manual_seed(0),
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
        monkeypatch.setattr(training, "_CPU_BLOCK", block)
        run = training.completion_sgd(rows, cols, y, U0, V0, [1.0, 0.5, 0.8, 0.6, 0.9], [3, 3, 2, 2, 1], 0.05, 3, 7,
                                      torch.Generator().manual_seed(4), progress=False)
        finals.append((run.final["U"], run.final["V"], run.losses))
    for one, whole in zip(*finals):
        np.testing.assert_array_equal(one, whole)


def test_completion_metrics_are_the_rmse_and_the_dropout_objective():
    rng = np.random.default_rng(1)
    U, V = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3))
    rows, cols, y = np.array([0, 1, 3, 3]), np.array([4, 0, 2, 1]), rng.standard_normal(4)
    out = training.completion_metrics({"a": (rows, cols, y)}, [0.5, 0.8], objective="a", chunk=7)(
        dict(U=torch.tensor(U), V=torch.tensor(V)))
    for k, theta in enumerate((0.5, 0.8)):
        pred = np.einsum("nk,nk->n", U[k, rows], V[k, cols])
        penalty = np.mean(np.sum(U[k, rows] ** 2 * V[k, cols] ** 2, axis=1))
        assert out["a_rmse"][k].item() == pytest.approx(np.sqrt(np.mean((pred - y) ** 2)), rel=1e-13)
        assert out["a_objective"][k].item() == pytest.approx(np.mean((pred - y) ** 2) + (1 - theta) / theta * penalty,
                                                             rel=1e-13)


def test_relu_dropout_training_full_batch_sgd_is_gradient_descent():
    """θ = 1, the whole sample as one minibatch: one step of SGD on the mean squared loss."""
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((3, 6)), rng.standard_normal(6)
    u0, V0 = rng.standard_normal((1, 4)), rng.standard_normal((1, 3, 4))
    eta = 0.05
    run = training.relu_dropout_training(X, y, u0, V0, 1.0, 4, eta, 1, 6, torch.Generator().manual_seed(0),
                                         optimizer="sgd", progress=False)
    pre = V0[0].T @ X
    hidden = np.maximum(pre, 0)
    error = u0[0] @ hidden - y
    grad_u = 2 * hidden @ error / 6
    grad_V = 2 * X @ ((pre > 0) * np.outer(u0[0], error)).T / 6
    np.testing.assert_allclose(run.final["u"][0], u0[0] - eta * grad_u, rtol=1e-12)
    np.testing.assert_allclose(run.final["V"][0], V0[0] - eta * grad_V, rtol=1e-12)


# --- two-layer ReLU classifiers (relu_classifier_sgd) -------------------------------------------------


def classifier_problem(runs=2, d=3, m=5, k=3, n=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d, n))
    X /= np.linalg.norm(X, axis=0)
    labels = rng.integers(k, size=n)
    X_test, labels_test = rng.standard_normal((d, 6)), rng.integers(k, size=6)
    W0, A0 = rng.standard_normal((runs, m, d)), rng.choice([-1.0, 1.0], size=(runs, k, m))
    return X, labels, X_test, labels_test, W0, A0


def numpy_classifier_step(X, labels, W0, A0, retain, eta, batch_size, seed, train_top=True):
    """One step of relu_classifier_sgd in float64 numpy, from the documented draws of its generator."""
    runs, m, _ = W0.shape
    generator = torch.Generator().manual_seed(seed)
    torch.randint(0, 2**62, (1,), generator=generator)  # the evaluation generator's seed
    order = torch.argsort(torch.rand((runs, X.shape[1]), generator=generator, dtype=torch.float32), dim=1).numpy()
    uniform = torch.rand((runs, batch_size, m), generator=generator, dtype=torch.float32).double().numpy()
    W1, A1, losses = W0.copy(), A0.copy(), []
    for r in range(runs):
        picked = order[r, :batch_size]
        x, y = X[:, picked], labels[picked]
        b = uniform[r] < retain[r]  # (B, m)
        pre = W0[r] @ x  # (m, B)
        hidden = np.maximum(pre, 0) * b.T
        z = A0[r] @ hidden / np.sqrt(m)  # (k, B)
        p = np.exp(z - z.max(0))
        p /= p.sum(0)
        losses.append(np.mean(-np.log(p[y, np.arange(batch_size)])))
        onehot = np.eye(A0.shape[1])[:, y]
        delta = (p - onehot) / batch_size / np.sqrt(m)
        W1[r] -= eta * ((A0[r].T @ delta) * (pre > 0) * b.T) @ x.T
        if train_top:
            A1[r] -= eta * delta @ hidden.T
    return W1, A1, np.array(losses)


@pytest.mark.parametrize("train_top", [True, False])
def test_relu_classifier_sgd_first_step_is_the_numpy_step(train_top):
    X, labels, X_test, labels_test, W0, A0 = classifier_problem()
    retain, eta = np.array([0.5, 0.8]), 0.3
    run = training.relu_classifier_sgd(X, labels, X_test, labels_test, W0, A0, retain, eta, 1, 4,
                                       torch.Generator().manual_seed(5), train_top=train_top, checkpoints=[0, 1],
                                       keep=True, progress=False)
    W1, A1, losses = numpy_classifier_step(X, labels, W0, A0, retain, eta, 4, 5, train_top)
    np.testing.assert_allclose(run.kept["W"][1], W1, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(run.kept["A"][1], A1, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(run.losses[:, 0], losses, rtol=1e-12)
    assert train_top or np.array_equal(run.final["A"], A0)


def test_relu_classifier_sgd_accuracies_at_the_start():
    """At step 0: the full network's accuracy from numpy; with θ = 1 every sub-network is the full network."""
    X, labels, X_test, labels_test, W0, A0 = classifier_problem(m=40, k=4, seed=3)
    run = training.relu_classifier_sgd(X, labels, X_test, labels_test, W0, A0, 1.0, 0.1, 1, 4,
                                       torch.Generator().manual_seed(0), fixed_masks=7, checkpoints=[0], progress=False)
    predicted = np.argmax(A0 @ np.maximum(W0 @ X_test, 0), axis=1)  # (R, n')
    full = np.mean(predicted == labels_test, axis=-1)
    np.testing.assert_allclose(run.metrics["full_accuracy"][0], full)
    np.testing.assert_allclose(run.metrics["visited_accuracy"][0], full)
    np.testing.assert_allclose(run.metrics["fixed_accuracy"][0], np.repeat(full[:, None], 7, axis=1))


def test_relu_classifier_sgd_fixed_masks_match_numpy():
    """The K fixed sub-networks (masks from the evaluation generator, drawn before training) against numpy."""
    X, labels, X_test, labels_test, W0, A0 = classifier_problem(m=30, k=4, seed=4)
    retain, K = np.array([0.3, 0.6]), 9
    seed = 11
    run = training.relu_classifier_sgd(X, labels, X_test, labels_test, W0, A0, retain, 0.1, 1, 4,
                                       torch.Generator().manual_seed(seed), fixed_masks=K, checkpoints=[0],
                                       progress=False)
    evaluation_seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(seed)).item())
    evaluation = torch.Generator().manual_seed(evaluation_seed)
    masks = torch.rand((2, K, 30), generator=evaluation, dtype=torch.float32).double().numpy() < retain[:, None, None]
    visited = torch.rand((2, 1, 30), generator=evaluation, dtype=torch.float32).double().numpy() < retain[:, None, None]
    hidden = np.maximum(W0 @ X_test, 0)  # (R, m, n')
    for r in range(2):
        fixed = [np.mean(np.argmax(A0[r] @ (masks[r, k][:, None] * hidden[r]), axis=0) == labels_test) for k in range(K)]
        np.testing.assert_allclose(run.metrics["fixed_accuracy"][0, r], fixed)
        sub = np.mean(np.argmax(A0[r] @ (visited[r, 0][:, None] * hidden[r]), axis=0) == labels_test)
        assert run.metrics["visited_accuracy"][0, r] == pytest.approx(sub)


@pytest.mark.parametrize("change, message", [
    (dict(labels=np.array([0, 1, 2, 3, 0, 1, 2])), "labels"),
    (dict(labels_test=np.array([0.5, 1, 2, 0, 1, 2])), "labels_test"),
    (dict(X_test=np.ones((4, 6))), "X_test"),
    (dict(A0=np.ones((2, 3, 6))), "A0"),
    (dict(fixed_masks=-1), "fixed_masks"),
    (dict(retain=np.array([0.5, 0.0])), "retain"),
])
def test_relu_classifier_sgd_refuses_bad_input(change, message):
    X, labels, X_test, labels_test, W0, A0 = classifier_problem()
    arguments = dict(X=X, labels=labels, X_test=X_test, labels_test=labels_test, W0=W0, A0=A0, retain=0.5, lr=0.1,
                     epochs=1, batch_size=4, generator=torch.Generator().manual_seed(0), progress=False)
    with pytest.raises(ValueError, match=message):
        training.relu_classifier_sgd(**{**arguments, **change})


# --- one mask distribution per run -----------------------------------------------------------------

def test_per_run_masks_of_one_distribution_reproduce_the_shared_mask():
    M, U0, V0 = problem(3)
    mask = Bernoulli(R, 0.5)
    shared, per_run = run(M, U0, V0, mask), run(M, U0, V0, PerRun([mask] * 3))
    np.testing.assert_array_equal(shared.kept["U"], per_run.kept["U"])
    np.testing.assert_array_equal(shared.losses, per_run.losses)


def test_per_run_masks_give_each_run_its_rate_in_descent_sampling_and_metrics():
    M, U0, V0 = problem(3)
    rates = (Bernoulli(R, 0.3), Bernoulli(R, 1.0), Blocks(R, 2, 0.6))
    fused = training.gradient_descent(M, U0, V0, PerRun(rates), 0.05, 5, progress=False)
    metrics = training.objective_metrics(M, PerRun(rates))({"U": torch.as_tensor(U0), "V": torch.as_tensor(V0)})
    for i, mask in enumerate(rates):
        alone = training.gradient_descent(M, U0[i:i + 1], V0[i:i + 1], mask, 0.05, 5, progress=False)
        np.testing.assert_allclose(fused.final["U"][i], alone.final["U"][0], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(float(metrics["objective"][i]), linear.objective(M, U0[i], V0[i], mask), rtol=1e-13)
    b = PerRun(rates).sample_torch((3, 500), torch.Generator().manual_seed(0))
    assert torch.equal(b[1], torch.ones(500, R))  # retain 1 keeps every unit
    assert torch.equal(b[2][:, 0], b[2][:, 1])  # blocks of two units


def test_per_run_masks_draw_each_distribution_once_for_its_runs_consecutive_or_not():
    half, full = Bernoulli(R, 0.5), Bernoulli(R, 1.0)
    drawn = PerRun([half, full, half]).sample_torch((3, 40), torch.Generator().manual_seed(1))
    generator = torch.Generator().manual_seed(1)
    expected = half.sample_torch((2, 40), generator, torch.float64)
    assert torch.equal(drawn[[0, 2]], expected) and torch.equal(drawn[1], torch.ones(40, R))
    again = PerRun([half, half, full]).sample_torch((3, 40), torch.Generator().manual_seed(1))
    assert torch.equal(again[:2], expected)


def test_per_run_masks_refuse_mismatches():
    M, U0, V0 = problem(3)
    with pytest.raises(ValueError, match="same width"):
        PerRun([Bernoulli(2, 0.5), Bernoulli(3, 0.5)])
    with pytest.raises(ValueError, match="MaskDistribution"):
        PerRun([])
    with pytest.raises(ValueError, match="PerRun of 3"):
        run(M, U0, V0, PerRun([Bernoulli(R, 0.5)] * 2))
    with pytest.raises(ValueError, match="runs"):
        PerRun([Bernoulli(R, 0.5)] * 2).sample_torch((3, 1), torch.Generator())
    with pytest.raises(ValueError, match="runs"):
        training.objective_metrics(M, PerRun([Bernoulli(R, 0.5)] * 2))({"U": torch.as_tensor(U0), "V": torch.as_tensor(V0)})
