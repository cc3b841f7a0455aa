"""Two-layer ReLU networks trained by dropout (dropnb.relu_lazy) against independent computations."""

import math
import warnings

import numpy as np
import pytest
import torch

from dropnb import stats
from dropnb import relu_lazy as tl

LN2 = math.log(2.0)


# --- the loss -------------------------------------------------------------------------------------


@pytest.mark.parametrize("base", [2.0, math.e, 10.0])
def test_logistic_against_the_formula(base):
    z = np.linspace(-20.0, 20.0, 81)
    expected = [math.log1p(math.exp(-v)) / math.log(base) for v in z]
    np.testing.assert_allclose(tl.logistic(z, base), expected, rtol=1e-13, atol=1e-300)
    assert isinstance(tl.logistic(0.5, base), float)
    assert tl.logistic(0.0, base) == pytest.approx(math.log(2) / math.log(base), rel=1e-15)
    # ℓ(z) − ℓ(−z) = −z/ln(base)
    np.testing.assert_allclose(tl.logistic(z, base) - tl.logistic(-z, base), -z / math.log(base), atol=1e-12)
    assert tl.logistic(z[:, None].reshape(9, 9), base).shape == (9, 9)


@pytest.mark.parametrize("base", [2.0, math.e])
def test_logistic_slope_is_minus_the_derivative(base):
    z = np.linspace(-15.0, 15.0, 61)
    h = 1e-5
    difference = -(tl.logistic(z + h, base) - tl.logistic(z - h, base)) / (2 * h)
    np.testing.assert_allclose(tl.logistic_slope(z, base), difference, rtol=1e-8, atol=1e-14)
    expected = [1 / ((1 + math.exp(v)) * math.log(base)) for v in z]
    np.testing.assert_allclose(tl.logistic_slope(z, base), expected, rtol=1e-13)
    # Q(z) + Q(−z) = 1/ln(base), and Q ≤ ℓ (|ℓ'| ≤ ℓ, used as Q_t ≤ L_t)
    np.testing.assert_allclose(tl.logistic_slope(z, base) + tl.logistic_slope(-z, base), 1 / math.log(base))
    assert np.all(tl.logistic_slope(z, base) <= tl.logistic(z, base))
    assert isinstance(tl.logistic_slope(1.0, base), float)


