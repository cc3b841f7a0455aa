"""Two-layer ReLU network with weight decay: derivatives, exact polar, certificates, convex reference,
induced regularizer, flat path and escape step."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import relu_decay as hg


def data(m=15, seed=7):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-1, 1, m))
    return np.vstack([x, np.ones(m)]), (np.sin(3 * x) + 0.1 * rng.standard_normal(m))[None, :]


@pytest.fixture(scope="module")
def problem():
    X, Y = data()
    return X, Y, 0.1, hg.sector_reference(X, Y[0], 0.1, tol=1e-11)


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
    g1, g2 = hg.gradient(X, Y, W1, W2, 0.3)
    assert hg.objective(X, Y, W1, W2, 0.3) == pytest.approx(float(value.detach()), rel=1e-12)
    assert np.allclose(np.concatenate([g1.ravel(), g2.ravel()]), grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_matches_central_differences():
    X, Y = data()
    rng = np.random.default_rng(3)
    W1, W2 = rng.standard_normal((2, 5)), rng.standard_normal((1, 5))
    g1, _ = hg.gradient(X, Y, W1, W2, 0.1)
    h = 1e-6
    for i in range(2):
        for j in range(5):
            E = np.zeros_like(W1)
            E[i, j] = h
            fd = (hg.objective(X, Y, W1 + E, W2, 0.1) - hg.objective(X, Y, W1 - E, W2, 0.1)) / (2 * h)
            assert fd == pytest.approx(g1[i, j], rel=1e-6, abs=1e-8)


def test_relu_derivative_at_zero_is_zero():
    X = np.array([[1.0, -1.0], [0.0, 0.0]])
    Y = np.array([[1.0, 2.0]])
    W1, W2 = np.array([[0.0], [1.0]]), np.array([[1.0]])  # pre-activations exactly 0
    g1, g2 = hg.gradient(X, Y, W1, W2, 0.5)
    assert np.array_equal(g1, 0.5 * W1) and np.array_equal(g2, 0.5 * W2)


def test_euler_identity_for_every_unit():
    X, Y = data()
    rng = np.random.default_rng(4)
    W1, W2 = rng.standard_normal((2, 7)), rng.standard_normal((1, 7))
    g1, g2 = hg.gradient(X, Y, W1, W2, 0.1)
    per_unit = np.sum(g1 * W1, axis=0) + np.sum(g2 * W2, axis=0)
    G = Y - hg.outputs(X, W1, W2)
    residuals = 0.1 * hg.unit_regularizers(W1, W2) - np.sum(hg.unit_outputs(X, W1, W2) * G[None], axis=(-2, -1))
    assert np.allclose(per_unit, 2 * residuals, atol=1e-12)


def test_positive_homogeneity_of_degree_two_and_dropout_degree_four():
    X, _ = data()
    rng = np.random.default_rng(5)
    W1, W2 = rng.standard_normal((2, 3)), rng.standard_normal((1, 3))
    for alpha in (0.0, 0.3, 2.5):
        assert np.allclose(hg.unit_outputs(X, alpha * W1, alpha * W2), alpha**2 * hg.unit_outputs(X, W1, W2), atol=1e-13)
        assert np.allclose(hg.unit_regularizers(alpha * W1, alpha * W2), alpha**2 * hg.unit_regularizers(W1, W2))
        assert hg.dropout_penalty(X, alpha * W1, alpha * W2) == pytest.approx(alpha**4 * hg.dropout_penalty(X, W1, W2), abs=1e-12)


def test_outputs_are_sums_of_unit_outputs():
    X, _ = data()
    rng = np.random.default_rng(6)
    W1, W2 = rng.standard_normal((4, 2, 5)), rng.standard_normal((4, 3, 5))
    assert np.allclose(hg.unit_outputs(X, W1, W2).sum(axis=-3), hg.outputs(X, W1, W2))
    assert hg.regularizer(W1, W2) == pytest.approx(0.5 * (np.sum(W1**2, axis=(1, 2)) + np.sum(W2**2, axis=(1, 2))))


def test_batched_equals_unbatched():
    X, Y = data()
    rng = np.random.default_rng(8)
    W1, W2 = 0.5 * rng.standard_normal((3, 2, 6)), 0.5 * rng.standard_normal((3, 1, 6))
    batch = hg.gradient_descent(X, Y, W1, W2, 0.1, [(0.01, 300), (0.003, 200)], every=100)
    g1, g2 = hg.gradient(X, Y, W1, W2, 0.1)
    assert np.allclose(g1[1], hg.gradient(X, Y, W1[1], W2[1], 0.1)[0]) and np.allclose(g2[2], hg.gradient(X, Y, W1[2], W2[2], 0.1)[1])
    assert np.allclose(hg.objective(X, Y, W1, W2, 0.1)[0], hg.objective(X, Y, W1[0], W2[0], 0.1))
    for s in range(3):
        single = hg.gradient_descent(X, Y, W1[s], W2[s], 0.1, [(0.01, 300), (0.003, 200)], every=100)
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
            g1, g2 = hg.gradient(X, Y, A, B, 0.1)
            A, B = A - eta * g1, B - eta * g2
    run = hg.gradient_descent(X, Y, W1, W2, 0.1, [(0.02, 50), (0.005, 50)])
    assert np.allclose(run.final["W1"], A, atol=1e-14) and np.allclose(run.final["W2"], B, atol=1e-14)


def test_zero_units_stay_zero_under_descent():
    X, Y = data()
    rng = np.random.default_rng(10)
    W1, W2 = rng.standard_normal((2, 4)), rng.standard_normal((1, 4))
    W1[:, 2], W2[:, 2] = 0, 0
    run = hg.gradient_descent(X, Y, W1, W2, 0.1, [(0.01, 500)])
    assert np.all(run.final["W1"][:, 2] == 0) and np.all(run.final["W2"][:, 2] == 0)


@pytest.mark.parametrize("n2", [1, 3])
def test_exact_polar_against_a_dense_grid(n2):
    X, _ = data()
    rng = np.random.default_rng(11 + n2)
    for _ in range(5):
        G = rng.standard_normal((n2, X.shape[1]))
        exact = hg.polar(X, G)
        angles = np.linspace(0, 2 * np.pi, 200_001)
        grid = hg.polar_curve(X, G, angles).max()
        lipschitz = np.linalg.norm(G, 2) * np.linalg.norm(X, 2)
        assert grid <= exact.value * (1 + 1e-14)
        assert exact.value - grid <= lipschitz * (angles[1] - angles[0]) / 2
        assert hg.polar_curve(X, G, [exact.angle])[0] == pytest.approx(exact.value, rel=1e-14)


def test_polar_of_the_identity_is_the_largest_atom():
    X, _ = data()
    radius = hg.polar(X, np.eye(X.shape[1])).value
    grid = np.linalg.norm(np.maximum(hg.direction(np.linspace(0, 2 * np.pi, 100_001)) @ X, 0), axis=1).max()
    assert grid <= radius * (1 + 1e-14) and radius <= np.linalg.norm(X, 2)


def test_breakpoints_split_the_circle_into_fixed_active_sets():
    X, _ = data(m=6)
    start, stop, active = hg.arcs(X)
    assert len(start) == 12 and np.all(stop > start)
    for k in range(len(start)):
        inner = np.linspace(start[k], stop[k], 7)[1:-1]
        assert np.all((hg.direction(inner) @ X > 0) == active[k])


def test_cone_prox_is_exact():
    rng = np.random.default_rng(12)
    left, right = hg.direction(np.array([0.3])), hg.direction(np.array([1.9]))
    grid = np.linspace(0.3, 1.9, 801)
    radii = np.linspace(0, 4, 801)
    candidates = (radii[:, None, None] * hg.direction(grid)[None, :, :]).reshape(-1, 2)
    for _ in range(6):
        P = 2 * rng.standard_normal((1, 2))
        prox = hg._cone_prox(P, left, right, 0.4)[0]
        values = 0.5 * np.sum((candidates - P) ** 2, axis=1) + 0.4 * np.linalg.norm(candidates, axis=1)
        value = 0.5 * np.sum((prox - P[0]) ** 2) + 0.4 * np.linalg.norm(prox)
        assert value <= values.min() + 1e-12
        assert value >= values.min() - 5e-5  # grid resolution


def test_reference_is_certified_and_realized_by_a_network(problem):
    X, Y, decay, ref = problem
    assert 0 <= ref.gap <= 1e-11 * ref.primal
    W1, W2 = ref.network()
    assert hg.objective(X, Y, W1, W2, decay) == pytest.approx(ref.primal, rel=1e-13)
    assert np.allclose(hg.outputs(X, W1, W2), ref.Z, atol=1e-13)
    assert ref.active_groups() <= X.shape[1]


def test_duality_gap_is_nonnegative_and_bounds_suboptimality(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(13)
    for r in (1, 3, 10):
        W1, W2 = rng.standard_normal((2, r)), rng.standard_normal((1, r))
        cert = hg.network_certificate(X, Y, W1, W2, decay)
        assert cert.gap >= 0
        assert cert.dual <= ref.primal + 1e-12 and cert.primal >= ref.dual - 1e-12
        assert cert.primal == pytest.approx(hg.objective(X, Y, W1, W2, decay), rel=1e-14)


def test_gap_vanishes_when_the_certificate_of_theorem_19_holds(problem):
    X, Y, decay, ref = problem
    cert = hg.duality_gap_certificate(X, Y, ref.Z, ref.primal / decay - 0.5 * np.sum((Y - ref.Z) ** 2) / decay, decay)
    assert cert.polar <= decay * (1 + 1e-9)
    assert abs(cert.scaling) <= 1e-9 and cert.gap <= 1e-9


def test_induced_regularizer_is_a_norm_and_matches_the_reference(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(14)
    z1, z2 = rng.standard_normal(15), rng.standard_normal(15)
    o1, o2 = hg.induced_regularizer(X, z1, 800), hg.induced_regularizer(X, z2, 800)
    o12, o3, om = (hg.induced_regularizer(X, z, 800) for z in (z1 + z2, 3 * z1, -z1))
    assert o12.value <= o1.value + o2.value + 1e-8
    assert o3.value == pytest.approx(3 * o1.value, rel=1e-9)
    assert om.value == pytest.approx(o1.value, rel=1e-9)
    for o in (o1, o2, o12):
        assert o.lower <= o.value * (1 + 1e-12) and o.support <= 15 and o.residual < 1e-9
        assert o.value * o.cos_half_gap <= o.lower * (1 + 1e-6)
    fit = hg.induced_regularizer(X, ref.Z[0], 2000)
    cost = np.sum(np.linalg.norm(ref.V, axis=1)) + np.sum(np.linalg.norm(ref.U, axis=1))
    assert fit.lower - 1e-9 <= cost <= fit.value + 1e-9
    W1, W2 = fit.network()
    assert np.allclose(hg.outputs(X, W1, W2)[0], ref.Z[0], atol=1e-9)
    assert hg.regularizer(W1, W2) == pytest.approx(fit.value, rel=1e-12)


def test_flat_path_keeps_outputs_and_moves_theta_linearly():
    Xt = np.vstack([np.array([-0.5, 0.2, 0.9]), np.ones(3)])
    rng = np.random.default_rng(15)
    W1, W2 = rng.standard_normal((2, 4)), rng.standard_normal((1, 4))
    W1[1] = np.abs(W1[1]) + 1.5
    W1[0] *= 0.5  # every unit active on every sample
    path = hg.flat_path(Xt, W1, W2)
    assert path.slope <= 0 and path.tau_end > 0 and path.beta[path.index] < 0
    base_phi, base_theta = hg.outputs(Xt, W1, W2), hg.regularizer(W1, W2)
    for tau in np.linspace(0, path.tau_end, 7):
        A, B = path.weights(tau)
        assert np.allclose(hg.outputs(Xt, A, B), base_phi, atol=1e-13)
        assert hg.regularizer(A, B) == pytest.approx(base_theta + tau * path.slope, abs=1e-12)
    A, B = path.weights(path.tau_end)
    assert np.all(A[:, path.index] == 0) and np.all(B[:, path.index] == 0)


def test_split_units_keep_the_network_and_divide_the_dropout_penalty():
    X, Y = data()
    rng = np.random.default_rng(16)
    W1, W2 = rng.standard_normal((2, 3)), rng.standard_normal((1, 3))
    shares = np.full(4, 0.25)
    A, B = hg.split_units(W1, W2, shares)
    assert A.shape == (2, 12)
    assert np.allclose(hg.outputs(X, A, B), hg.outputs(X, W1, W2))
    assert hg.regularizer(A, B) == pytest.approx(hg.regularizer(W1, W2))
    assert hg.dropout_penalty(X, A, B) == pytest.approx(hg.dropout_penalty(X, W1, W2) / 4)
    path = hg.flat_path(X, A, B)
    assert abs(path.slope) <= 1e-12  # parallel copies: a plateau


def test_escape_changes_the_objective_exactly(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(17)
    W1, W2 = rng.standard_normal((2, 2)), rng.standard_normal((1, 2))
    W1[:, 1], W2[:, 1] = 0, 0
    step = hg.escape(X, Y, W1, W2, decay, slot=1)
    assert step.epsilon > 0 and step.change < 0
    change = hg.objective(X, Y, step.W1, step.W2, decay) - hg.objective(X, Y, W1, W2, decay)
    assert change == pytest.approx(step.change, rel=1e-10)
    appended = hg.escape(X, Y, W1[:, :1], W2[:, :1], decay)
    assert appended.W1.shape == (2, 2) and appended.change == pytest.approx(step.change)
    W1r, W2r = ref.network()
    none = hg.escape(X, Y, W1r, W2r, decay * 1.01)
    assert none.epsilon == 0 and none.change == 0


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda X, Y: hg.objective(X, Y, np.ones((3, 2)), np.ones((1, 2)), 0.1), "W1"),
        (lambda X, Y: hg.objective(X, Y, np.ones((2, 2)), np.ones((2, 2)), 0.1), "W2"),
        (lambda X, Y: hg.objective(X, Y, np.ones((2, 2)), np.ones((1, 3)), 0.1), "W1 and W2"),
        (lambda X, Y: hg.objective(X, Y, np.ones((2, 2)), np.ones((1, 2)), -1.0), "decay"),
        (lambda X, Y: hg.objective(X, Y[:, :3], np.ones((2, 2)), np.ones((1, 2)), 0.1), "X and Y"),
        (lambda X, Y: hg.objective(X, Y, np.full((2, 2), np.nan), np.ones((1, 2)), 0.1), "W1"),
        (lambda X, Y: hg.polar(np.ones((3, 15)), Y), "X"),
        (lambda X, Y: hg.polar(X, np.ones((1, 4))), "G"),
        (lambda X, Y: hg.gradient_descent(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, [(0.0, 10)]), "schedule"),
        (lambda X, Y: hg.gradient_descent(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, [(0.1, 0)]), "schedule"),
        (lambda X, Y: hg.gradient_descent(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, [(0.1, 5)], every=-1), "every"),
        (lambda X, Y: hg.sector_reference(X, Y[0, :4], 0.1), "y"),
        (lambda X, Y: hg.induced_regularizer(X, Y[0], 0), "n_angles"),
        (lambda X, Y: hg.split_units(np.ones((2, 2)), np.ones((1, 2)), [0.5, 0.6]), "shares"),
        (lambda X, Y: hg.flat_path(X, np.ones((2, 2)), np.ones((1, 2)), units=[0]), "units"),
        (lambda X, Y: hg.escape(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, slot=1), "slot"),
        (lambda X, Y: hg.escape(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, slot=5), "slot"),
        (lambda X, Y: hg.duality_gap_certificate(X, Y, Y, -1.0, 0.1), "cost"),
    ],
)
def test_bad_inputs_raise(call, name):
    X, Y = data()
    with pytest.raises(ValueError, match=name):
        call(X, Y)


def test_merged_reference_units_keep_output_and_cost(problem):
    X, Y, decay, ref = problem
    W1, W2 = ref.network(merge=False)
    M1, M2 = ref.network()
    assert M1.shape[1] <= W1.shape[1] == ref.active_groups()
    assert np.allclose(hg.outputs(X, M1, M2), hg.outputs(X, W1, W2), atol=1e-13)
    assert hg.regularizer(M1, M2) == pytest.approx(hg.regularizer(W1, W2), rel=1e-13)


def test_non_increasing_path_slides_and_escapes(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(18)
    W1, W2 = np.array([[0.8], [0.3]]), np.array([[0.9]])
    A, B = hg.split_units(W1, W2, rng.dirichlet(np.ones(16)))  # r = 16 > |φ| = 15, no zero unit
    segments = hg.non_increasing_path(X, Y, A, B, decay, [(0.01, 300)], [(0.003, 300)], cycles=2, points=9)
    kinds = [s.kind for s in segments]
    assert kinds[:3] == ["slide", "escape", "descent"] and kinds[-1] == "descent"
    for segment in segments:
        if segment.kind == "slide":
            assert segment.outputs_change < 1e-13 and segment.theta_error < 1e-13
            assert np.max(np.diff(segment.objective)) <= 1e-13
        if segment.kind == "escape":
            assert np.all(np.diff(segment.objective) <= 1e-13)
            assert segment.objective[-1] - segment.objective[0] == pytest.approx(segment.predicted_change, rel=1e-9)
    assert segments[-1].objective[-1] < segments[0].objective[0]
    assert hg.objective(X, Y, segments[-1].W1, segments[-1].W2, decay) >= ref.dual


def test_meta_algorithm_certifies_networks_that_descent_alone_leaves_stuck(problem):
    """From the zero network gradient descent cannot move (every gradient vanishes); the escapes of
    the meta-algorithm add units until the duality gap is within the requested accuracy."""
    X, Y, decay, reference = problem
    W1, W2 = np.zeros((2, 2, 8)), np.zeros((2, 1, 8))
    W1[1] = 0.3 * np.random.default_rng(3).standard_normal((2, 8))  # a second run from a random first layer
    stuck = hg.gradient_descent(X, Y, W1[:1], W2[:1], decay, [(0.05, 200)])
    assert np.all(stuck.final["W1"] == 0)
    run = hg.meta_algorithm(X, Y, W1, W2, decay, [(0.05, 2000)], [(0.05, 2000), (0.01, 2000)], accuracy=1e-2, rounds=20)
    assert run.certified(1e-2).all() and run.escapes[0] >= 1 and 1 <= run.rounds <= 20
    for cert in run.certificates:
        assert cert.dual <= reference.primal + 1e-9 and cert.primal >= reference.primal - 1e-9
    with pytest.raises(ValueError, match="batch"):
        hg.meta_algorithm(X, Y, W1[0], W2[0], decay, [(0.05, 10)], [(0.05, 10)], accuracy=1e-2, rounds=2)


def test_sector_reference_checks_its_gap_every_check_every_iterations(problem):
    """The stopping rule as documented: the gap is computed every ``check_every`` iterations (and at the
    last), so the run stops at one of those, with the gap below tol·primal."""
    X, Y, decay, reference = problem
    assert reference.iterations % 50 == 0 and reference.primal - reference.dual <= 1e-11 * reference.primal
    again = hg.sector_reference(X, Y[0], decay, tol=1e-11, check_every=7)
    assert again.iterations % 7 == 0
