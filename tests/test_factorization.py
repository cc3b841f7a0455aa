"""Matrix factorization with weight decay and dropout: closed forms against autograd, brute force and
the dropout modules; certificates, column moves and the meta-algorithm."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import data, equalizer, factorization as fz, landscape, optimize, shrinkage

SPECTRUM = np.array([5.0, 4.0, 3.0, 1.0, 0.5])


def instance(seed=0):
    return data.matrix_with_spectrum(SPECTRUM, (6, 5), np.random.default_rng(seed))


def random_point(rng, n2, n0, width, scale=1.0):
    return scale * rng.standard_normal((n2, width)), scale * rng.standard_normal((n0, width))


@settings(max_examples=15, deadline=None)
@given(n2=st.integers(1, 5), n0=st.integers(1, 5), width=st.integers(1, 4), decay=st.floats(0, 3),
       kappa=st.floats(0, 2), seed=st.integers(0, 2**32 - 1))
def test_objective_and_gradient_match_autograd(n2, n0, width, decay, kappa, seed):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((n2, n0))
    U, V = random_point(rng, n2, n0, width)
    fun, unpack = fz.flat_objective(Y, width, decay, kappa)
    x = np.concatenate([U.ravel(), V.ravel()])
    value, grad = optimize.value_and_gradient(fun, x)
    assert fz.objective(Y, U, V, decay, kappa) == pytest.approx(value, rel=1e-12, abs=1e-12)
    grad_u, grad_v = fz.gradient(Y, U, V, decay, kappa)
    np.testing.assert_allclose(np.concatenate([grad_u.ravel(), grad_v.ravel()]), grad, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(unpack(x)[0], U)


def test_dropout_objective_is_half_the_dropout_module_objective():
    rng = np.random.default_rng(1)
    Y = instance()
    U, V = random_point(rng, 6, 5, 4)
    kappa = 0.7
    assert fz.objective(Y, U, V, 0.0, kappa) == pytest.approx(0.5 * landscape.untied_objective(Y, U, V, 2 * kappa), rel=1e-13)
    for mine, theirs in zip(fz.gradient(Y, U, V, 0.0, kappa), landscape.untied_gradient(Y, U, V, 2 * kappa)):
        np.testing.assert_allclose(mine, 0.5 * theirs, rtol=1e-12, atol=1e-12)


def test_batched_equals_unbatched():
    rng = np.random.default_rng(2)
    Y = instance()
    U, V = rng.standard_normal((2, 3, 6, 3)), rng.standard_normal((2, 3, 5, 3))
    decay, kappa = np.array([0.5, 1.0, 2.0]), np.array([[0.0], [0.3]])
    values = fz.objective(Y, U, V, decay, kappa)
    gaps = fz.duality_gap(Y, U, V, decay, kappa)
    grad_u, grad_v = fz.gradient(Y, U, V, decay, kappa)
    for i in range(2):
        for j in range(3):
            args = (Y, U[i, j], V[i, j], decay[j], kappa[i, 0])
            assert values[i, j] == pytest.approx(fz.objective(*args), rel=1e-14)
            assert gaps[i, j] == pytest.approx(fz.duality_gap(*args), rel=1e-12)
            np.testing.assert_allclose(grad_u[i, j], fz.gradient(*args)[0], rtol=1e-14)
            np.testing.assert_allclose(grad_v[i, j], fz.gradient(*args)[1], rtol=1e-14)


def test_svt_minimizes_the_convex_objective():
    rng = np.random.default_rng(3)
    Y, decay = instance(), 2.0
    Z = fz.singular_value_threshold(Y, decay)
    best = fz.convex_objective(Y, Z, decay)
    assert best == pytest.approx(fz.optimal_value(SPECTRUM, decay), rel=1e-13)
    assert best == pytest.approx(18.625, rel=1e-13)
    for scale in (1e-1, 1e-3):
        for _ in range(200):
            assert fz.convex_objective(Y, Z + scale * rng.standard_normal(Z.shape), decay) >= best - 1e-12
    Q = (Y - Z) / decay  # a subgradient of the nuclear norm at Z
    assert np.linalg.norm(Q, 2) == pytest.approx(1.0, rel=1e-12)
    assert np.sum(Q * Z) == pytest.approx(fz.nuclear_norm(Z), rel=1e-12)
    batch = Z + rng.standard_normal((3, 6, 5))
    np.testing.assert_allclose(fz.convex_objective(Y, batch, decay), [fz.convex_objective(Y, B, decay) for B in batch])


def test_balanced_factors_attain_the_variational_form():
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 5))
    U, V = fz.balanced_factors(Z, 4)
    assert U.shape == (6, 4) and V.shape == (5, 4)
    np.testing.assert_allclose(U @ V.T, Z, atol=1e-13)
    np.testing.assert_allclose(U.T @ U, V.T @ V, atol=1e-12)
    assert 0.5 * (np.sum(U**2) + np.sum(V**2)) == pytest.approx(fz.nuclear_norm(Z), rel=1e-13)
    C = rng.standard_normal((4, 4)) + 3 * np.eye(4)
    other = 0.5 * (np.sum((U @ C) ** 2) + np.sum((V @ np.linalg.inv(C).T) ** 2))
    assert other >= fz.nuclear_norm(Z)
    with pytest.raises(ValueError, match="width must be at least rank"):
        fz.balanced_factors(Z, 1)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 7])
def test_optimal_factors_are_critical_with_the_closed_form_value(width):
    Y, decay = instance(), 2.0
    U, V = fz.optimal_factors(Y, decay, width)
    assert U.shape == (6, width)
    assert fz.objective(Y, U, V, decay) == pytest.approx(fz.optimal_value(SPECTRUM, decay, width), rel=1e-13)
    assert np.sqrt(sum(np.sum(g**2) for g in fz.gradient(Y, U, V, decay))) < 1e-12
    if width >= 3:
        np.testing.assert_allclose(U @ V.T, fz.singular_value_threshold(Y, decay), atol=1e-13)
        assert fz.duality_gap(Y, U, V, decay) == pytest.approx(0.0, abs=1e-12)


def test_optimal_value_is_not_beaten_by_local_search():
    rng = np.random.default_rng(5)
    Y, decay = instance(), 2.0
    for width in (1, 2, 4):
        fun, _ = fz.flat_objective(Y, width, decay)
        for _ in range(3):
            U, V = random_point(rng, 6, 5, width)
            found = optimize.minimize(fun, np.concatenate([U.ravel(), V.ravel()]))
            assert found.value >= fz.optimal_value(SPECTRUM, decay, width) - 1e-12
            assert found.value == pytest.approx(fz.optimal_value(SPECTRUM, decay, width), abs=1e-9)


def test_duality_gap_bounds_the_suboptimality():
    rng = np.random.default_rng(6)
    Y, decay = instance(), 2.0
    for width in (1, 3, 6):
        for scale in (0.1, 1.0):
            U, V = random_point(rng, 6, 5, width, scale)
            gap = fz.duality_gap(Y, U, V, decay)
            assert gap >= fz.objective(Y, U, V, decay) - fz.optimal_value(SPECTRUM, decay) - 1e-12
    # dropout: zero at the closed-form optimum when the width does not bind
    kappa = 1.0
    for width in (4, 6):
        optimum = shrinkage.global_optimum(Y, width, 2 * kappa)
        assert fz.objective(Y, optimum.U, optimum.V, 0.0, kappa) == pytest.approx(0.5 * optimum.value, rel=1e-12)
        assert abs(fz.duality_gap(Y, optimum.U, optimum.V, 0.0, kappa)) < 1e-11
        U, V = random_point(rng, 6, 5, width)
        assert fz.duality_gap(Y, U, V, 0.0, kappa) >= fz.objective(Y, U, V, 0.0, kappa) - 0.5 * optimum.value - 1e-12


@pytest.mark.parametrize("kappa,width", [(1.0, 2), (1.0, 4), (1.0, 10), (0.25, 3), (0.25, 1), (1.0, 1)])
def test_squared_nuclear_threshold_matches_the_dropout_optimum_when_the_width_does_not_bind(kappa, width):
    Y = instance()
    k, t = fz.squared_nuclear_threshold(SPECTRUM, kappa, width)
    Z = fz.singular_value_threshold(Y, t)
    assert t == pytest.approx(2 * kappa / width * fz.nuclear_norm(Z), rel=1e-12)
    assert np.sum(SPECTRUM > t) == k
    optimum = shrinkage.global_optimum(Y, width, 2 * kappa)
    if k <= width:
        np.testing.assert_allclose(optimum.product, Z, atol=1e-12)
        assert fz.convex_objective(Y, Z, 0.0, kappa, width) == pytest.approx(0.5 * optimum.value, rel=1e-12)
    else:  # the width binds: the rank-limited optimum is worse than the convex bound
        assert 0.5 * optimum.value > fz.convex_objective(Y, Z, 0.0, kappa, width) + 1e-6


def test_zero_padding_does_not_loosen_the_dropout_gap():
    Y = instance()
    optimum = shrinkage.global_optimum(Y, 4, 2.0)
    U, V = np.pad(optimum.U, ((0, 0), (0, 2))), np.pad(optimum.V, ((0, 0), (0, 2)))
    assert abs(fz.duality_gap(Y, U, V, 0.0, 1.0)) < 1e-11


def test_convex_lower_bound_holds():
    rng = np.random.default_rng(7)
    Y = instance()
    for width in (1, 3, 5, 8):
        U, V = random_point(rng, 6, 5, width)
        for decay, kappa in ((2.0, 0.0), (0.0, 1.0), (0.5, 0.5)):
            bound = fz.convex_objective(Y, U @ V.T, decay, kappa, width)
            assert fz.objective(Y, U, V, decay, kappa) >= bound - 1e-12


def test_certificate_at_the_optimum_and_at_the_best_rank_two_point():
    Y, decay = instance(), 2.0
    U, V = fz.optimal_factors(Y, decay, 4)
    cert = fz.polar_certificate(Y, U, V, decay)
    assert abs(cert.sigma_max - decay) <= cert.rounding
    assert abs(cert.scaling_residual) < 1e-12
    assert cert.holds(decay, cert.rounding / decay)
    U2, V2 = fz.optimal_factors(Y, decay, 2)
    cert2 = fz.polar_certificate(Y, U2, V2, decay)
    assert cert2.sigma_max == pytest.approx(3.0, rel=1e-12)
    assert not cert2.holds(decay, 1e-6)
    R = Y - U2 @ V2.T
    assert cert2.left @ R @ cert2.right == pytest.approx(cert2.sigma_max, rel=1e-12)


def test_polar_value_is_never_exceeded():
    rng = np.random.default_rng(8)
    R = rng.standard_normal((6, 5))
    sigma, u, v = fz.top_singular_triple(R)
    a, b = rng.standard_normal((20_000, 6)), rng.standard_normal((20_000, 5))
    ratio = np.einsum("ni,ij,nj->n", a, R, b) / (np.sum(a**2, 1) + np.sum(b**2, 1))
    assert ratio.max() <= sigma / 2 * (1 + 1e-14)
    assert u @ R @ v / (u @ u + v @ v) == pytest.approx(sigma / 2, rel=1e-14)


@pytest.mark.parametrize("decay,kappa", [(2.0, 0.0), (0.0, 1.0), (0.7, 0.3)])
def test_append_change_is_exact(decay, kappa):
    rng = np.random.default_rng(9)
    Y = instance()
    U, V = random_point(rng, 6, 5, 3)
    u, v = rng.standard_normal(6), rng.standard_normal(5)
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    sigma = u @ (Y - U @ V.T) @ v
    for eps in (0.1, 1.0, 2.5):
        U1, V1 = fz.append_column(U, V, u, v, eps)
        change = fz.objective(Y, U1, V1, decay, kappa) - fz.objective(Y, U, V, decay, kappa)
        assert change == pytest.approx(fz.append_change(sigma, eps, decay, kappa), abs=1e-12)


def test_split_units_halves_the_dropout_penalty_only():
    rng = np.random.default_rng(10)
    U, V = random_point(rng, 6, 5, 3)
    U2, V2 = fz.split_units(U, V, 2)
    assert U2.shape == (6, 6)
    np.testing.assert_allclose(U2 @ V2.T, U @ V.T, atol=1e-13)
    assert np.sum(U2**2) + np.sum(V2**2) == pytest.approx(np.sum(U**2) + np.sum(V**2), rel=1e-14)
    def penalty(A, B):
        return np.sum(equalizer.importance_scores(A, B) ** 2)

    assert penalty(U2, V2) == pytest.approx(penalty(U, V) / 2, rel=1e-14)
    with pytest.raises(ValueError, match="copies"):
        fz.split_units(U, V, 0)


def test_expose_null_columns_finds_the_common_null_vector():
    rng = np.random.default_rng(11)
    Y, decay = instance(), 2.0
    U, V = fz.optimal_factors(Y, decay, 4)  # rank 3 in 4 columns
    Q = data.haar_orthogonal(4, rng)
    U, V = U @ Q, V @ Q  # no zero column any more
    assert np.linalg.norm(U, axis=0).min() > 1e-3
    Ur, Vr = fz.expose_null_columns(U, V)
    np.testing.assert_allclose(Ur @ Vr.T, U @ V.T, atol=1e-13)
    assert np.linalg.norm(Ur[:, -1]) + np.linalg.norm(Vr[:, -1]) < 1e-12
    assert np.sum(Ur**2) == pytest.approx(np.sum(U**2), rel=1e-13)


def test_gradient_descent_batched_with_padding_matches_separate_runs():
    rng = np.random.default_rng(12)
    Y, decay = instance(), 2.0
    U0, V0 = 1e-2 * rng.standard_normal((3, 6, 4)), 1e-2 * rng.standard_normal((3, 5, 4))
    U0[0, :, 2:], V0[0, :, 2:] = 0, 0  # width 2 inside a width-4 batch
    run = fz.gradient_descent(Y, U0, V0, decay, step=0.1, tol=1e-11, max_steps=20_000, trace_every=10)
    assert run.outcome["converged"].all()
    U, V = run.final["U"], run.final["V"]
    assert np.all(U[0, :, 2:] == 0) and np.all(V[0, :, 2:] == 0)
    alone = fz.gradient_descent(Y, U0[0, :, :2], V0[0, :, :2], decay, step=0.1, tol=1e-11, max_steps=20_000)
    np.testing.assert_allclose(U[0, :, :2], alone.final["U"], atol=1e-14)
    assert int(alone.outcome["iterations"]) == run.outcome["iterations"][0]
    values = fz.objective(Y, U, V, decay)
    assert values[0] == pytest.approx(fz.optimal_value(SPECTRUM, decay, 2), abs=1e-12)
    np.testing.assert_allclose(values[1:], fz.optimal_value(SPECTRUM, decay), atol=1e-12)
    trace = run.metrics["objective"]
    assert trace.shape[1] == 3 and np.all(np.diff(trace, axis=0) <= 1e-12)
    for U, V in zip(U[1:], V[1:]):  # balance at first-order points
        np.testing.assert_allclose(U.T @ U, V.T @ V, atol=1e-10)


def test_meta_algorithm_adds_one_singular_value_per_stage():
    rng = np.random.default_rng(13)
    Y, decay = instance(), 2.0
    U0, V0 = random_point(rng, 6, 5, 1, 1e-3)
    run = fz.meta_algorithm(Y, decay, U0, V0, step=0.1, gradient_tol=1e-11, certificate_tol=1e-6, trace_every=5)
    assert run.certified
    assert all(s.trace[0] >= s.trace[-1] for s in run.stages)
    assert [s.width for s in run.stages] == [1, 2, 3]
    for k, stage in enumerate(run.stages, start=1):
        assert stage.objective == pytest.approx(fz.optimal_value(SPECTRUM, decay, k), abs=1e-10)
        assert stage.U.shape == (6, k) and fz.objective(Y, stage.U, stage.V, decay) == stage.objective
    assert [round(s.sigma_max, 8) for s in run.stages] == [4.0, 3.0, 2.0]
    assert run.stages[0].epsilon == pytest.approx(2.0) and run.stages[-1].epsilon is None
    np.testing.assert_allclose(run.U @ run.V.T, fz.singular_value_threshold(Y, decay), atol=1e-9)


def test_exact_step_from_best_rank_k_lands_on_best_rank_k_plus_one():
    Y, decay = instance(), 2.0
    for k in (1, 2):
        U, V = fz.optimal_factors(Y, decay, k)
        cert = fz.polar_certificate(Y, U, V, decay)
        U1, V1 = fz.append_column(U, V, cert.left, cert.right, cert.sigma_max - decay)
        assert fz.objective(Y, U1, V1, decay) == pytest.approx(fz.optimal_value(SPECTRUM, decay, k + 1), abs=1e-12)


def test_flat_objective_autograd_hessian_shows_the_saddle_of_a_padded_rank_two_point():
    Y, decay = instance(), 2.0
    U, V = fz.optimal_factors(Y, decay, 3)
    U[:, 2], V[:, 2] = 0, 0  # best rank-2 point plus a zero column
    fun, _ = fz.flat_objective(Y, 3, decay)
    H = optimize.hessian(fun, np.concatenate([U.ravel(), V.ravel()]))
    assert np.linalg.eigvalsh(H).min() == pytest.approx(decay - 3.0, abs=1e-12)



def test_flat_point_lists_the_entries_row_by_row_and_inverts_unpack():
    rng = np.random.default_rng(3)
    Y = rng.standard_normal((4, 3))
    U, V = random_point(rng, 4, 3, 2)
    x = fz.flat_point(U, V)
    by_index = [U[i, j] for i in range(4) for j in range(2)] + [V[k, j] for k in range(3) for j in range(2)]
    np.testing.assert_array_equal(x, by_index)
    fun, unpack = fz.flat_objective(Y, 2, 0.5, 0.25)
    np.testing.assert_array_equal(unpack(x)[0], U)
    np.testing.assert_array_equal(unpack(x)[1], V)
    assert float(fun(torch.tensor(x))) == pytest.approx(fz.objective(Y, U, V, 0.5, 0.25), rel=1e-12)

@pytest.mark.parametrize("call,match", [
    (lambda Y: fz.objective(Y, np.zeros((5, 2)), np.zeros((5, 2)), 1.0), "U must have 6 rows"),
    (lambda Y: fz.objective(Y, np.zeros((6, 2)), np.zeros((5, 3)), 1.0), "same width"),
    (lambda Y: fz.objective(Y, np.zeros((6, 2)), np.zeros((5, 2)), -1.0), "decay"),
    (lambda Y: fz.objective(Y, np.zeros((6, 2)), np.zeros((5, 2)), 1.0, True), "kappa"),
    (lambda Y: fz.objective(Y, np.zeros((2, 6, 2)), np.zeros((2, 5, 2)), np.ones(3)), "decay"),
    (lambda Y: fz.objective(Y, np.full((6, 2), np.nan), np.zeros((5, 2)), 1.0), "U must be finite"),
    (lambda Y: fz.objective(Y[0], np.zeros((6, 2)), np.zeros((5, 2)), 1.0), "Y must be a 2-d"),
    (lambda Y: fz.singular_value_threshold(Y, -0.1), "decay"),
    (lambda Y: fz.convex_objective(Y, Y[:, :4], 1.0), "Z must have the shape"),
    (lambda Y: fz.convex_objective(Y, Y, 1.0, 0.5), "width is required"),
    (lambda Y: fz.optimal_value([1.0, 2.0], 1.0), "spectrum"),
    (lambda Y: fz.optimal_value(SPECTRUM, 1.0, 0), "width"),
    (lambda Y: fz.append_change(1.0, -0.5), "epsilon"),
    (lambda Y: fz.append_column(np.zeros((6, 2)), np.zeros((5, 2)), np.zeros(5), np.zeros(5), 1.0), "u and v"),
    (lambda Y: fz.polar_certificate(Y, np.zeros((2, 6, 2)), np.zeros((2, 5, 2)), 1.0), "one point"),
    (lambda Y: fz.gradient_descent(Y, np.zeros((6, 2)), np.zeros((5, 2)), 1.0, step=0.0, tol=1e-9, max_steps=10), "step"),
    (lambda Y: fz.gradient_descent(Y, np.zeros((6, 2)), np.zeros((5, 2)), 1.0, step=0.1, tol=1e-9, max_steps=0), "max_steps"),
    (lambda Y: fz.meta_algorithm(Y, 0.0, np.zeros((6, 1)), np.zeros((5, 1)), step=0.1, gradient_tol=1e-9,
                                 certificate_tol=1e-6), "decay"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call(instance())


def test_torch_dtype_is_float64():
    fun, _ = fz.flat_objective(instance(), 2, 1.0)
    assert fun(torch.zeros(22, dtype=torch.float64)).dtype == torch.float64


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the divergence is the point
@pytest.mark.parametrize("step, decay", [(1.0, 2.0), (0.1, 50.0)])
def test_gradient_descent_that_diverges_stops_with_a_clear_error(step, decay):
    """Too large a step, or a weight decay that makes the step too large: the engine stops the run
    instead of returning NaN factors."""
    rng = np.random.default_rng(12)
    U0, V0 = rng.standard_normal((6, 4)), rng.standard_normal((5, 4))
    with pytest.raises(FloatingPointError, match="gradient descent diverged before step .*not finite"):
        fz.gradient_descent(instance(), U0, V0, decay, step=step, tol=1e-11, max_steps=2_000)
