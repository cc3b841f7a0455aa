"""The polar of the two-layer ReLU network with weight decay of :mod:`dropnb.relu_decay` (Vidal et al.
2022, §1.4) and what it certifies and drives: the duality-gap certificates, the exact convex
reference, the induced regularizer, the escape step, the meta-algorithm and Theorem 1.10's
non-increasing path.

Conventions are those of :mod:`dropnb.relu_decay`: data in columns, X ∈ ℝ^{n₀×m} and Y ∈ ℝ^{n₂×m};
unit i is column i of W₁ ∈ ℝ^{n₀×r} and of W₂ ∈ ℝ^{n₂×r}; Φ = W₂ ReLU(W₁ᵀX), Θ = ½(‖W₁‖²_F + ‖W₂‖²_F),
F(W) = ½‖Y − Φ‖²_F + λΘ with ``decay`` = λ, the weight decay, and the residual G = Y − Φ.

The induced regularizer (1.47) Ω(Z) = min{Θ_r : Φ_r = Z} is a norm with polar (dual norm)

    Ω°(G) = sup_{θ ≤ 1} ⟨G, φ⟩ = max_{‖a‖=1} ‖G ReLU(Xᵀa)‖₂,

and the convex problem (1.48) min_Z ½‖Y − Z‖² + λΩ(Z) has the dual max ⟨G, Y⟩ − ½‖G‖² over
Ω°(G) ≤ λ. Any network W gives the primal value p = F(W) ≥ F* (the lower bound (1.49)); any G
scaled to G̃ = G·min(1, λ/Ω°(G)) gives d = ⟨G̃, Y⟩ − ½‖G̃‖² ≤ F*. So p − d certifies W: the
certificate of Theorem 1.9, scaling stationarity ⟨G, Φ⟩ = λΘ plus Ω°(G) ≤ λ, is exactly p = d.

For n₀ = 2 everything is exact. The 2m breakpoint angles of ±x_j^⊥ cut the circle into arcs on
which the active set S = {j : x_jᵀa > 0} is fixed; there G ReLU(Xᵀa) = C_S a with
C_S = Σ_{j∈S} g_j x_jᵀ, so the polar is a maximum of ‖C_S a‖ over arcs (candidates: the arc ends and
the top right singular vector of C_S when it lies inside the arc). With scalar output (1.48)
becomes a group lasso over the arcs' closed cones K_S (as in Pilanci and Ergen 2020):

    F* = min ½‖y − Σ_S D_S Xᵀ(v_S − u_S)‖² + λ Σ_S (‖v_S‖ + ‖u_S‖),   v_S, u_S ∈ K_S,

solved here by FISTA whose proximal step, projection onto K_S followed by group shrinkage, is the
exact proximal map of λ‖·‖ + ι_{K_S} (Moreau's decomposition for cones), and certified by its own
duality gap; :func:`conic_reference` hands the same program to cvxpy and Clarabel as a witness. Ω(z) itself is a basis-pursuit linear program over ReLU atoms on an angle grid that
contains the breakpoints (within a factor cos(δ/2) of Ω for the largest angular gap δ).

Adding a unit (√ε a*, √ε b) along the polar maximizer a* (b = G h/‖G h‖, h = ReLU(Xᵀa*)) changes F
by exactly ε(λ − Ω°(G)) + ε²‖h‖²/2. :func:`non_increasing_path` chains slides along
:func:`dropnb.relu_decay.flat_path`, escapes and gradient descent into the path of Theorem 1.10
(Haeffele and Vidal 2015, 2017).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from . import checks
from .rounding import UNIT_ROUNDOFF
from .engine import Run, Schedule
from .relu_decay import _check_network, flat_path, gradient_descent, objective, outputs, regularizer, unit_regularizers

TWO_PI = 2 * np.pi


# ---------------------------------------------------------------------------------------------
# validation


def _check_planar(X) -> np.ndarray:
    X = checks.matrix(X, "X")
    if X.shape[0] != 2:
        raise ValueError(f"X must have n0 = 2 rows for the exact polar and convex reference, got shape {X.shape}")
    if X.shape[1] == 0:
        raise ValueError("X must have at least one column")
    return X


def _check_residual(X, G) -> np.ndarray:
    G = checks.real_array(G, "G")
    if G.ndim == 1:
        G = G[None, :]
    G = checks.matrix(G, "G")
    if G.shape[1] != X.shape[1]:
        raise ValueError(f"G must have {X.shape[1]} columns to match X, got shape {G.shape}")
    return G


# ---------------------------------------------------------------------------------------------
# the exact polar for n₀ = 2


def direction(angle) -> np.ndarray:
    """a(θ) = (cos θ, sin θ), shape (…, 2)."""
    angle = checks.matrix(angle, "angle", ndim=0, batched=True, empty=True)
    return np.stack([np.cos(angle), np.sin(angle)], axis=-1)


def breakpoint_angles(X) -> np.ndarray:
    """The sorted angles in [0, 2π) of ±x_j^⊥ (2 per non-zero column of X, n₀ = 2), where x_jᵀa(θ)
    changes sign."""
    X = _check_planar(X)
    X = X[:, np.any(X != 0, axis=0)]
    if X.shape[1] == 0:
        raise ValueError("X must have a non-zero column")
    base = np.arctan2(X[1], X[0])
    return np.sort(np.mod(np.concatenate([base + np.pi / 2, base - np.pi / 2]), TWO_PI))


def arcs(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, stop, active): the arcs [start_k, stop_k] between consecutive breakpoints (stop of the
    last arc is the first breakpoint + 2π) and the active sets 1[x_jᵀa > 0] inside them, (K, m)."""
    X = _check_planar(X)
    start = breakpoint_angles(X)
    stop = np.append(start[1:], start[0] + TWO_PI)
    active = (direction((start + stop) / 2) @ X) > 0
    return start, stop, active


