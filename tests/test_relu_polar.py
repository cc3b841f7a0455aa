"""The polar of the two-layer ReLU network with weight decay: exact polar, certificates, convex
reference, induced regularizer, escape step, meta-algorithm and non-increasing path."""

import numpy as np
import pytest

from dropnb import relu_decay as rd
from dropnb import relu_polar as rp
from helpers import relu_decay_data as data


@pytest.fixture(scope="module")
def problem():
    X, Y = data()
    return X, Y, 0.1, rp.sector_reference(X, Y[0], 0.1, tol=1e-11)


@pytest.mark.parametrize("n2", [1, 3])
def test_exact_polar_against_a_dense_grid(n2):
    X, _ = data()
    rng = np.random.default_rng(11 + n2)
    for _ in range(5):
        G = rng.standard_normal((n2, X.shape[1]))
        exact = rp.polar(X, G)
        angles = np.linspace(0, 2 * np.pi, 200_001)
        grid = rp.polar_curve(X, G, angles).max()
        lipschitz = np.linalg.norm(G, 2) * np.linalg.norm(X, 2)
        assert grid <= exact.value * (1 + 1e-14)
        assert exact.value - grid <= lipschitz * (angles[1] - angles[0]) / 2
        assert rp.polar_curve(X, G, [exact.angle])[0] == pytest.approx(exact.value, rel=1e-14)


def test_polar_of_the_identity_is_the_largest_atom():
    X, _ = data()
    radius = rp.polar(X, np.eye(X.shape[1])).value
    grid = np.linalg.norm(np.maximum(rp.direction(np.linspace(0, 2 * np.pi, 100_001)) @ X, 0), axis=1).max()
    assert grid <= radius * (1 + 1e-14) and radius <= np.linalg.norm(X, 2)


def test_breakpoints_split_the_circle_into_fixed_active_sets():
    X, _ = data(m=6)
    start, stop, active = rp.arcs(X)
    assert len(start) == 12 and np.all(stop > start)
    for k in range(len(start)):
        inner = np.linspace(start[k], stop[k], 7)[1:-1]
        assert np.all((rp.direction(inner) @ X > 0) == active[k])


def test_cone_prox_is_exact():
    rng = np.random.default_rng(12)
    left, right = rp.direction(np.array([0.3])), rp.direction(np.array([1.9]))
    grid = np.linspace(0.3, 1.9, 801)
    radii = np.linspace(0, 4, 801)
    candidates = (radii[:, None, None] * rp.direction(grid)[None, :, :]).reshape(-1, 2)
    for _ in range(6):
        P = 2 * rng.standard_normal((1, 2))
        prox = rp._cone_prox(P, left, right, 0.4)[0]
        values = 0.5 * np.sum((candidates - P) ** 2, axis=1) + 0.4 * np.linalg.norm(candidates, axis=1)
        value = 0.5 * np.sum((prox - P[0]) ** 2) + 0.4 * np.linalg.norm(prox)
        assert value <= values.min() + 1e-12
        assert value >= values.min() - 5e-5  # grid resolution


def test_reference_is_certified_and_realized_by_a_network(problem):
    X, Y, decay, ref = problem
    assert 0 <= ref.gap <= 1e-11 * ref.primal
    W1, W2 = ref.network()
    assert rd.objective(X, Y, W1, W2, decay) == pytest.approx(ref.primal, rel=1e-13)
    assert np.allclose(rd.outputs(X, W1, W2), ref.Z, atol=1e-13)
    assert ref.active_groups() <= X.shape[1]