def test_logistic_is_stable_far_out():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        far = np.array([-800.0, 800.0])
        value, slope = tl.logistic(far), tl.logistic_slope(far)
    np.testing.assert_allclose(value, [800 / LN2, 0.0], rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(slope, [1 / LN2, 0.0], rtol=1e-15, atol=1e-300)
    assert 0 < tl.logistic(700.0) < 1e-300 and 0 < tl.logistic_slope(700.0) < 1e-300
    assert tl.logistic(-800.0, math.e) == pytest.approx(800.0, rel=1e-15)


# --- the network ----------------------------------------------------------------------------------


def plain_network(W, a, X, mask):
    m, n = W.shape[0], X.shape[1]
    out = np.zeros(n)
    for i in range(n):
        for r in range(m):
            out[i] += a[r] * mask[r, i] * max(0.0, float(W[r] @ X[:, i]))
    return out / math.sqrt(m)


def test_network_against_a_loop_over_units():
    rng = np.random.default_rng(0)
    m, d, n = 7, 3, 5
    W, X = rng.standard_normal((m, d)), rng.standard_normal((d, n))
    a = rng.choice([-1.0, 1.0], m)
    ones = np.ones((m, n))
    np.testing.assert_allclose(tl.network(W, a, X), plain_network(W, a, X, ones), rtol=1e-13, atol=1e-15)
    unit_mask = (rng.random(m) < 0.5).astype(float)
    np.testing.assert_allclose(tl.network(W, a, X, unit_mask), plain_network(W, a, X, np.repeat(unit_mask[:, None], n, 1)),
                               rtol=1e-13, atol=1e-15)
    sample_mask = (rng.random((m, n)) < 0.5).astype(float)
    np.testing.assert_allclose(tl.network(W, a, X, sample_mask), plain_network(W, a, X, sample_mask),
                               rtol=1e-13, atol=1e-15)
    one_input = X[:, [0]]  # one input under several masks: as many copies of the input, one mask each
    np.testing.assert_allclose(tl.network(W, a, one_input, sample_mask),
                               plain_network(W, a, np.repeat(one_input, n, 1), sample_mask), rtol=1e-13, atol=1e-15)
    # f(x; θW) = θ f(x; W): the test-time rescaling
    np.testing.assert_allclose(tl.network(0.3 * W, a, X), 0.3 * tl.network(W, a, X), rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="mask"):
        tl.network(W, a, X, np.ones((m, n + 1)))
    with pytest.raises(ValueError, match="a and X"):
        tl.network(W, a, X[:2])


# --- the data laws --------------------------------------------------------------------------------


def test_sphere_margin_sampler():
    dim, gap, runs = 4, 0.3, 3
    sample = tl.sphere_margin_sampler(dim, gap, runs, torch.Generator().manual_seed(5))
    x, y = sample(500)
    assert x.shape == (500, runs, dim) and y.shape == (500, runs)
    x, y = x.double().numpy(), y.double().numpy()
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-6)
    assert np.all(np.abs(x[..., 0]) >= gap)
    np.testing.assert_array_equal(y, np.sign(x[..., 0]))
    assert set(np.unique(y)) == {-1.0, 1.0}
    again = tl.sphere_margin_sampler(dim, gap, runs, torch.Generator().manual_seed(5))(500)
    np.testing.assert_array_equal(again[0].double().numpy(), x)
    other = tl.sphere_margin_sampler(dim, gap, runs, torch.Generator().manual_seed(6))(500)
    assert not np.array_equal(other[0].double().numpy(), x)
    # consecutive calls go on drawing; the runs get different points
    assert not np.array_equal(sample(500)[0].double().numpy(), x)
    assert not np.array_equal(x[:, 0], x[:, 1])


def test_sphere_sampler_without_gap_is_uniform():
    x, _ = tl.sphere_margin_sampler(3, 0.0, 2, torch.Generator().manual_seed(1))(10_000)
    x = x.double().numpy().reshape(-1, 3)
    np.testing.assert_allclose(x.mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(x.T @ x / len(x), np.eye(3) / 3, atol=0.02)


def test_circle_law_labels_and_gap():
    points, gap = 72, 0.4
    angles, labels = tl.circle_law(lambda phi: np.cos(2 * phi), points, gap)
    k = np.round(angles / (2 * np.pi / points)).astype(int)
    np.testing.assert_allclose(angles, 2 * np.pi * k / points, atol=1e-15)
    np.testing.assert_array_equal(labels, np.sign(np.cos(2 * angles)))
    assert np.all(np.abs(np.cos(2 * angles)) >= gap)
    dropped = np.setdiff1d(np.arange(points), k)
    assert dropped.size > 0 and np.all(np.abs(np.cos(4 * np.pi * dropped / points)) < gap)
    # zeros of the score are never kept, even at gap 0
    angles0, labels0 = tl.circle_law(lambda phi: np.cos(3 * phi), 360, 0.0)
    assert angles0.size == 360 - 6 and np.all(np.abs(labels0) == 1)
    with pytest.raises(ValueError, match="gap"):
        tl.circle_law(lambda phi: np.cos(phi), 36, 1.5)
    with pytest.raises(ValueError, match="labelling"):
        tl.circle_law(lambda phi: np.cos(phi)[:-1], 36, 0.1)


def test_circle_sampler_draws_the_law():
    angles, labels = tl.circle_law(lambda phi: np.cos(phi - 0.3), 36, 0.3)
    sample = tl.circle_sampler(angles, labels, 2, torch.Generator().manual_seed(0))
    x, y = sample(20_000)
    assert x.shape == (20_000, 2, 2) and y.shape == (20_000, 2)
    x, y = x.double().numpy(), y.double().numpy()
    phi = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)
    index = np.abs(np.mod(phi[..., None] - angles + np.pi, 2 * np.pi) - np.pi).argmin(-1)
    np.testing.assert_allclose(phi, angles[index], atol=1e-5)
    np.testing.assert_array_equal(y, labels[index])
    assert np.all(y * np.cos(phi - 0.3) >= 0.3 - 1e-5)
    counts = np.bincount(index.ravel(), minlength=angles.size)
    expected = index.size / angles.size
    assert np.all(np.abs(counts - expected) < 6 * math.sqrt(expected))
    again = tl.circle_sampler(angles, labels, 2, torch.Generator().manual_seed(0))(20_000)
    np.testing.assert_array_equal(again[0].double().numpy(), x)