def polar_curve(X, G, angles) -> np.ndarray:
    """‖G ReLU(Xᵀa(θ))‖₂ at each angle θ (n₀ = 2)."""
    X = _check_planar(X)
    G = _check_residual(X, G)
    angles = checks.matrix(angles, "angles", ndim=0, batched=True, empty=True)
    H = np.maximum(direction(angles) @ X, 0.0)  # (…, m)
    return np.linalg.norm(H @ G.T, axis=-1)


@dataclass
class Polar:
    """Ω°(G) = max_{‖a‖=1} ‖G ReLU(Xᵀa)‖, its maximizing angle and direction a*."""

    value: float
    angle: float
    direction: np.ndarray


def polar(X, G) -> Polar:
    """The exact polar Ω°(G) = max_θ ‖G ReLU(Xᵀa(θ))‖ for n₀ = 2: on each arc the value is ‖C_S a‖,
    C_S = Σ_{j∈S} g_j x_jᵀ, maximized at an arc end or at the top right singular vector of C_S."""
    X = _check_planar(X)
    G = _check_residual(X, G)
    start, stop, active = arcs(X)
    C = np.einsum("pm,km,qm->kpq", G, active.astype(float), X)  # (K, n₂, 2)
    _, _, Vt = np.linalg.svd(C)
    top = np.arctan2(Vt[:, 0, 1], Vt[:, 0, 0])
    candidates = [start]
    for angle in (top, top + np.pi):
        offset = np.mod(angle - start, TWO_PI)
        inside = offset <= stop - start
        candidates.append(np.where(inside, start + offset, start))
    angles = np.mod(np.concatenate(candidates), TWO_PI)
    values = polar_curve(X, G, angles)
    best = int(np.argmax(values))
    return Polar(float(values[best]), float(angles[best]), direction(angles[best]))


# ---------------------------------------------------------------------------------------------
# duality gap


