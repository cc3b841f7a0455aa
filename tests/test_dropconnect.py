"""DropConnect: the exact penalty against enumeration, sampling and the paper's Theorem 4.1."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import dropconnect, linear
from dropnb.rounding import roundoff_tolerance
from dropnb.masks import Bernoulli
from helpers import SD2, SR, shallow_runs

FAST = settings(max_examples=25, deadline=None, database=None)
D1, D2, WIDTH = 2, 3, 2  # 2^{d₂r} = 64 masks


def correlated_second_moment(d2: int, correlation: float = 0.9, scales=None) -> tuple[np.ndarray, np.ndarray]:
    """S = LLᵀ with every pair of inputs correlated by ``correlation`` and standard deviations
    ``scales`` (default 1, 2, …); returns (S, L), L lower-triangular."""
    scales = np.arange(1.0, d2 + 1) if scales is None else np.asarray(scales, dtype=np.float64)
    R = np.full((d2, d2), correlation) + (1 - correlation) * np.eye(d2)
    S = scales[:, None] * R * scales[None, :]
    return S, np.linalg.cholesky(S)


def network(seed: int, d1: int = D1, d2: int = D2, width: int = WIDTH):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((d1, d2)), rng.standard_normal((d1, width)), rng.standard_normal((d2, width))


def relative_gap(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# --- the exact objective against enumeration ------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("retain", [0.1, 0.4, 0.7, 1.0])
def test_objective_matches_enumeration_with_correlated_inputs(retain, seed):
    M, U, V = network(seed)
    S, _ = correlated_second_moment(D2)
    enumerated = dropconnect.enumerated_objective(M, U, V, retain, S)
    # Both sides are sums of non-negative expectations (64 masks) of moderately sized terms.
    assert relative_gap(dropconnect.objective(M, U, V, retain, S), enumerated) <= 1e-12


@FAST
@given(seed=st.integers(0, 2**32 - 1), d1=st.integers(1, 3), d2=st.integers(1, 3), width=st.integers(1, 3),
       retain=st.floats(0.05, 1.0), correlation=st.floats(-0.45, 0.95))
def test_objective_matches_enumeration(seed, d1, d2, width, retain, correlation):
    M, U, V = network(seed, d1, d2, width)
    S, _ = correlated_second_moment(d2, correlation)  # positive definite for correlation > −1/(d₂ − 1)
    enumerated = dropconnect.enumerated_objective(M, U, V, retain, S)
    assert relative_gap(dropconnect.objective(M, U, V, retain, S), enumerated) <= 1e-12


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("retain", [0.1, 0.4, 0.7])
def test_printed_theorem_4_1_is_off_by_tens_of_percent_with_correlated_inputs(retain, seed):
    M, U, V = network(seed)
    S, _ = correlated_second_moment(D2)
    exact = dropconnect.enumerated_objective(M, U, V, retain, S)
    loss = linear.expected_loss(M, U, V, S)
    printed = dropconnect.printed_regularizer(U, V, retain, S)
    # The penalties differ by a θ-independent factor (both are λ times a function of U, V, S):
    # 2.02, 1.52 and 1.54 for these three networks.
    assert relative_gap(printed, exact - loss) >= 0.5
    if retain <= 0.4:  # for θ = 0.7 the penalty is small next to the loss (6–11 % of the objective)
        assert relative_gap(loss + printed, exact) >= 0.15


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("retain", [0.1, 0.4, 0.7])
def test_printed_theorem_4_1_holds_with_diagonal_second_moment(retain, seed):
    M, U, V = network(seed)
    S = np.diag([0.5, 2.0, 3.0])
    exact = dropconnect.enumerated_objective(M, U, V, retain, S)
    assert relative_gap(dropconnect.objective(M, U, V, retain, S), exact) <= 1e-12
    assert relative_gap(linear.expected_loss(M, U, V, S) + dropconnect.printed_regularizer(U, V, retain, S),
                        exact) <= 1e-12
    # Same sums of non-negative terms λ‖uₖ‖²Vⱼₖ²Sⱼⱼ in a different order: γ of a few dozen operations.
    assert math.isclose(dropconnect.regularizer(U, V, retain, S), dropconnect.printed_regularizer(U, V, retain, S),
                        rel_tol=2 * roundoff_tolerance(D1 + D2 * D2 + WIDTH + 10))


def test_printed_regularizer_is_the_dropout_regularizer():
    M, U, V = network(3)
    S, _ = correlated_second_moment(D2)
    assert dropconnect.printed_regularizer(U, V, 0.3, S) == linear.bernoulli_regularizer(U, V, 0.3, S)
    assert math.isclose(dropconnect.printed_regularizer(U, V, 0.3, S),
                        linear.regularizer(U, V, Bernoulli(WIDTH, 0.3), S), rel_tol=1e-13)


# --- the regularizer ------------------------------------------------------------------------------


def test_regularizer_matches_explicit_sums():
    _, U, V = network(4, 3, 4, 3)
    S, _ = correlated_second_moment(4, 0.5)
    retain = 0.35
    lam = (1 - retain) / retain
    total = 0.0
    for k in range(U.shape[1]):
        u_norm = sum(U[i, k] ** 2 for i in range(U.shape[0]))
        total += u_norm * sum(V[j, k] ** 2 * S[j, j] for j in range(V.shape[0]))
    # Non-negative terms, each a product of ≤ 6 roundings after sums of length ≤ 4.
    assert math.isclose(dropconnect.regularizer(U, V, retain, S), lam * total,
                        rel_tol=2 * roundoff_tolerance(3 + 4 + 3 + 10))


def test_regularizer_is_dropout_regularizer_with_diagonal_of_second_moment():
    _, U, V = network(5, 3, 4, 3)
    S, _ = correlated_second_moment(4, 0.8)
    assert math.isclose(dropconnect.regularizer(U, V, 0.6, S),
                        linear.bernoulli_regularizer(U, V, 0.6, np.diag(np.diag(S))), rel_tol=1e-13)


def test_regularizer_with_identity_is_lambda_path_norm():
    _, U, V = network(6, 3, 4, 5)
    assert math.isclose(dropconnect.regularizer(U, V, 0.25), 3 * linear.path_norm_squared(U, V), rel_tol=1e-13)
    assert dropconnect.regularizer(U, V, 0.25) == dropconnect.regularizer(U, V, 0.25, np.eye(4))


def test_objective_without_dropconnect_is_the_loss():
    M, U, V = network(7)
    S, _ = correlated_second_moment(D2)
    assert dropconnect.regularizer(U, V, 1.0, S) == 0.0
    assert dropconnect.objective(M, U, V, 1.0, S) == linear.expected_loss(M, U, V, S)


# --- sampling -------------------------------------------------------------------------------------


def test_sampled_losses_match_explicit_loop():
    M, U, V = network(8)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, D2))
    Z = rng.integers(0, 2, size=(3, D2, WIDTH)).astype(float)
    retain = 0.4
    expected = []
    for xn, Zn in zip(x, Z):
        hidden = [sum(Zn[j, k] * V[j, k] * xn[j] for j in range(D2)) / retain for k in range(WIDTH)]
        expected.append(sum((sum(M[i, j] * xn[j] for j in range(D2)) - sum(U[i, k] * hidden[k] for k in range(WIDTH)))
                            ** 2 for i in range(D1)))
    np.testing.assert_allclose(dropconnect.sampled_losses(M, U, V, x, Z, retain), expected, rtol=1e-12)


def test_sampled_losses_with_full_mask_are_plain_losses():
    M, U, V = network(9)
    x = np.random.default_rng(9).standard_normal((4, D2))
    losses = dropconnect.sampled_losses(M, U, V, x, np.ones((4, D2, WIDTH)), 1.0)
    np.testing.assert_allclose(losses, np.sum((x @ (M - U @ V.T).T) ** 2, axis=1), rtol=1e-12)


@pytest.mark.parametrize("shape, expected", [(7, (7,)), ((3, 5), (3, 5)), ((), ())])
def test_sample_masks_shape_and_values(shape, expected):
    Z = dropconnect.sample_masks(shape, 4, 3, 0.3, np.random.default_rng(0))
    assert Z.shape == (*expected, 4, 3) and Z.dtype == np.float64
    assert set(np.unique(Z)) <= {0.0, 1.0}


def test_sample_masks_mean_within_five_standard_errors():
    n, retain = 20_000, 0.3
    Z = dropconnect.sample_masks(n, 3, 2, retain, np.random.default_rng(1))
    # Each entry is Bernoulli(θ): standard error sqrt(θ(1 − θ)/n), 6 entries.
    assert np.all(np.abs(Z.mean(axis=0) - retain) <= 5 * math.sqrt(retain * (1 - retain) / n))


@pytest.mark.parametrize("retain", [0.3, 0.7])
def test_monte_carlo_matches_objective_with_correlated_inputs(retain):
    M, U, V = network(10)
    S, L = correlated_second_moment(D2)
    estimate = dropconnect.monte_carlo_objective(
        M, U, V, retain, lambda n, rng: rng.standard_normal((n, D2)) @ L.T, 100_000, np.random.default_rng(10))
    # Independent samples: within 5 standard errors with probability > 1 − 6e-7 (normal approximation).
    assert abs(estimate.mean - dropconnect.objective(M, U, V, retain, S)) <= 5 * estimate.standard_error


def test_monte_carlo_rejects_the_printed_formula():
    # Realizable target M = UVᵀ: the objective is the penalty alone, so the printed penalty's
    # error is the whole difference, far beyond 5 standard errors.
    _, U, V = network(11)
    M, retain = U @ V.T, 0.5
    S, L = correlated_second_moment(D2)
    estimate = dropconnect.monte_carlo_objective(
        M, U, V, retain, lambda n, rng: rng.standard_normal((n, D2)) @ L.T, 100_000, np.random.default_rng(11))
    assert abs(estimate.mean - dropconnect.regularizer(U, V, retain, S)) <= 5 * estimate.standard_error
    assert abs(estimate.mean - dropconnect.printed_regularizer(U, V, retain, S)) > 20 * estimate.standard_error


# --- torch ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_s", [False, True])
def test_batched_objective_matches_numpy(with_s):
    rng = np.random.default_rng(12)
    M = rng.standard_normal((D1, 4))
    U = rng.standard_normal((2, 3, D1, 5))
    V = rng.standard_normal((2, 3, 4, 5))
    S, _ = correlated_second_moment(4, 0.7)
    retain = 0.4
    values = dropconnect.batched_objective(torch.tensor(M), torch.tensor(U), torch.tensor(V),
                                           (1 - retain) / retain, torch.tensor(S) if with_s else None)
    assert values.shape == (2, 3)
    for index in np.ndindex(2, 3):
        expected = dropconnect.objective(M, U[index], V[index], retain, S if with_s else None)
        assert math.isclose(float(values[index]), expected, rel_tol=1e-12)


def test_batched_objective_gradient_matches_finite_differences():
    rng = np.random.default_rng(13)
    M = torch.tensor(rng.standard_normal((D1, D2)))
    S = torch.tensor(correlated_second_moment(D2)[0])
    U = torch.tensor(rng.standard_normal((2, D1, WIDTH)), requires_grad=True)
    V = torch.tensor(rng.standard_normal((2, D2, WIDTH)), requires_grad=True)
    lam = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda U, V, lam: dropconnect.batched_objective(M, U, V, lam, S), (U, V, lam))


# --- bad input ------------------------------------------------------------------------------------

_M, _U, _V = network(14)
_S, _ = correlated_second_moment(D2)

BAD_CALLS = {
    "M 1-d": (lambda: dropconnect.objective(_M[0], _U, _V, 0.5), "^M must"),
    "U rows": (lambda: dropconnect.objective(_M, _U[:1], _V, 0.5), "^U must"),
    "V rows": (lambda: dropconnect.enumerated_objective(_M, _U, _V[:2], 0.5), "^V must"),
    "U and V columns": (lambda: dropconnect.regularizer(_U[:, :1], _V, 0.5), "^U and V must"),
    "S shape": (lambda: dropconnect.regularizer(_U, _V, 0.5, np.eye(D2 + 1)), "^S must"),
    "S not symmetric": (lambda: dropconnect.objective(_M, _U, _V, 0.5, _S + np.triu(np.ones((D2, D2)), 1)), "^S must"),
    "V nan": (lambda: dropconnect.regularizer(_U, np.full_like(_V, np.nan), 0.5), "^V must"),
    "retain 0": (lambda: dropconnect.regularizer(_U, _V, 0), "^retain must"),
    "retain 1.5": (lambda: dropconnect.objective(_M, _U, _V, 1.5), "^retain must"),
    "retain nan (enumerated)": (lambda: dropconnect.enumerated_objective(_M, _U, _V, float("nan")), "^retain must"),
    "retain (printed)": (lambda: dropconnect.printed_regularizer(_U, _V, -0.1), "^retain must"),
    "retain (sampled)": (lambda: dropconnect.sampled_losses(_M, _U, _V, np.ones((2, D2)),
                                                            np.ones((2, D2, WIDTH)), 0), "^retain must"),
    "retain (masks)": (lambda: dropconnect.sample_masks(3, D2, WIDTH, 2.0, np.random.default_rng(0)), "^retain must"),
    "width (masks)": (lambda: dropconnect.sample_masks(3, D2, 0, 0.5, np.random.default_rng(0)), "^width must"),
    "d2 (masks)": (lambda: dropconnect.sample_masks(3, 0, WIDTH, 0.5, np.random.default_rng(0)), "^d2 must"),
    "too many masks": (lambda: dropconnect.enumerated_objective(np.ones((1, 4)), np.ones((1, 5)), np.ones((4, 5)), 0.5),
                       "enumeration is limited"),
    "x width": (lambda: dropconnect.sampled_losses(_M, _U, _V, np.ones((2, D2 + 1)), np.ones((2, D2, WIDTH)), 0.5),
                "^x must"),
    "Z shape": (lambda: dropconnect.sampled_losses(_M, _U, _V, np.ones((2, D2)), np.ones((3, D2, WIDTH)), 0.5),
                "and Z "),
    "Z 2-d": (lambda: dropconnect.sampled_losses(_M, _U, _V, np.ones((2, D2)), np.ones((2, D2)), 0.5), "^Z must"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_input_raises_naming_the_argument(case):
    call, name = BAD_CALLS[case]
    with pytest.raises(ValueError, match=name):
        call()


# --- DropConnect SGD, batched over runs (dropconnect.dropconnect_sgd) -------------------------------


def dropconnect_objective(M, U, V, lam, S):
    """tr((M − UVᵀ)S(M − UVᵀ)ᵀ) + λ Σₖ ‖uₖ‖² vₖᵀ Diag(S) vₖ, in torch (for autograd)."""
    residual = M - U @ V.T
    return torch.trace(residual @ S @ residual.T) + lam * ((U**2).sum(0) * (torch.diag(S)[:, None] * V**2).sum(0)).sum()


@pytest.fixture(scope="module")
def dropconnect_runs():
    """One DropConnect step of 20 000 runs from the same point, inputs from a correlated finite set."""
    M, U0, V0 = shallow_runs(runs=20_000, seed=3)
    rng = np.random.default_rng(6)
    X = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, -0.5, 0.8]]) @ rng.standard_normal((SD2, 9))
    retain, lr = 0.6, 0.01
    trajectory = dropconnect.dropconnect_sgd(M, U0, V0, retain, lr, 1, torch.Generator().manual_seed(1), data=X,
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
    M, U0, V0 = shallow_runs(runs=2)
    X = np.random.default_rng(0).standard_normal((SD2, 6))
    common = dict(lr=0.05, steps=1, progress=False, data=X, batch_size=3)  # one step: the same inputs
    connect = dropconnect.dropconnect_sgd(M, U0, V0, 1.0, generator=torch.Generator().manual_seed(2), **common)
    dropout = linear.algorithm1(M, U0, V0, Bernoulli(SR, 1.0), generator=torch.Generator().manual_seed(2), **common)
    np.testing.assert_allclose(connect.final["U"], dropout.final["U"], rtol=1e-12)
    np.testing.assert_allclose(connect.final["V"], dropout.final["V"], rtol=1e-12)


def test_dropconnect_rejects_a_bad_retain():
    M, U0, V0 = shallow_runs(runs=2)
    with pytest.raises(ValueError, match="retain"):
        dropconnect.dropconnect_sgd(M, U0, V0, 0.0, 0.1, 1, torch.Generator(), progress=False)