# --- the NTK margin -------------------------------------------------------------------------------


def test_arc_coverage_rows_and_exact_values():
    angles = np.linspace(0, 2 * np.pi, 50, endpoint=False)
    for bins in (2, 3, 7, 180):
        coverage = tl.arc_coverage(angles, bins)
        assert coverage.shape == (angles.size, bins) and np.all(coverage >= 0)
        np.testing.assert_allclose(coverage.sum(1), 0.5, atol=1e-14)
        # the half circles of φ and φ + π are complementary: together they cover every bin once
        np.testing.assert_allclose(coverage + tl.arc_coverage(angles + np.pi, bins), 1 / bins, atol=1e-14)
    # wrap-around at angle 0: the half circle [−π/2, π/2] covers the first and the last quarter
    np.testing.assert_allclose(tl.arc_coverage(np.array([0.0]), 4), [[0.25, 0, 0, 0.25]], atol=1e-15)
    np.testing.assert_allclose(tl.arc_coverage(np.array([np.pi / 4]), 4), [[0.25, 0.125, 0, 0.125]], atol=1e-15)
    # φ = 2π − 0.1: [3π/2 − 0.1, 5π/2 − 0.1] holds the last quarter, 0.1 of the third, the first less 0.1
    np.testing.assert_allclose(tl.arc_coverage(np.array([2 * np.pi - 0.1]), 4),
                               [[0.25 - 0.1 / (2 * np.pi), 0, 0.1 / (2 * np.pi), 0.25]], atol=1e-15)
    # any angle, not only those in [0, 2π)
    shifted = angles + 2 * np.pi * np.arange(-3, 4).repeat(8)[:50]
    np.testing.assert_allclose(tl.arc_coverage(shifted, 12), tl.arc_coverage(angles, 12), atol=1e-13)


def test_arc_coverage_against_monte_carlo():
    rng = np.random.default_rng(0)
    count, bins = 200_000, 9
    psi = rng.uniform(0, 2 * np.pi, count)
    k = np.floor(psi / (2 * np.pi / bins)).astype(int)
    angles = np.array([0.0, 0.05, 1.0, np.pi, 4.0, 2 * np.pi - 0.05])
    coverage = tl.arc_coverage(angles, bins)
    for row, phi in zip(coverage, angles):
        estimate = np.bincount(k[np.cos(psi - phi) >= 0], minlength=bins) / count
        np.testing.assert_array_less(np.abs(estimate - row), 5 * np.sqrt(row * (1 - row) / count) + 1e-12)


def test_circle_margin_of_a_separable_law():
    angles, labels = tl.circle_law(lambda phi: np.cos(phi - 0.3), 360, 0.3)
    result = tl.circle_margin(angles, labels)
    assert isinstance(result, tl.CircleMargin)
    # ξ ≡ (cos 0.3, sin 0.3) cos(π/32) is feasible with margin cos(π/32)·0.3/2, and every margin is ≤ 1/2
    assert 0.15 * math.cos(math.pi / 32) - 1e-9 <= result.margin <= 0.5
    assert result.margin <= result.solver_margin + 1e-7
    assert result.margin >= result.solver_margin - 1e-7
    assert result.xi.shape == (180, 2) and np.all(np.linalg.norm(result.xi, axis=1) <= 1 + 1e-12)
    assert result.margins.shape == angles.shape and result.margin == result.margins.min()
    # each point's margin y E_z⟨ξ(z), x 1[zᵀx ≥ 0]⟩ by quadrature over directions z, binned with bin_of
    psi = (np.arange(36_000) + 0.5) * 2 * np.pi / 36_000
    z = np.stack([np.cos(psi), np.sin(psi)], 1)
    xi_z = result.xi[tl.bin_of(z, 180)]
    X = np.stack([np.cos(angles), np.sin(angles)], 1)
    quadrature = labels * ((X @ z.T >= 0) * (X @ xi_z.T)).mean(1)
    np.testing.assert_allclose(result.margins, quadrature, atol=1e-4)