@dataclass
class DualityGapCertificate:
    """Global optimality by weak duality: primal p = ½‖Y − Z‖² + λ·cost ≥ F* ≥ dual d, with G = Y − Z, P = Ω°(G), G̃ = G·min(1, λ/P).

    ``scaling`` = ⟨G, Z⟩ − λ·cost, ``polar``/``direction`` the polar value and maximizer."""

    primal: float
    dual: float
    polar: float
    scaling: float
    direction: np.ndarray

    @property
    def gap(self) -> float:
        """p − d ≥ 0, an upper bound on p − F*."""
        return self.primal - self.dual


def duality_gap_certificate(X, Y, Z, cost, decay) -> DualityGapCertificate:
    """The duality-gap certificate of an output Z with representation cost ``cost`` ≥ Ω(Z) (n₀ = 2)."""
    X = _check_planar(X)
    Y = checks.matrix(np.atleast_2d(Y), "Y")
    Z = checks.matrix(np.atleast_2d(Z), "Z")
    if Y.shape != Z.shape or Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y and Z must have the same shape with {X.shape[1]} columns (those of X), "
                         f"got {Y.shape} and {Z.shape}")
    decay = checks.positive(decay, "decay")
    cost = checks.nonnegative(cost, "cost")
    G = Y - Z
    P = polar(X, G)
    kappa = 1.0 if P.value <= decay else decay / P.value
    primal = 0.5 * np.sum(G**2) + decay * cost
    dual = kappa * np.sum(G * Y) - 0.5 * kappa**2 * np.sum(G**2)
    return DualityGapCertificate(float(primal), float(dual), P.value, float(np.sum(G * Z) - decay * cost), P.direction)


def network_certificate(X, Y, W1, W2, decay) -> DualityGapCertificate:
    """:func:`duality_gap_certificate` at Z = Φ(W) with cost Θ(W) (one network, no batch dimension)."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    if W1.ndim != 2:
        raise ValueError(f"W1 must be a single network (n0, r), got shape {W1.shape}")
    return duality_gap_certificate(X, Y, outputs(X, W1, W2), regularizer(W1, W2), decay)


# ---------------------------------------------------------------------------------------------
# the exact convex reference (n₀ = 2, scalar output)


def _cone_prox(P, left, right, shrink):
    """Row-wise exact prox of shrink·‖v‖ + ι_K(v) for the 2-d cones K = cone(left, right) (aperture < π):
    projection onto K, then v·max(0, 1 − shrink/‖v‖)."""
    cross_left = left[:, 0] * P[:, 1] - left[:, 1] * P[:, 0]
    cross_right = P[:, 0] * right[:, 1] - P[:, 1] * right[:, 0]
    inside = (cross_left >= 0) & (cross_right >= 0)
    on_left = np.maximum(np.sum(P * left, axis=1), 0.0)
    on_right = np.maximum(np.sum(P * right, axis=1), 0.0)
    ray = np.where((on_left >= on_right)[:, None], on_left[:, None] * left, on_right[:, None] * right)
    Q = np.where(inside[:, None], P, ray)
    norms = np.linalg.norm(Q, axis=1)
    factor = np.maximum(0.0, 1 - shrink / np.where(norms > 0, norms, 1.0))
    return Q * factor[:, None]


@dataclass
class Reference:
    """The certified solution of (1.48) for n₀ = 2 and scalar output: the cone groups v_S (positive
    units) and u_S (negative units), the output Z, the primal and dual values and the iterations."""

    V: np.ndarray  # (K, 2)
    U: np.ndarray  # (K, 2)
    Z: np.ndarray  # (1, m)
    primal: float
    dual: float
    iterations: int
    start: np.ndarray  # (K,) arc starts
    stop: np.ndarray  # (K,) arc stops

    @property
    def gap(self) -> float:
        return self.primal - self.dual

    def network(self, threshold: float = 0.0, merge: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Balanced units (v/√‖v‖, +√‖v‖) and (u/√‖u‖, −√‖u‖) of the groups with norm > threshold:
        Φ = Z and Θ = Σ_S(‖v_S‖ + ‖u_S‖). With ``merge``, groups of the same sign along the same ray
        (a breakpoint shared by two adjacent arcs, angles within 10⁻¹² rad) become one unit."""
        threshold, merge = checks.nonnegative(threshold, "threshold"), checks.flag(merge, "merge")
        groups = np.concatenate([self.V, self.U])
        signs = np.concatenate([np.ones(len(self.V)), -np.ones(len(self.U))])
        norms = np.linalg.norm(groups, axis=1)
        keep = norms > threshold
        groups, signs = groups[keep], signs[keep]
        if merge and len(groups) > 1:
            angles = np.arctan2(groups[:, 1], groups[:, 0])
            merged, merged_signs, used = [], [], np.zeros(len(groups), dtype=bool)
            for i in range(len(groups)):
                if used[i]:
                    continue
                gap = np.abs(np.mod(angles - angles[i] + np.pi, TWO_PI) - np.pi)
                same = (~used) & (signs == signs[i]) & (gap <= 1e-12)
                used |= same
                merged.append(groups[same].sum(axis=0))
                merged_signs.append(signs[i])
            groups, signs = np.array(merged), np.array(merged_signs)
        root = np.sqrt(np.linalg.norm(groups, axis=1))
        return (groups / root[:, None]).T, (signs * root)[None, :]

    def active_groups(self, threshold: float = 0.0) -> int:
        threshold = checks.nonnegative(threshold, "threshold")
        return int(np.sum(np.linalg.norm(np.concatenate([self.V, self.U]), axis=1) > threshold))