def test_duality_gap_is_nonnegative_and_bounds_suboptimality(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(13)
    for r in (1, 3, 10):
        W1, W2 = rng.standard_normal((2, r)), rng.standard_normal((1, r))
        cert = rp.network_certificate(X, Y, W1, W2, decay)
        assert cert.gap >= 0
        assert cert.dual <= ref.primal + 1e-12 and cert.primal >= ref.dual - 1e-12
        assert cert.primal == pytest.approx(rd.objective(X, Y, W1, W2, decay), rel=1e-14)


def test_gap_vanishes_when_the_certificate_of_theorem_19_holds(problem):
    X, Y, decay, ref = problem
    cert = rp.duality_gap_certificate(X, Y, ref.Z, ref.primal / decay - 0.5 * np.sum((Y - ref.Z) ** 2) / decay, decay)
    assert cert.polar <= decay * (1 + 1e-9)
    assert abs(cert.scaling) <= 1e-9 and cert.gap <= 1e-9


def test_induced_regularizer_is_a_norm_and_matches_the_reference(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(14)
    z1, z2 = rng.standard_normal(15), rng.standard_normal(15)
    o1, o2 = rp.induced_regularizer(X, z1, 800), rp.induced_regularizer(X, z2, 800)
    o12, o3, om = (rp.induced_regularizer(X, z, 800) for z in (z1 + z2, 3 * z1, -z1))
    assert o12.value <= o1.value + o2.value + 1e-8
    assert o3.value == pytest.approx(3 * o1.value, rel=1e-9)
    assert om.value == pytest.approx(o1.value, rel=1e-9)
    for o in (o1, o2, o12):
        assert o.lower <= o.value * (1 + 1e-12) and o.support <= 15 and o.residual < 1e-9
        assert o.value * o.cos_half_gap <= o.lower * (1 + 1e-6)
    fit = rp.induced_regularizer(X, ref.Z[0], 2000)
    cost = np.sum(np.linalg.norm(ref.V, axis=1)) + np.sum(np.linalg.norm(ref.U, axis=1))
    assert fit.lower - 1e-9 <= cost <= fit.value + 1e-9
    W1, W2 = fit.network()
    assert np.allclose(rd.outputs(X, W1, W2)[0], ref.Z[0], atol=1e-9)
    assert rd.regularizer(W1, W2) == pytest.approx(fit.value, rel=1e-12)


def test_escape_changes_the_objective_exactly(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(17)
    W1, W2 = rng.standard_normal((2, 2)), rng.standard_normal((1, 2))
    W1[:, 1], W2[:, 1] = 0, 0
    step = rp.escape(X, Y, W1, W2, decay, slot=1)
    assert step.epsilon > 0 and step.change < 0
    change = rd.objective(X, Y, step.W1, step.W2, decay) - rd.objective(X, Y, W1, W2, decay)
    assert change == pytest.approx(step.change, rel=1e-10)
    appended = rp.escape(X, Y, W1[:, :1], W2[:, :1], decay)
    assert appended.W1.shape == (2, 2) and appended.change == pytest.approx(step.change)
    W1r, W2r = ref.network()
    none = rp.escape(X, Y, W1r, W2r, decay * 1.01)
    assert none.epsilon == 0 and none.change == 0


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda X, Y: rp.polar(np.ones((3, 15)), Y), "X"),
        (lambda X, Y: rp.polar(X, np.ones((1, 4))), "G"),
        (lambda X, Y: rp.sector_reference(X, Y[0, :4], 0.1), "y"),
        (lambda X, Y: rp.induced_regularizer(X, Y[0], 0), "n_angles"),
        (lambda X, Y: rp.escape(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, slot=1), "slot"),
        (lambda X, Y: rp.escape(X, Y, np.ones((2, 2)), np.ones((1, 2)), 0.1, slot=5), "slot"),
        (lambda X, Y: rp.duality_gap_certificate(X, Y, Y, -1.0, 0.1), "cost"),
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
    assert np.allclose(rd.outputs(X, M1, M2), rd.outputs(X, W1, W2), atol=1e-13)
    assert rd.regularizer(M1, M2) == pytest.approx(rd.regularizer(W1, W2), rel=1e-13)


def test_non_increasing_path_slides_and_escapes(problem):
    X, Y, decay, ref = problem
    rng = np.random.default_rng(18)
    W1, W2 = np.array([[0.8], [0.3]]), np.array([[0.9]])
    A, B = rd.split_units(W1, W2, rng.dirichlet(np.ones(16)))  # r = 16 > |φ| = 15, no zero unit
    segments = rp.non_increasing_path(X, Y, A, B, decay, [(0.01, 300)], [(0.003, 300)], cycles=2, points=9)
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
    assert rd.objective(X, Y, segments[-1].W1, segments[-1].W2, decay) >= ref.dual


def test_meta_algorithm_certifies_networks_that_descent_alone_leaves_stuck(problem):
    """From the zero network gradient descent cannot move (every gradient vanishes); the escapes of
    the meta-algorithm add units until the duality gap is within the requested accuracy."""
    X, Y, decay, reference = problem
    W1, W2 = np.zeros((2, 2, 8)), np.zeros((2, 1, 8))
    W1[1] = 0.3 * np.random.default_rng(3).standard_normal((2, 8))  # a second run from a random first layer
    stuck = rd.gradient_descent(X, Y, W1[:1], W2[:1], decay, [(0.05, 200)])
    assert np.all(stuck.final["W1"] == 0)
    run = rp.meta_algorithm(X, Y, W1, W2, decay, [(0.05, 2000)], [(0.05, 2000), (0.01, 2000)], accuracy=1e-2, rounds=20)
    assert run.certified(1e-2).all() and run.escapes[0] >= 1 and 1 <= run.rounds <= 20
    for cert in run.certificates:
        assert cert.dual <= reference.primal + 1e-9 and cert.primal >= reference.primal - 1e-9
    with pytest.raises(ValueError, match="batch"):
        rp.meta_algorithm(X, Y, W1[0], W2[0], decay, [(0.05, 10)], [(0.05, 10)], accuracy=1e-2, rounds=2)


def test_sector_reference_checks_its_gap_every_check_every_iterations(problem):
    """The stopping rule as documented: the gap is computed every ``check_every`` iterations (and at the
    last), so the run stops at one of those, with the gap below tol·primal."""
    X, Y, decay, reference = problem
    assert reference.iterations % 50 == 0 and reference.primal - reference.dual <= 1e-11 * reference.primal
    again = rp.sector_reference(X, Y[0], decay, tol=1e-11, check_every=7)
    assert again.iterations % 7 == 0


def test_conic_reference_agrees_with_fista_within_both_certified_accuracies(problem):
    """Clarabel (through cvxpy) and the book's FISTA solve one program: values within the two
    certified accuracies, and Clarabel's point is feasible (cones) and gives its own output."""
    X, Y, decay, reference = problem
    conic = rp.conic_reference(X, Y[0], decay)
    assert abs(conic.value - reference.primal) <= reference.gap + conic.accuracy
    left, right = rp.direction(reference.start), rp.direction(reference.stop)
    for W in (conic.V, conic.U):
        assert np.all(left[:, 0] * W[:, 1] - left[:, 1] * W[:, 0] >= -1e-9)
        assert np.all(W[:, 0] * right[:, 1] - W[:, 1] * right[:, 0] >= -1e-9)
    cost = np.linalg.norm(conic.V, axis=1).sum() + np.linalg.norm(conic.U, axis=1).sum()
    assert 0.5 * np.sum((Y[0] - conic.Z[0]) ** 2) + decay * cost == pytest.approx(conic.value, rel=1e-9)


def test_conic_reference_catches_a_wrong_value(problem):
    """A reference value off by a tenth of the weight-decay term is outside the two accuracies."""
    X, Y, decay, reference = problem
    conic = rp.conic_reference(X, Y[0], decay)
    wrong = reference.primal + 0.1 * decay * (np.linalg.norm(reference.V, axis=1).sum())
    assert abs(conic.value - wrong) > reference.gap + conic.accuracy