def test_circle_margin_vanishes_for_cos_3phi():
    # the law is symmetric under x → −x with the label flipped, which forces γ ≤ 0 (and ξ = 0 gives 0)
    for k in (1, 2):
        angles, labels = tl.circle_law(lambda phi: np.cos(3 * phi), 360 * k, 0.0)
        result = tl.circle_margin(angles, labels, bins=60)
        assert abs(result.margin) <= 1e-7 and abs(result.solver_margin) <= 1e-7
        assert np.all(np.linalg.norm(result.xi, axis=1) <= 1 + 1e-12)


def test_circle_margin_with_few_sides_stays_in_the_disk():
    angles, labels = tl.circle_law(lambda phi: np.cos(2 * phi), 90, 0.3)
    result = tl.circle_margin(angles, labels, bins=12, sides=3)
    assert np.all(np.linalg.norm(result.xi, axis=1) <= 1 + 1e-12)
    assert 0 < result.margin <= 0.5 and result.margin <= result.solver_margin + 1e-7
    # a finer polygon and more bins can only help (the feasible set grows)
    finer = tl.circle_margin(angles, labels, bins=12, sides=6)
    assert finer.solver_margin >= result.solver_margin - 1e-9
    with pytest.raises(ValueError, match="labels"):
        tl.circle_margin(angles, 2 * labels)


def test_bin_of_against_the_angle():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((200, 2))
    for bins in (2, 5, 180):
        k = tl.bin_of(W, bins)
        angle = np.angle(W[:, 0] + 1j * W[:, 1]) % (2 * np.pi)
        assert np.all((2 * np.pi * k / bins <= angle) & (angle < 2 * np.pi * (k + 1) / bins))
        np.testing.assert_array_equal(k, np.floor(angle * bins / (2 * np.pi)).astype(int))
    edges = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [1.0, -1e-300], [1.0, 1e-300]])
    np.testing.assert_array_equal(tl.bin_of(edges, 4), [0, 1, 2, 3, 3, 0])
    assert tl.bin_of(W.reshape(10, 20, 2), 7).shape == (10, 20)
    np.testing.assert_array_equal(tl.bin_of(W.reshape(10, 20, 2), 7).ravel(), tl.bin_of(W, 7))
    assert tl.bin_of(np.array([0.0, -2.0]), 4) == 3


# --- Theorem 14's constants -----------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.1, 0.5])
def test_theorem14_constants_by_hand(gamma):
    m, d, eta, T = 1000.0, 2, 0.5, 1000.0
    constants = tl.theorem14_constants(gamma, m, d, eta, T)
    c = math.sqrt(2) + (7.142857142857143 if gamma == 0.1 else 2 * math.sqrt(math.log(1000))) + 1
    lam = 5 / gamma * math.log(1000) + math.sqrt(44 / gamma**2 * math.log(24 * 0.5 * c * math.sqrt(1000) * 1e6))
    assert float(constants["c"]) == pytest.approx(c, rel=1e-14)
    assert float(constants["scale"]) == pytest.approx(lam, rel=1e-13)
    assert float(constants["bound"]) == pytest.approx(4 * lam**2 / 500, rel=1e-13)
    if gamma == 0.1:
        assert float(constants["c"]) == pytest.approx(9.557070705230238, rel=1e-14)