def _sector_problem(X, y, decay) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """The validated X, y, λ, the arcs' starts and stops, and the design D = [D_S Xᵀ]_S (m, 2K),
    columns (arc, coordinate), of the group lasso over arc cones: Z = D vec(V) − D vec(U)."""
    X = _check_planar(X)
    y = checks.matrix(np.ravel(y), "y", ndim=1)
    if y.shape[0] != X.shape[1]:
        raise ValueError(f"y must have {X.shape[1]} entries to match X, got {y.shape[0]}")
    decay = checks.positive(decay, "decay")
    start, stop, active = arcs(X)
    K, m = active.shape
    design = (active[:, :, None] * X.T[None, :, :]).transpose(1, 0, 2).reshape(m, 2 * K)
    return X, y, decay, start, stop, design


def sector_reference(X, y, decay, tol: float = 1e-10, max_iter: int = 200_000, check_every: int = 50) -> Reference:
    """FISTA with gradient restart (O'Donoghue and Candès 2015) on the group lasso over arc cones,
    stopped when the duality gap p − d ≤ tol·p (checked every ``check_every`` iterations)."""
    X, y, decay, start, stop, design = _sector_problem(X, y, decay)
    tol = checks.positive(tol, "tol")
    max_iter = checks.integer(max_iter, "max_iter")
    check_every = checks.integer(check_every, "check_every")
    K = len(start)
    A = np.concatenate([design, -design], axis=1)  # columns (group, coordinate): the V groups, then the U groups
    left, right = direction(start), direction(stop)
    left2, right2 = np.concatenate([left, left]), np.concatenate([right, right])
    L = np.linalg.norm(A, 2) ** 2
    x = np.zeros(4 * K)
    z = x.copy()
    t = 1.0
    best = None
    for it in range(1, max_iter + 1):
        step_point = z - A.T @ (A @ z - y) / L
        x_new = _cone_prox(step_point.reshape(2 * K, 2), left2, right2, decay / L).ravel()
        if np.dot(z - x_new, x_new - x) > 0:  # restart the momentum
            t = 1.0
            z = x_new
        else:
            t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
            z = x_new + (t - 1) / t_new * (x_new - x)
            t = t_new
        x = x_new
        if it % check_every == 0 or it == max_iter:
            groups = x.reshape(2 * K, 2)
            Z = (A @ x)[None, :]
            cert = duality_gap_certificate(X, y[None, :], Z, np.sum(np.linalg.norm(groups, axis=1)), decay)
            if best is None or cert.gap < best[0].gap:
                best = (cert, groups.copy(), Z, it)
            if cert.gap <= tol * cert.primal:
                break
    cert, groups, Z, it = best
    return Reference(groups[:K], groups[K:], Z, cert.primal, cert.dual, it, start, stop)


