"""The closed-form global optimum: support, threshold, value, factors; against independent solvers."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from dropnb import data, equalizer, linear, masks, shrinkage

# Normal numbers only: a subnormal σ has no relative precision left (λσ/(r + λ) rounds back up to
# σ = 5e-324), so strict comparisons such as σ > τ lose their meaning there.
spectra = st.lists(st.floats(0.0, 5.0, allow_subnormal=False), min_size=1, max_size=8).map(lambda s: np.sort(s)[::-1])


def reduced_minimum(s, r, lam):
    """min over σ̄ ≥ 0 of Σ_{i≤r}(σᵢ − σ̄ᵢ)² + Σ_{i>r}σᵢ² + (λ/r)(Σσ̄)², by bounded L-BFGS."""
    padded = np.concatenate([s, np.zeros(max(0, r - len(s)))])
    head, tail = padded[:r], np.sum(padded[r:] ** 2)

    def G(x):
        return np.sum((head - x) ** 2) + tail + lam / r * x.sum() ** 2, -2 * (head - x) + 2 * lam / r * x.sum()

    result = minimize(G, head.copy(), jac=True, method="L-BFGS-B", bounds=[(0, None)] * r,
                      options=dict(ftol=0, gtol=1e-13, maxiter=10_000))
    return result.fun


@settings(max_examples=80, deadline=None)
@given(s=spectra, r=st.integers(1, 10), lam=st.floats(0.0, 20.0))
def test_optimal_value_solves_the_reduced_convex_problem(s, r, lam):
    scale = 1 + np.sum(s**2)
    assert shrinkage.optimal_value(s, r, lam) == pytest.approx(reduced_minimum(s, r, lam), abs=1e-9 * scale)


@settings(max_examples=80, deadline=None)
@given(s=spectra, r=st.integers(1, 10), lam=st.floats(0.0, 20.0))
def test_support_is_consistent_with_kkt(s, r, lam):
    rho, tau = shrinkage.support(s, r, lam)
    padded = np.concatenate([s, np.zeros(r + 1)])
    if rho:
        assert padded[rho - 1] > tau
        assert tau == pytest.approx(lam * padded[:rho].sum() / (r + lam * rho))
    if rho < r:
        assert padded[rho] <= tau + 1e-12 * (1 + padded[0])


@settings(max_examples=60, deadline=None)
@given(s=spectra, r=st.integers(1, 10))
def test_breakpoints_give_the_support_size(s, r):
    C = shrinkage.breakpoints(s, r)
    assert np.all(C[1:] <= C[:-1] * (1 + 1e-12))  # non-increasing up to rounding (ties in s)
    for lam in (0.0, 0.013, 0.31, 1.07, 7.3, 103.0):
        rho, _ = shrinkage.support(s, r, lam)
        assert rho == np.sum(lam < C)


@pytest.mark.parametrize("shape, r, lam", [((6, 5), 2, 0.1), ((6, 5), 3, 4.0), ((4, 3), 5, 0.5), ((5, 5), 5, 1.0)])
def test_global_optimum_factors_attain_the_value(shape, r, lam):
    rng = np.random.default_rng(r)
    M = data.matrix_with_spectrum(np.sort(rng.uniform(0.2, 3.0, min(shape)))[::-1], shape, rng)
    best = shrinkage.global_optimum(M, r, lam)
    mask = masks.Bernoulli(r, 1 / (1 + lam))
    assert linear.objective(M, best.U, best.V, mask) == pytest.approx(best.value, rel=1e-12)
    np.testing.assert_allclose(best.U @ best.V.T, best.product, atol=1e-12)
    np.testing.assert_allclose(equalizer.importance_scores(best.U, best.V), best.score, rtol=1e-12)
    assert best.score == pytest.approx(best.threshold / lam)
    assert np.linalg.matrix_rank(best.product, tol=1e-9) == best.rank


def test_global_optimum_gradient_vanishes():
    rng = np.random.default_rng(5)
    M = data.matrix_with_spectrum(np.array([3.0, 2.0, 1.9, 1.8, 0.5]), (6, 5), rng)
    best = shrinkage.global_optimum(M, 2, 0.1)
    grad_u, grad_v = linear.objective_gradient(M, best.U, best.V, masks.Bernoulli(2, 1 / 1.1))
    assert max(np.abs(grad_u).max(), np.abs(grad_v).max()) < 1e-12


def test_zero_rate_is_eckart_young():
    rng = np.random.default_rng(6)
    M = rng.standard_normal((7, 5))
    W, s, Yt = np.linalg.svd(M)
    best = shrinkage.global_optimum(M, 3, 0.0)
    np.testing.assert_allclose(best.product, (W[:, :3] * s[:3]) @ Yt[:3], atol=1e-12)
    assert best.value == pytest.approx(np.sum(s[3:] ** 2))


def test_zero_target_gives_zero_network():
    best = shrinkage.global_optimum(np.zeros((3, 4)), 2, 1.0)
    assert best.rank == 0 and best.value == 0 and best.score == 0
    assert not best.U.any() and not best.V.any()


def test_tied_optimum_matches_the_untied_one_for_psd_targets():
    rng = np.random.default_rng(7)
    E = data.haar_orthogonal(6, rng)
    M = (E * [5.0, 3.0, 2.2, 2.0, 1.0, 0.3]) @ E.T
    for lam in (0.05, 2.0):
        tied, untied = shrinkage.tied_optimum(M, 3, lam), shrinkage.global_optimum(M, 3, lam)
        np.testing.assert_array_equal(tied.U, tied.V)
        assert tied.value == pytest.approx(untied.value, rel=1e-12)
        np.testing.assert_allclose(tied.U @ tied.U.T, untied.product, atol=1e-12)
        np.testing.assert_allclose(np.sum(tied.U**2, axis=0), tied.score, rtol=1e-12)


@pytest.mark.parametrize("M, match", [(np.ones((2, 3)), "symmetric"), (np.array([[1.0, 2.0], [0.0, 1.0]]), "symmetric"),
                                      (np.diag([1.0, -1.0]), "semidefinite")])
def test_tied_optimum_rejects_bad_targets(M, match):
    with pytest.raises(ValueError, match=match):
        shrinkage.tied_optimum(M, 2, 1.0)


@pytest.mark.parametrize("call, match", [
    (lambda: shrinkage.support([1.0, 2.0], 2, 1.0), "spectrum"),
    (lambda: shrinkage.support([1.0, -0.5], 2, 1.0), "spectrum"),
    (lambda: shrinkage.support([[1.0]], 2, 1.0), "spectrum"),
    (lambda: shrinkage.support([1.0], 0, 1.0), "width"),
    (lambda: shrinkage.support([1.0], 2, -1.0), "lam"),
    (lambda: shrinkage.support([1.0], 2, float("nan")), "lam"),
    (lambda: shrinkage.global_optimum(np.ones(3), 2, 1.0), "M"),
    (lambda: shrinkage.global_optimum(np.full((2, 2), np.inf), 2, 1.0), "M"),
    (lambda: shrinkage.optimal_value([1.0], 2.5, 1.0), "width"),
])
def test_bad_input_raises_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=60, deadline=None)
@given(spectra, st.integers(1, 6), st.floats(0.0, 10.0), st.integers(0, 2**31 - 1))
def test_reduced_lower_bound_is_below_the_minimum_and_tight_at_it(s, r, lam, seed):
    """Φ(x) − ‖s‖²/4 never exceeds f* at any point x ≥ 0, and equals f* at the optimum's σ̄."""
    rng = np.random.default_rng(seed)
    f_star = shrinkage.optimal_value(s, r, lam)
    scale = 1.0 + np.sum(s**2)
    point = rng.exponential(1.0, r) * rng.integers(0, 2, r)
    assert shrinkage.reduced_lower_bound(s, r, lam, point) <= f_star + 1e-12 * scale
    rho, tau = shrinkage.support(s, r, lam)
    optimum = np.zeros(r)
    optimum[:rho] = s[:rho] - tau
    assert shrinkage.reduced_value(s, r, lam, optimum) == pytest.approx(f_star, abs=1e-12 * scale)
    assert shrinkage.reduced_lower_bound(s, r, lam, optimum) == pytest.approx(f_star, abs=1e-12 * scale)


def test_reduced_lower_bound_rejects_bad_points():
    with pytest.raises(ValueError, match="point"):
        shrinkage.reduced_lower_bound(np.array([2.0, 1.0]), 2, 0.5, np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="point"):
        shrinkage.reduced_value(np.array([2.0, 1.0]), 2, 0.5, np.array([1.0]))