@pytest.mark.parametrize("gamma, dim, eta", [(0.1, 2, 0.5), (0.3, 10, LN2), (0.5, 100, 0.01)])
def test_theorem14_required_width_is_the_fixed_point(gamma, dim, eta):
    T = np.array([1e2, 1e4, 1e6])
    required = tl.theorem14_constants(gamma, 10.0, dim, eta, T)["required_width"]
    assert required.shape == T.shape and np.all(np.diff(required) > 0)
    for m, t in zip(required, T):
        lam = float(tl.theorem14_constants(gamma, m, dim, eta, t)["scale"])
        assert m == pytest.approx(2401 * gamma**-6 * lam**2, rel=1e-9)
        assert float(tl.theorem14_constants(gamma, 10.0, dim, eta, t)["required_width"]) == pytest.approx(m, rel=1e-12)


def test_theorem14_constants_with_an_array_of_steps():
    T = np.array([[10.0, 100.0], [1e3, 1e5]])
    constants = tl.theorem14_constants(0.2, 5e4, 3, 0.5, T)
    for name in ("scale", "bound", "required_width"):
        assert constants[name].shape == T.shape
        for index in np.ndindex(T.shape):
            single = tl.theorem14_constants(0.2, 5e4, 3, 0.5, T[index])[name]
            assert constants[name][index] == pytest.approx(float(single), rel=1e-12)
    with pytest.raises(ValueError, match="steps"):
        tl.theorem14_constants(0.2, 5e4, 3, 0.5, np.array([10.0, 0.5]))


def test_circle_tangent_margins_against_unit_by_unit():
    angles, labels = tl.circle_law(lambda p: np.cos(2 * p), 360, 0.3)
    xi = tl.circle_margin(angles, labels, bins=36, sides=8).xi
    rng = np.random.default_rng(3)
    W1 = rng.standard_normal((500, 2))
    X = np.stack([np.cos(angles), np.sin(angles)])
    terms = (W1 @ X >= 0) * (xi[tl.bin_of(W1, 36)] @ X) * labels  # (m, n): unit r's term at point i
    np.testing.assert_allclose(tl.circle_tangent_margins(angles, labels, xi, W1, 1.0, rng), terms.mean(0),
                               rtol=0, atol=1e-14)
    # θ < 1: mean θ·(the θ = 1 margin) and variance θ(1 − θ)Σ_r term²/m² per point, as unit by unit
    theta, draws = 0.3, 1000
    values = np.stack([tl.circle_tangent_margins(angles, labels, xi, W1, theta, rng) for _ in range(draws)])
    variance = theta * (1 - theta) * (terms**2).sum(0) / W1.shape[0] ** 2
    z = (values.mean(0) - theta * terms.mean(0)) / np.sqrt(variance / draws)
    assert np.abs(z).max() < stats.simultaneous_z(z.size, 1e-6)
    ratio = values.var(0, ddof=1) / variance  # each a χ²/(draws − 1): within ±6 standard deviations √(2/draws)
    assert np.abs(ratio - 1).max() < 6 * math.sqrt(2 / draws)


def test_circle_tangent_margins_refuses_bad_input():
    angles, labels = tl.circle_law(lambda p: np.cos(2 * p), 60, 0.3)
    xi, W1, rng = np.zeros((6, 2)), np.ones((4, 2)), np.random.default_rng(0)
    with pytest.raises(ValueError, match="labels"):
        tl.circle_tangent_margins(angles, labels[:-1], xi, W1, 0.5, rng)
    with pytest.raises(ValueError, match="xi"):
        tl.circle_tangent_margins(angles, labels, np.zeros((6, 3)), W1, 0.5, rng)
    with pytest.raises(ValueError, match="W1"):
        tl.circle_tangent_margins(angles, labels, xi, np.ones((4, 3)), 0.5, rng)
    with pytest.raises(ValueError, match="retain"):
        tl.circle_tangent_margins(angles, labels, xi, W1, 1.5, rng)