@dataclass
class ConicReference:
    """(1.48) for n₀ = 2 and scalar output solved by Clarabel through cvxpy: the cone groups, the
    output, the optimal value, and the accuracy ε(1 + |value|) that Clarabel's stopping rule certifies
    for it (status optimal: primal and dual objectives within ε_abs + ε_rel·|value|, residuals ≤ ε)."""

    V: np.ndarray  # (K, 2)
    U: np.ndarray  # (K, 2)
    Z: np.ndarray  # (1, m)
    value: float
    accuracy: float


def conic_reference(X, y, decay, tol: float = 1e-10) -> ConicReference:
    """The problem of :func:`sector_reference` handed to an independent solver: cvxpy with Clarabel
    (interior point), min ½‖y − Z‖² + λΣ_S(‖v_S‖ + ‖u_S‖) over v_S, u_S in the cones of the arcs, each
    cone written as two linear inequalities. Needs cvxpy and clarabel (requirements.txt)."""
    X, y, decay, start, stop, design = _sector_problem(X, y, decay)
    tol = checks.positive(tol, "tol")
    try:
        import cvxpy as cp
    except ImportError as error:  # pragma: no cover - pinned in requirements.txt
        raise ImportError("conic_reference needs cvxpy and clarabel: pip install -r requirements.txt") from error
    K = len(start)
    left, right = direction(start), direction(stop)
    V, U = cp.Variable((K, 2)), cp.Variable((K, 2))
    Z = design @ cp.reshape(V - U, (2 * K,), order="C")
    cones = [constraint for W in (V, U) for constraint in (
        cp.multiply(left[:, 0], W[:, 1]) - cp.multiply(left[:, 1], W[:, 0]) >= 0,
        cp.multiply(W[:, 0], right[:, 1]) - cp.multiply(W[:, 1], right[:, 0]) >= 0)]
    cost = cp.sum(cp.norm(V, 2, axis=1)) + cp.sum(cp.norm(U, 2, axis=1))
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - Z) + decay * cost), cones)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    if problem.status != cp.OPTIMAL:
        raise RuntimeError(f"Clarabel did not certify an optimum at tolerance {tol:g}: status {problem.status}")
    Vv, Uv = V.value, U.value
    return ConicReference(Vv, Uv, (design @ (Vv - Uv).ravel())[None, :], float(problem.value),
                          tol * (1 + abs(float(problem.value))))


# ---------------------------------------------------------------------------------------------
# the induced regularizer Ω by basis pursuit


def relu_dictionary(X, n_angles: int) -> tuple[np.ndarray, np.ndarray]:
    """(angles, A): ``n_angles`` uniform angles on [0, 2π) joined with the breakpoint angles, sorted, and
    the atoms A[:, k] = ReLU(Xᵀa(θ_k)), (m, K) (n₀ = 2)."""
    X = _check_planar(X)
    n_angles = checks.integer(n_angles, "n_angles")
    angles = np.unique(np.concatenate([np.arange(n_angles) * (TWO_PI / n_angles), breakpoint_angles(X)]))
    return angles, np.maximum(direction(angles) @ X, 0.0).T


def largest_gap(angles) -> float:
    """The largest angular distance δ between consecutive angles (cyclically)."""
    angles = np.sort(np.mod(checks.matrix(angles, "angles", ndim=1), TWO_PI))
    return float(np.max(np.diff(np.append(angles, angles[0] + TWO_PI))))