def test_largest_row_tail_in_the_plane_and_by_monte_carlo():
    # d = 2: ‖w‖² is exponential with mean 2, so P(max_r ‖w_r‖ > ρ) = 1 − (1 − e^{−ρ²/2})^m
    for radius, width in ((1.0, 1), (3.0, 50), (5.26, 1000)):
        assert tl.largest_row_tail(radius, 2, width) == pytest.approx(1 - (1 - math.exp(-radius**2 / 2)) ** width,
                                                                      rel=1e-12)
    rng = np.random.default_rng(5)
    draws, width, dim, radius = 20_000, 30, 5, 3.5
    share = np.mean(np.linalg.norm(rng.standard_normal((draws, width, dim)), axis=-1).max(-1) > radius)
    p = tl.largest_row_tail(radius, dim, width)
    assert abs(share - p) < 5.3 * math.sqrt(p * (1 - p) / draws)  # z at level 1e-7
    assert tl.largest_row_tail(0.0, 3, 10) == 1.0
    with pytest.raises(ValueError, match="radius"):
        tl.largest_row_tail(-1.0, 3, 10)
    with pytest.raises(ValueError, match="width"):
        tl.largest_row_tail(1.0, 3, 0)


# --- Algorithm 4 ----------------------------------------------------------------------------------


def loss2(z):
    return math.log(1 + math.exp(-z)) / LN2


def slope2(z):
    return 1 / ((1 + math.exp(z)) * LN2)


def reference_algorithm4(X, Y, uniforms, W1, a, theta, eta, radius, V, scale):
    """Algorithm 4 in float64 numpy, run by run and step by step: samples X (T, R, d), Y (T, R); unit r is
    kept at step t of run i when uniforms[t, i, r] < θ_i. Returns the final W and every tally after each
    step t = 0, …, T (T + 1, R)."""
    steps, runs, d = X.shape
    m = W1.shape[1]
    names = ["mistakes", "sub_mistakes", "loss", "competitor_loss", "step_excess", "competitor_distance",
             "competitor_output", "initial_output", "initial_margin", "flips", "active_excess", "projections",
             "row_drift", "drift"]
    out = {name: np.zeros((steps + 1, runs)) for name in names}
    final = np.empty_like(W1)
    for i in range(runs):
        W, U = W1[i].copy(), W1[i] + scale[i] * V[i]
        tally = dict(mistakes=0.0, sub_mistakes=0.0, loss=0.0, competitor_loss=0.0, step_excess=-np.inf,
                     competitor_distance=((W - U) ** 2).sum(), competitor_output=0.0, initial_output=0.0, initial_margin=np.inf, flips=0.0,
                     active_excess=-np.inf, projections=0.0)
        for t in range(steps + 1):
            for name, value in tally.items():
                out[name][t, i] = value
            out["row_drift"][t, i] = max(np.linalg.norm(W[r] - W1[i, r]) for r in range(m))
            out["drift"][t, i] = math.sqrt(((W - W1[i]) ** 2).sum())
            if t == steps:
                break
            x, y = X[t, i], Y[t, i]
            b = (uniforms[t, i] < theta[i]).astype(float)
            gradient = np.array([a[i, r] * b[r] * (W[r] @ x >= 0) * x for r in range(m)]) / math.sqrt(m)  # ∇g_t(W_t)
            gradient1 = np.array([a[i, r] * b[r] * (W1[i, r] @ x >= 0) * x for r in range(m)]) / math.sqrt(m)
            g = sum(a[i, r] * b[r] * max(W[r] @ x, 0.0) for r in range(m)) / math.sqrt(m)
            f_test = sum(a[i, r] * max(theta[i] * W[r] @ x, 0.0) for r in range(m)) / math.sqrt(m)
            z, z_u = y * g, y * (gradient * U).sum()
            tally["mistakes"] += float(y * f_test <= 0)
            tally["sub_mistakes"] += float(z <= 0)
            tally["loss"] += loss2(z)
            tally["competitor_loss"] += loss2(z_u)
            half = W + eta * slope2(z) * y * gradient
            tally["competitor_output"] = max(tally["competitor_output"], abs(z_u))
            initial = sum(a[i, r] * b[r] * max(W1[i, r] @ x, 0.0) for r in range(m)) / math.sqrt(m)
            tally["initial_output"] = max(tally["initial_output"], abs(initial))
            tally["initial_margin"] = min(tally["initial_margin"], y * (gradient1 * V[i]).sum())
            tally["flips"] = max(tally["flips"], float(sum((W[r] @ x >= 0) != (W1[i, r] @ x >= 0) for r in range(m))))
            tally["active_excess"] = max(tally["active_excess"], (b.sum() - theta[i] * m) / math.sqrt(m))
            norms = np.linalg.norm(half, axis=1)
            tally["projections"] += float((norms > radius * (1 + 1e-12)).sum())
            after = half * np.minimum(1.0, radius / norms)[:, None]
            excess = ((after - U) ** 2).sum() - ((W - U) ** 2).sum() + eta * loss2(z) - 2 * eta * loss2(z_u)
            tally["step_excess"] = max(tally["step_excess"], excess)
            tally["competitor_distance"] = max(tally["competitor_distance"], ((after - U) ** 2).sum())
            W = after
        final[i] = W
    return final, out