@dataclass
class InducedRegularizer:
    """Basis pursuit Ω_K(z) = min{‖c‖₁ : Σ_k c_k ReLU(Xᵀa_k) = z} over a dictionary of K angles.

    ``value`` = ‖c‖₁ (an upper bound on Ω(z)); ``lower`` = ⟨q, z⟩/Ω°(q) for the LP's dual vector q,
    a lower bound on Ω(z) by the exact polar; Ω(z) ≥ value·cos(δ/2) for the largest gap δ."""

    value: float
    lower: float
    coefficients: np.ndarray
    angles: np.ndarray
    residual: float
    cos_half_gap: float

    @property
    def support(self) -> int:
        """The number of atoms used (non-zero coefficients): a basic solution uses at most m."""
        return int(np.count_nonzero(self.coefficients))

    def network(self) -> tuple[np.ndarray, np.ndarray]:
        """Balanced units (√|c_k| a_k, sign(c_k)√|c_k|) of the atoms used: Φ = Σ c_k atom_k, Θ = ‖c‖₁."""
        used = np.flatnonzero(self.coefficients)
        c = self.coefficients[used]
        root = np.sqrt(np.abs(c))
        return (direction(self.angles[used]) * root[:, None]).T, (np.sign(c) * root)[None, :]


def induced_regularizer(X, z, n_angles: int = 4000) -> InducedRegularizer:
    """Ω(z) of (1.47) for the ReLU pair with scalar output by the linear program
    min 1ᵀ(c⁺ + c⁻) s.t. A(c⁺ − c⁻) = z, c± ≥ 0 (HiGHS dual simplex, so the solution is a vertex)."""
    X = _check_planar(X)
    z = checks.matrix(np.ravel(z), "z", ndim=1)
    if z.shape[0] != X.shape[1]:
        raise ValueError(f"z must have {X.shape[1]} entries to match X, got {z.shape[0]}")
    angles, A = relu_dictionary(X, n_angles)
    K = A.shape[1]
    result = linprog(np.ones(2 * K), A_eq=np.hstack([A, -A]), b_eq=z, bounds=(0, None), method="highs-ds",
                     options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if result.status != 0:
        raise ValueError(f"the basis pursuit failed ({result.message}); is z in the span of the atoms?")
    c = result.x[:K] - result.x[K:]
    q = np.asarray(result.eqlin.marginals, dtype=np.float64)
    q_polar = polar(X, q).value
    lower = float(q @ z / q_polar) if q_polar > 0 else 0.0
    return InducedRegularizer(float(np.sum(np.abs(c))), lower, c, angles, float(np.linalg.norm(A @ c - z)),
                              float(np.cos(largest_gap(angles) / 2)))


# ---------------------------------------------------------------------------------------------
# the escape step, the meta-algorithm and Theorem 1.10's non-increasing path


@dataclass
class Escape:
    """A unit (√ε a*, √ε b) put into slot ``slot`` along the polar maximizer; ``change`` is the
    exact predicted change ε(λ − P) + ε²‖h‖²/2 of F (ε = (P − λ)/‖h‖², or 0 when P ≤ λ)."""

    W1: np.ndarray
    W2: np.ndarray
    epsilon: float
    polar: float
    change: float
    slot: int


def escape(X, Y, W1, W2, decay, slot: int | None = None) -> Escape:
    """The descent step of the meta-algorithm: put a unit along the polar maximizer a* into the zero
    unit ``slot`` (default: a new unit appended) with the optimal ε = (P − λ)/‖h‖², h = ReLU(Xᵀa*)."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    if W1.ndim != 2:
        raise ValueError(f"W1 must be a single network (n0, r), got shape {W1.shape}")
    r = W1.shape[1]
    if slot is None:
        W1, W2, slot = np.hstack([W1, np.zeros((W1.shape[0], 1))]), np.hstack([W2, np.zeros((W2.shape[0], 1))]), r
    else:
        slot = checks.integer(slot, "slot", minimum=0, maximum=r - 1)
        if np.any(W1[:, slot] != 0) or np.any(W2[:, slot] != 0):
            raise ValueError(f"slot {slot} must be a zero unit")
        W1, W2 = W1.copy(), W2.copy()
    G = Y - outputs(X, W1, W2)
    P = polar(X, G)
    h = np.maximum(P.direction @ X, 0.0)
    Gh = G @ h
    epsilon = max(P.value - decay, 0.0) / float(h @ h) if h @ h > 0 else 0.0
    if epsilon > 0:
        W1[:, slot] = np.sqrt(epsilon) * P.direction
        W2[:, slot] = np.sqrt(epsilon) * Gh / np.linalg.norm(Gh)
    change = epsilon * (decay - P.value) + 0.5 * epsilon**2 * float(h @ h)
    return Escape(W1, W2, float(epsilon), P.value, float(change), int(slot))


@dataclass
class MetaRun:
    """The meta-algorithm's end points ``W1`` (S, n₀, r), ``W2`` (S, n₂, r), their duality-gap
    ``certificates``, the number of ``escapes`` per run and the ``rounds`` of escape and descent taken."""

    W1: np.ndarray
    W2: np.ndarray
    certificates: list[DualityGapCertificate]
    escapes: np.ndarray
    rounds: int

    def certified(self, accuracy: float) -> np.ndarray:
        """Per run: gap ≤ ``accuracy`` · own dual value (so F − F* ≤ accuracy · F*)."""
        accuracy = checks.nonnegative(accuracy, "accuracy")
        return np.array([c.gap <= accuracy * c.dual for c in self.certificates])


def meta_algorithm(X, Y, W1, W2, decay, schedule, escape_schedule, *, accuracy: float, rounds: int) -> MetaRun:
    """Vidal et al. (2022, §1.4.1) for S networks at once (leading dimension of W1, W2): gradient
    descent with ``schedule``; then, while a network's duality gap exceeds ``accuracy`` times its own
    dual value d ≤ F* (at most ``rounds`` times), set its first zero unit (one whose regularizer is at
    most u times the network's, below what F resolves) exactly to zero, put the :func:`escape` unit
    into it, and resume gradient descent with ``escape_schedule`` for the networks not yet certified."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    schedule = Schedule.of(schedule, name="schedule")
    escape_schedule = Schedule.of(escape_schedule, name="escape_schedule")
    if W1.ndim != 3:
        raise ValueError(f"W1 must be a batch of networks (S, n0, r), got shape {W1.shape}")
    accuracy = checks.positive(accuracy, "accuracy")
    rounds = checks.integer(rounds, "rounds")
    run = gradient_descent(X, Y, W1, W2, decay, schedule)
    W1, W2 = run.final["W1"].copy(), run.final["W2"].copy()
    escapes = np.zeros(W1.shape[0], dtype=int)

    def certificates():
        return [network_certificate(X, Y, W1[s], W2[s], decay) for s in range(W1.shape[0])]

    taken = 0
    for taken in range(rounds + 1):
        todo = [s for s, cert in enumerate(certificates()) if cert.gap > accuracy * cert.dual]
        if not todo or taken == rounds:
            break
        for s in todo:
            sizes = unit_regularizers(W1[s], W2[s])
            zero = np.flatnonzero(sizes <= UNIT_ROUNDOFF * sizes.sum())
            if zero.size:
                W1[s][:, zero[0]], W2[s][:, zero[0]] = 0.0, 0.0
                step = escape(X, Y, W1[s], W2[s], decay, slot=int(zero[0]))
                W1[s], W2[s] = step.W1, step.W2
                escapes[s] += step.epsilon > 0
        resumed = gradient_descent(X, Y, W1[todo], W2[todo], decay, escape_schedule)
        W1[todo], W2[todo] = resumed.final["W1"], resumed.final["W2"]
    return MetaRun(W1=W1, W2=W2, certificates=certificates(), escapes=escapes, rounds=taken)


@dataclass
class Segment:
    """One piece of a non-increasing path: ``kind`` is "slide" (flat path, parameter τ), "escape"
    (parameter ε of the new unit) or "descent" (parameter = step); ``objective`` is F along it and
    ``outputs_change``/``theta_error`` (slides only) are max|Φ(τ) − Φ(0)| and |Θ(τ) − Θ(0) − τs|."""

    kind: str
    parameter: np.ndarray
    objective: np.ndarray
    W1: np.ndarray
    W2: np.ndarray
    polar: float = np.nan
    predicted_change: float = np.nan
    outputs_change: float = np.nan
    theta_error: float = np.nan


def _descent_segment(run: Run) -> Segment:
    return Segment("descent", run.steps.astype(float), run.metrics["objective"], run.final["W1"], run.final["W2"])


def non_increasing_path(X, Y, W1, W2, decay, cycle_schedule, final_schedule, cycles: int, points: int = 25,
                        every: int = 100) -> list[Segment]:
    """Theorem 1.10's construction from (W₁, W₂) (one network): up to ``cycles`` times, slide along a flat
    path until a unit vanishes (when no unit is zero), put a unit along the polar maximizer into a zero
    unit when Ω°(G) > λ (stop otherwise), and run gradient descent with ``cycle_schedule``; finally run
    gradient descent with ``final_schedule``. Slides and escapes are sampled at ``points`` values."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    if W1.ndim != 2:
        raise ValueError(f"W1 must be a single network (n0, r), got shape {W1.shape}")
    cycles, points = checks.integer(cycles, "cycles"), checks.integer(points, "points")
    cycle_schedule = Schedule.of(cycle_schedule, name="cycle_schedule")
    final_schedule = Schedule.of(final_schedule, name="final_schedule")
    segments: list[Segment] = []
    for _ in range(cycles):
        theta = unit_regularizers(W1, W2)
        zero = np.flatnonzero(theta == 0)
        if zero.size == 0:
            path = flat_path(X, W1, W2)
            taus = np.linspace(0, path.tau_end, points)
            weights = [path.weights(t) for t in taus]
            phi0 = outputs(X, W1, W2)
            segments.append(Segment(
                "slide", taus, np.array([objective(X, Y, A, B, decay) for A, B in weights]), *weights[-1],
                outputs_change=max(float(np.abs(outputs(X, A, B) - phi0).max()) for A, B in weights),
                theta_error=max(abs(regularizer(A, B) - regularizer(W1, W2) - t * path.slope) for t, (A, B) in zip(taus, weights))))
            W1, W2 = weights[-1]
            zero = np.array([path.index])
        step = escape(X, Y, W1, W2, decay, slot=int(zero[0]))
        if step.epsilon == 0:
            break
        eps = np.linspace(0, step.epsilon, points)
        values = []
        for e in eps:
            A, B = W1.copy(), W2.copy()
            A[:, step.slot] = step.W1[:, step.slot] * np.sqrt(e / step.epsilon)
            B[:, step.slot] = step.W2[:, step.slot] * np.sqrt(e / step.epsilon)
            values.append(objective(X, Y, A, B, decay))
        segments.append(Segment("escape", eps, np.array(values), step.W1, step.W2, polar=step.polar,
                                predicted_change=step.change))
        run = gradient_descent(X, Y, step.W1, step.W2, decay, cycle_schedule, every=every)
        segments.append(_descent_segment(run))
        W1, W2 = run.final["W1"], run.final["W2"]
    segments.append(_descent_segment(gradient_descent(X, Y, W1, W2, decay, final_schedule, every=every)))
    return segments