def predrawn(X, Y, requests):
    """A sampler that hands out X, Y (T, R, …) in order, as tensors, and records the counts asked for."""
    position = [0]

    def sample(count):
        requests.append(count)
        start, position[0] = position[0], position[0] + count
        return torch.as_tensor(X[start:start + count]), torch.as_tensor(Y[start:start + count])

    return sample


def algorithm4_problem(runs=2, width=5, dim=3, steps=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((steps, runs, dim))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    Y = rng.choice([-1.0, 1.0], (steps, runs))
    W1 = rng.standard_normal((runs, width, dim))
    a = rng.choice([-1.0, 1.0], (runs, width))
    V = rng.standard_normal((runs, width, dim)) / math.sqrt(width * dim)
    return X, Y, W1, a, V


def mask_uniforms(generator, steps, runs, width):
    """The uniforms dropout_sgd draws for its masks, from a copy of its generator, step by step."""
    copy = torch.Generator().manual_seed(0)
    copy.set_state(generator.get_state())
    return np.stack([torch.rand((runs, width), generator=copy, dtype=torch.float64).numpy() for _ in range(steps)])


@pytest.mark.parametrize("retain", [1.0, 0.5, [1.0, 0.5]])
@pytest.mark.parametrize("radius", [None, "small"])
def test_dropout_sgd_against_a_numpy_algorithm4(retain, radius):
    runs, width, dim, steps = 2, 5, 3, 7
    X, Y, W1, a, V = algorithm4_problem(runs, width, dim, steps)
    theta = np.broadcast_to(np.asarray(retain, dtype=float), (runs,))
    if radius == "small":  # every row on the sphere of radius c: most steps leave the ball
        W1 = W1 / np.linalg.norm(W1, axis=-1, keepdims=True)
    radius = 10.0 if radius is None else float(np.linalg.norm(W1, axis=-1).max())
    eta, scale = LN2, np.array([0.7, 2.0])
    generator = torch.Generator().manual_seed(11)
    uniforms = mask_uniforms(generator, steps, runs, width)
    requests = []
    run = tl.dropout_sgd(predrawn(X, Y, requests), torch.as_tensor(W1), torch.as_tensor(a), retain, eta, radius, steps,
                         generator, margin_map=torch.as_tensor(V), competitor_scale=scale,
                         checkpoints=np.arange(steps + 1), block=3, progress=False)
    assert requests == [3, 3, 1]
    final, expected = reference_algorithm4(X, Y, uniforms, W1, a, theta, eta, radius, V, scale)
    np.testing.assert_array_equal(run.steps, np.arange(steps + 1))
    np.testing.assert_allclose(run.final["W"], final, rtol=1e-12, atol=1e-13)
    for name, values in expected.items():
        np.testing.assert_allclose(run.metrics[name], values, rtol=1e-11, atol=1e-12, err_msg=name)
    inside = np.linalg.norm(W1 + scale[:, None, None] * V, axis=-1).max() <= radius
    if inside:  # the step inequality (5.3) holds for every U in the ball
        assert np.all(run.metrics["step_excess"] <= 1e-12)
    if radius < 10:
        assert run.metrics["projections"][-1].sum() > 0
        assert np.all(np.linalg.norm(run.final["W"], axis=-1) <= radius * (1 + 1e-12))
    else:
        assert np.all(run.metrics["projections"] == 0)
    if np.all(theta == 1):  # no dropout: the visited network is the full one
        np.testing.assert_array_equal(run.metrics["mistakes"], run.metrics["sub_mistakes"])
        np.testing.assert_array_equal(run.metrics["active_excess"][1:], 0.0)


def test_dropout_sgd_projection_keeps_rows_in_the_ball():
    runs, width, dim = 3, 6, 2
    _, _, W1, a, _ = algorithm4_problem(runs, width, dim, steps=1, seed=4)
    radius = float(np.linalg.norm(W1, axis=-1).max()) * 1.01
    for steps in (1, 4, 25):
        sample = tl.sphere_margin_sampler(dim, 0.1, runs, torch.Generator().manual_seed(2))
        run = tl.dropout_sgd(sample, torch.as_tensor(W1), torch.as_tensor(a), 0.5, LN2, radius, steps,
                             torch.Generator().manual_seed(3), checkpoints=[0, steps], block=8, progress=False)
        assert np.all(np.linalg.norm(run.final["W"], axis=-1) <= radius * (1 + 1e-12))
        assert np.all(run.metrics["row_drift"][-1] <= 2 * radius)
    assert run.metrics["projections"][-1].sum() > 0
    # the default competitor U = W1: margin_map 0, so every initial margin is 0
    np.testing.assert_array_equal(run.metrics["initial_margin"][-1], 0.0)


def test_dropout_sgd_runs_do_not_interact():
    runs, width, dim, steps = 3, 5, 3, 8
    X, Y, W1, a, V = algorithm4_problem(runs, width, dim, steps, seed=7)

    def train(X, Y, W1, a, V, retain, scale):
        return tl.dropout_sgd(predrawn(X, Y, []), torch.as_tensor(W1), torch.as_tensor(a), retain, 0.5, 4.0, steps,
                              torch.Generator().manual_seed(1), margin_map=torch.as_tensor(V),
                              competitor_scale=scale, checkpoints=np.arange(steps + 1), block=5, progress=False)

    first = train(X, Y, W1, a, V, [0.5, 0.8, 0.6], [1.0, 0.5, 2.0])
    X2, Y2, W12, a2, V2 = (v.copy() for v in (X, Y, W1, a, V))  # change everything of the last run
    X2[:, 2] = X2[::-1, 2]
    Y2[:, 2] *= -1
    W12[2] *= 0.5
    a2[2] *= -1
    V2[2] = 0.0
    second = train(X2, Y2, W12, a2, V2, [0.5, 0.8, 1.0], [1.0, 0.5, 0.0])
    np.testing.assert_array_equal(second.final["W"][:2], first.final["W"][:2])
    assert not np.array_equal(second.final["W"][2], first.final["W"][2])
    for name, values in first.metrics.items():
        np.testing.assert_array_equal(second.metrics[name][:, :2], values[:, :2], err_msg=name)


def test_dropout_sgd_refuses_a_sampler_of_the_wrong_shape():
    _, _, W1, a, _ = algorithm4_problem(2, 4, 3, steps=1)
    sample = tl.sphere_margin_sampler(2, 0.1, 2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="sample"):
        tl.dropout_sgd(sample, torch.as_tensor(W1), torch.as_tensor(a), 0.5, 0.5, 5.0, 3,
                       torch.Generator().manual_seed(0), progress=False)
    with pytest.raises(ValueError, match="radius"):
        tl.dropout_sgd(sample, torch.as_tensor(W1), torch.as_tensor(a), 0.5, 0.5, 0.1, 3,
                       torch.Generator().manual_seed(0), progress=False)


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
    run = tl.relu_classifier_sgd(X, labels, X_test, labels_test, W0, A0, retain, eta, 1, 4,
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
    run = tl.relu_classifier_sgd(X, labels, X_test, labels_test, W0, A0, 1.0, 0.1, 1, 4,
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
    run = tl.relu_classifier_sgd(X, labels, X_test, labels_test, W0, A0, retain, 0.1, 1, 4,
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
        tl.relu_classifier_sgd(**{**arguments, **change})
