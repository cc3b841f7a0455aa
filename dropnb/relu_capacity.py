"""Two-layer ReLU networks x ↦ uᵀσ(Vᵀx) (no biases): the quantities dropout's regularizer and
capacity bounds are written in (Arora et al. 2021, Section 4).

For hidden unit j with incoming weights vⱼ (column j of V) the activation scale on a sample
X = [x₁ … x_n] is âⱼ = (Ê σ(vⱼᵀxᵢ)²)^{1/2}; its outgoing weight uⱼ carries the *flow*
ψⱼ = |uⱼ| âⱼ. The dropout regularizer is λ Σⱼ uⱼ² âⱼ² = λ‖ψ‖₂², the capacity α = ‖ψ‖₁, and the
co-adaptation measure φ = ‖ψ‖₁ / (√d₁ ‖ψ‖₂) ∈ [1/√d₁, 1] says how evenly the units share the
flow (1: all equal; 1/√d₁: one unit carries it all). Functions are batched over leading
dimensions (runs, rates, widths).

:func:`relu_dropout_training` trains R such networks x ↦ Σₖ uₖσ(vₖᵀx) (u (R, d), V (R, d₀, d), a
leading run dimension) by dropout on the squared loss (y − ŷ)², no ½, with Adam or SGD on
:func:`dropnb.engine.train`, all runs as one tensor program on the generator's device (float64 on
the CPU, float32 on a GPU).
"""

from __future__ import annotations

import numpy as np
import torch

from . import checks
from .engine import Run, Schedule, State, train


def activation_scales(V, X) -> np.ndarray:
    """âⱼ = (1/n Σᵢ σ(vⱼᵀxᵢ)²)^{1/2} for V (…, d₀, d₁) and X (d₀, n): shape (…, d₁)."""
    V, X = checks.matrix(V, "V", batched=True), checks.matrix(X, "X")
    if V.shape[-2] != X.shape[0]:
        raise ValueError(f"V must have {X.shape[0]} rows (the input dimension of X), got shape {V.shape}")
    pre = np.swapaxes(V, -1, -2) @ X
    return np.sqrt(np.mean(np.maximum(pre, 0.0) ** 2, axis=-1))


def coadaptation(u, scales) -> np.ndarray | float:
    """φ = ‖ψ‖₁ / (√d₁ ‖ψ‖₂) with ψⱼ = |uⱼ| âⱼ, for u and ``scales`` (…, d₁) of the same shape;
    a float for one network. Undefined (ValueError) where every flow is zero."""
    u, scales = checks.matrix(u, "u", ndim=1, batched=True), checks.matrix(scales, "scales", ndim=1, batched=True)
    if u.shape != scales.shape:
        raise ValueError(f"scales must have the shape of u {u.shape}, got {scales.shape}")
    if np.any(scales < 0):
        raise checks.error("scales", "non-negative (root mean squares)", scales)
    flow = np.abs(u) * scales
    two = np.linalg.norm(flow, axis=-1)
    if np.any(two == 0):
        raise ValueError("u and scales give a zero flow ψ = |u|·â for some network: φ is undefined")
    phi = flow.sum(-1) / (np.sqrt(flow.shape[-1]) * two)
    return float(phi) if phi.ndim == 0 else phi


# --- the dropout regularizer (Arora et al. 2021, Propositions 5 and 6) -------------------------------


def _network(U, V, X=None) -> tuple[np.ndarray, ...]:
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same number of columns (the width d₁), got {U.shape} and {V.shape}")
    if X is None:
        return U, V
    X = checks.matrix(X, "X")
    if X.shape[0] != V.shape[0]:
        raise ValueError(f"X must have {V.shape[0]} rows (the input dimension of V), got shape {X.shape}")
    return U, V, X


def dropout_regularizer(U, V, X, lam: float) -> float:
    """R̂ = λ Σⱼ ‖uⱼ‖² âⱼ², âⱼ² = 1/n Σᵢ σ(vⱼᵀxᵢ)² (Proposition 5), for U (d₂, d₁), V (d₀, d₁), X (d₀, n)."""
    U, V, X = _network(U, V, X)
    lam = checks.nonnegative(lam, "lam")
    return float(lam * np.sum(np.sum(U**2, axis=0) * activation_scales(V, X) ** 2))


def enumerated_dropout_loss(U, V, X, Y, retain: float) -> float:
    """Ê_i E_b ‖yᵢ − U diag(b/θ) σ(Vᵀxᵢ)‖², summed exactly over all 2^d₁ masks b ∈ {0, 1}^d₁ with
    weights θ^|b|(1 − θ)^(d₁−|b|) (d₁ ≤ 16), for U (d₂, d₁), V (d₀, d₁), X (d₀, n), Y (d₂, n)."""
    U, V, X = _network(U, V, X)
    Y = checks.matrix(Y, "Y")
    if Y.shape != (U.shape[0], X.shape[1]):
        raise ValueError(f"Y must have shape {(U.shape[0], X.shape[1])} (outputs of U × samples of X), got {Y.shape}")
    retain = checks.probability(retain, "retain")
    d1 = U.shape[1]
    if d1 > 16:
        raise ValueError(f"U must have at most 16 columns to enumerate the 2^d₁ masks, got {d1}")
    hidden = np.maximum(V.T @ X, 0.0)
    patterns = ((np.arange(2**d1)[:, None] >> np.arange(d1)) & 1).astype(np.float64)
    kept = patterns.sum(axis=1)
    weights = retain**kept * (1 - retain) ** (d1 - kept)
    total = 0.0
    for b, weight in zip(patterns, weights):
        if weight == 0:
            continue
        total += weight * np.mean(np.sum((Y - U @ (b[:, None] / retain * hidden)) ** 2, axis=0))
    return float(total)


def path_regularizer(U, V, lam: float) -> float:
    """λ/2 Σⱼ ‖uⱼ‖²‖vⱼ‖², λ/2 times the squared ℓ₂ path norm: the expected regularizer for
    symmetric isotropic inputs (Proposition 6), for U (d₂, d₁) and V (d₀, d₁)."""
    U, V = _network(U, V)
    lam = checks.nonnegative(lam, "lam")
    return float(lam / 2 * np.sum(np.sum(U**2, axis=0) * np.sum(V**2, axis=0)))


# --- Gaussian inputs and β-retentivity (Assumption 1) -------------------------------------------------


def _gaussian(mean, cov) -> tuple[np.ndarray, np.ndarray]:
    mean, cov = checks.vector(mean, "mean"), checks.symmetric(cov, "cov")
    if cov.shape != (mean.size, mean.size):
        raise ValueError(f"cov must be {mean.size} × {mean.size} to match mean, got shape {cov.shape}")
    if np.linalg.eigvalsh(cov)[0] <= 0:
        raise checks.error("cov", "positive definite", cov)
    return mean, cov


def gaussian_relu_moment(v, mean, cov) -> np.ndarray | float:
    """E σ(vᵀx)² for x ~ N(μ, Σ): (m² + s²)Φ(m/s) + m s φ(m/s), m = vᵀμ, s² = vᵀΣv, for
    directions v (…, d₀); a float for one direction."""
    from scipy.stats import norm

    mean, cov = _gaussian(mean, cov)
    v = checks.matrix(v, "v", ndim=1, batched=True)
    if v.shape[-1] != mean.size:
        raise ValueError(f"v must have {mean.size} entries along its last axis, got shape {v.shape}")
    m, s = v @ mean, np.sqrt(np.einsum("...i,ij,...j->...", v, cov, v))
    if np.any(s == 0):
        raise ValueError("v must be non-zero")
    t = m / s
    moment = (m**2 + s**2) * norm.cdf(t) + m * s * norm.pdf(t)
    return float(moment) if moment.ndim == 0 else moment


def gaussian_retentivity(mean, cov) -> tuple[float, np.ndarray]:
    """β = minᵥ E σ(vᵀx)² / E (vᵀx)² for x ~ N(μ, Σ), and a minimizing unit direction.

    The ratio depends on v only through t = vᵀμ/√(vᵀΣv): it is g(t) = Φ(t) + tφ(t)/(1 + t²),
    increasing in t, and t ≥ −‖Σ^{−1/2}μ‖ (Cauchy–Schwarz, equality at v ∝ −Σ⁻¹μ), so
    β = g(−√(μᵀΣ⁻¹μ)); β = 1/2 for μ = 0 (any direction; e₁ is returned).
    """
    from scipy.stats import norm

    mean, cov = _gaussian(mean, cov)
    direction = -np.linalg.solve(cov, mean)
    t = -float(np.sqrt(max(-mean @ direction, 0.0)))
    beta = norm.cdf(t) + t * norm.pdf(t) / (1 + t**2)
    if not np.any(direction):
        direction = np.eye(mean.size)[0]
    return float(beta), direction / np.linalg.norm(direction)


def retentivity_ratio(v, Z, weights) -> np.ndarray | float:
    """Σₖ pₖ σ(vᵀzₖ)² / Σₖ pₖ (vᵀzₖ)² for the discrete law P(x = zₖ) = pₖ (atoms Z (d₀, K),
    weights (K,)), for directions v (…, d₀); a float for one direction."""
    Z, weights = _discrete(Z, weights)
    v = checks.matrix(v, "v", ndim=1, batched=True)
    if v.shape[-1] != Z.shape[0]:
        raise ValueError(f"v must have {Z.shape[0]} entries along its last axis, got shape {v.shape}")
    pre = v @ Z
    total = (pre**2) @ weights
    if np.any(total == 0):
        raise ValueError("v must not be orthogonal to every atom of Z")
    ratio = (np.maximum(pre, 0.0) ** 2) @ weights / total
    return float(ratio) if ratio.ndim == 0 else ratio


def _discrete(Z, weights) -> tuple[np.ndarray, np.ndarray]:
    Z = checks.matrix(Z, "Z")
    weights = checks.vector(weights, "weights")
    if weights.size != Z.shape[1]:
        raise ValueError(f"weights must have one entry per atom (column of Z, {Z.shape[1]}), got {weights.size}")
    if np.any(weights < 0) or abs(weights.sum() - 1) > 1e-12 * weights.size:
        raise checks.error("weights", "non-negative and summing to 1", weights)
    return Z, weights


def proposition2_atoms(delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The law of Proposition 2 on the unit circle, atoms (2, 3) and weights (3,): (1, 0) with
    probability δ and (−δ/(1−δ), ±√(1−2δ)/(1−δ)) with probability (1−δ)/2 each, δ ∈ (0, 1/2]."""
    delta = checks.number(delta, "delta", minimum=0, maximum=0.5, open_minimum=True)
    side = np.sqrt(1 - 2 * delta) / (1 - delta)
    Z = np.array([[1.0, -delta / (1 - delta), -delta / (1 - delta)], [0.0, side, -side]])
    return Z, np.array([delta, (1 - delta) / 2, (1 - delta) / 2])


# --- exact computations in the plane (d₀ = 2) ---------------------------------------------------------


def _arcs(*point_sets) -> tuple[np.ndarray, np.ndarray]:
    """Arcs of directions v(t) = (cos t, sin t) between consecutive breakpoints t = angle(z) ± π/2 of
    all the points: on each arc every sign of zᵀv is constant. Returns (starts, ends) with ends > starts."""
    angles = np.concatenate([np.arctan2(P[1], P[0]) for P in point_sets
                             for keep in [np.any(P != 0, axis=0)] for P in [P[:, keep]]])
    breaks = np.unique(np.mod(np.concatenate([angles + np.pi / 2, angles - np.pi / 2]), 2 * np.pi))
    if breaks.size == 0:
        breaks = np.array([0.0])
    ends = np.append(breaks[1:], breaks[0] + 2 * np.pi)
    return breaks, ends


def _direction(t) -> np.ndarray:
    return np.stack([np.cos(t), np.sin(t)], axis=-1)


def _inside(direction, starts, ends) -> np.ndarray:
    """Whether the angle of each direction (…, arcs, 2) lies in its arc [start, end]."""
    angle = np.mod(np.arctan2(direction[..., 1], direction[..., 0]) - starts, 2 * np.pi)
    return angle <= ends - starts


def _plane(name: str, A) -> np.ndarray:
    if A.shape[0] != 2:
        raise ValueError(f"{name} must have 2 rows (points in the plane), got shape {A.shape}")
    return A


def retentivity_2d(Z, weights) -> tuple[float, np.ndarray]:
    """β = min over unit v of Σₖ pₖ σ(vᵀzₖ)² / vᵀSv, S = Σₖ pₖ zₖzₖᵀ, exactly, for a discrete law
    in the plane (atoms Z (2, K), weights (K,)), and a minimizing direction.

    On each arc between the breakpoints angle(zₖ) ± π/2 the numerator is vᵀA v with A the second
    moment of the active atoms, so the minimum over the arc is at an end or at a generalized
    eigenvector of (A, S) inside it.
    """
    Z, weights = _discrete(Z, weights)
    Z = _plane("Z", Z)
    S = (Z * weights) @ Z.T
    if np.linalg.eigvalsh(S)[0] <= 0:
        raise ValueError("Z must span the plane (with positive weights): its second moment is singular")
    starts, ends = _arcs(Z)
    middle = _direction((starts + ends) / 2)
    active = (middle @ Z > 0) * weights
    A = np.einsum("ak,ik,jk->aij", active, Z, Z)
    candidates = [_direction(starts)]
    for k in range(len(starts)):
        _, vectors = _generalized_eigh(A[k], S)
        for vector in (vectors / np.linalg.norm(vectors, axis=0)).T:
            for unit in (vector, -vector):
                if _inside(unit, starts[k], ends[k]):
                    candidates.append(unit[None])
    candidates = np.concatenate(candidates)
    values = retentivity_ratio(candidates, Z, weights)
    best = int(np.argmin(values))
    return float(values[best]), candidates[best]


def _generalized_eigh(A, S) -> tuple[np.ndarray, np.ndarray]:
    from scipy.linalg import eigh

    return eigh(A, S)


def mahalanobis_norm(X, S) -> float:
    """‖X‖_{S†} = (Σᵢ xᵢᵀS†xᵢ)^{1/2} for samples X (d₀, n) and a second moment S (d₀, d₀)."""
    X, S = checks.matrix(X, "X"), checks.symmetric(S, "S")
    if S.shape != (X.shape[0],) * 2:
        raise ValueError(f"S must be {X.shape[0]} × {X.shape[0]} to match X, got shape {S.shape}")
    return float(np.sqrt(np.sum(X * (np.linalg.pinv(S, hermitian=True) @ X))))


def linear_class_sup(X, S, signs) -> np.ndarray:
    """‖Σᵢ ζᵢ S^{†/2}xᵢ‖ / n per sign vector ζ (rows of ``signs``, (draws, n)), for X (d₀, n): the
    supremum of 1/n Σᵢ ζᵢ wᵀxᵢ over the linear class {wᵀSw ≤ 1}."""
    X, S = checks.matrix(X, "X"), checks.symmetric(S, "S")
    signs = checks.matrix(signs, "signs")
    if S.shape != (X.shape[0],) * 2:
        raise ValueError(f"S must be {X.shape[0]} × {X.shape[0]} to match X, got shape {S.shape}")
    if signs.shape[1] != X.shape[1]:
        raise ValueError(f"signs must have {X.shape[1]} columns (one per sample of X), got shape {signs.shape}")
    values, vectors = np.linalg.eigh(S)
    keep = values > values.max() * S.shape[0] * np.finfo(float).eps
    root = (vectors[:, keep] / np.sqrt(values[keep])) @ vectors[:, keep].T
    return np.linalg.norm(signs @ (root @ X).T, axis=1) / X.shape[1]


def relu_ratio(v, X, signs, Z, weights) -> np.ndarray:
    """|Σᵢ ζᵢ σ(vᵀxᵢ)| / (n a(v)), a(v)² = Σₖ pₖ σ(vᵀzₖ)², per sign vector (rows of ``signs``,
    (draws, n)) and direction (rows of v, (m, d₀)): shape (draws, m); 0 where a(v) = 0 (then every
    sample on the atoms is inactive)."""
    X, (Z, weights) = checks.matrix(X, "X"), _discrete(Z, weights)
    v, signs = checks.matrix(v, "v"), checks.matrix(signs, "signs")
    if Z.shape[0] != X.shape[0] or v.shape[1] != X.shape[0]:
        raise ValueError(f"Z and v must have {X.shape[0]} rows and columns (the input dimension of X), "
                         f"got Z {Z.shape} and v {v.shape}")
    if signs.shape[1] != X.shape[1]:
        raise ValueError(f"signs must have {X.shape[1]} columns (one per sample of X), got shape {signs.shape}")
    scale = np.sqrt(weights @ np.maximum(Z.T @ v.T, 0.0) ** 2)
    numerator = np.abs(signs @ np.maximum(X.T @ v.T, 0.0)) / X.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, numerator / np.where(scale > 0, scale, 1.0), 0.0)


def relu_rademacher_2d(X, Z, weights, signs) -> tuple[np.ndarray, np.ndarray]:
    """supᵥ |Σᵢ ζᵢ σ(vᵀxᵢ)| / (n a(v)) exactly, per sign vector ζ (rows of ``signs``), for a sample
    X (2, n) whose points are atoms of the law P(x = zₖ) = pₖ (Z (2, K), weights), a(v)² = E σ(vᵀx)²;
    and a maximizing direction per draw (draws, 2).

    This is 𝔑̂ₙ(F_α)/α per draw: F_α is the convex hull of ±α σ(vᵀ·)/a(v), whatever the width.
    On each arc between breakpoints the numerator is |cᵀv| (c the signed sum of the active samples)
    and a(v)² = vᵀAv, so |cᵀv|/√(vᵀAv) peaks at v ∝ ±A⁻¹c when that lies in the arc, else at an end.
    """
    X, (Z, weights) = checks.matrix(X, "X"), _discrete(Z, weights)
    X, Z = _plane("X", X), _plane("Z", Z)
    signs = checks.matrix(signs, "signs")
    if signs.shape[1] != X.shape[1]:
        raise ValueError(f"signs must have {X.shape[1]} columns (one per sample of X), got shape {signs.shape}")
    n = X.shape[1]
    starts, ends = _arcs(Z, X)
    middle = _direction((starts + ends) / 2)
    A = (((middle @ Z > 0) * weights) @ np.einsum("ik,jk->kij", Z, Z).reshape(-1, 4)).reshape(-1, 2, 2)
    c = (middle @ X > 0).astype(float) @ (signs[:, :, None] * X.T) / n              # (draws, arcs, 2)
    det = A[:, 0, 0] * A[:, 1, 1] - A[:, 0, 1] ** 2
    invertible = det > 1e-12 * np.einsum("aii->a", A) ** 2
    inverse = np.stack([np.stack([A[:, 1, 1], -A[:, 0, 1]], -1), np.stack([-A[:, 1, 0], A[:, 0, 0]], -1)], -2)
    inverse /= np.where(invertible, det, 1.0)[:, None, None]
    stationary = np.einsum("aij,daj->dai", inverse, c)
    candidates = [np.broadcast_to(_direction(t), c.shape) for t in (starts, ends, (starts + ends) / 2)]
    for sign in (1.0, -1.0):
        length = np.linalg.norm(stationary, axis=-1, keepdims=True)
        unit = sign * stationary / np.where(length > 0, length, 1.0)
        ok = invertible & (length[..., 0] > 0) & _inside(unit, starts, ends)
        candidates.append(np.where(ok[..., None], unit, candidates[2]))
    best = np.zeros(c.shape[:2])
    best_direction = np.broadcast_to(candidates[2], c.shape).copy()
    for v in candidates:
        q = np.einsum("dai,aij,daj->da", v, A, v)
        value = np.where(q > 0, np.abs(np.einsum("dai,dai->da", c, v)) / np.sqrt(np.where(q > 0, q, 1.0)), 0.0)
        better = value > best
        best = np.where(better, value, best)
        best_direction = np.where(better[..., None], v, best_direction)
    arc = np.argmax(best, axis=1)
    draws = np.arange(signs.shape[0])
    return best[draws, arc], best_direction[draws, arc]


# --- Theorem 13 and Lemma 10 --------------------------------------------------------------------------


def linear_as_relu(w, width: int) -> tuple[np.ndarray, np.ndarray]:
    """u = (2/d₁)(1, −1, 1, −1, …) and V = w(e₁ − e₂ + e₃ − …)ᵀ, d₁ = ``width`` even: the network
    uᵀσ(Vᵀx) = (2/d₁)Σ_pairs(σ(wᵀx) − σ(−wᵀx)) = wᵀx of Theorem 13's proof; u (d₁,), V (d₀, d₁)."""
    w = checks.vector(w, "w")
    width = checks.integer(width, "width", minimum=2)
    if width % 2:
        raise ValueError(f"width must be even, got {width}")
    alternating = (-1.0) ** np.arange(width)
    return 2 / width * alternating, np.outer(w, alternating)


def finite_class_rademacher(G) -> float:
    """𝔑̂ₙ(G) = E_ζ maxₖ 1/n Σᵢ ζᵢ gₖᵢ for the finite class of vectors G (K, n), exactly: the mean
    over all 2ⁿ sign vectors ζ ∈ {±1}ⁿ (n ≤ 16)."""
    G = checks.matrix(G, "G")
    n = G.shape[1]
    if n > 16:
        raise ValueError(f"G must have at most 16 columns to enumerate the 2^n sign vectors, got {n}")
    signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    return float(np.mean(np.max(signs @ G.T, axis=1)) / n)



def outputs(u, V, X) -> np.ndarray:
    """f(x) = Σⱼ uⱼ σ(vⱼᵀx) for every column x of X (d₀, n), u (…, d₁), V (…, d₀, d₁): shape (…, n)."""
    u, V, X = checks.matrix(u, "u", ndim=1, batched=True), checks.matrix(V, "V", batched=True), checks.matrix(X, "X")
    if V.shape[-2] != X.shape[0] or V.shape[:-2] + V.shape[-1:] != u.shape:
        raise ValueError(f"V must be (…, {X.shape[0]}, d1) with u (…, d1), got shapes {V.shape} and {u.shape}")
    hidden = np.maximum(np.swapaxes(V, -1, -2) @ X, 0.0)
    return np.einsum("...j,...jn->...n", u, hidden)


def clipped_squared_loss(u, V, X, y) -> np.ndarray | float:
    """Ê (yᵢ − g(xᵢ))² with g = Π_[−1,1] ∘ f the clipped network (Arora et al. 2021, Section 4):
    the squared loss the generalization bounds are stated for; X (d₀, n), y (n,); shape (…)."""
    y = checks.matrix(y, "y", ndim=1)
    f = outputs(u, V, X)
    if f.shape[-1] != y.shape[0]:
        raise ValueError(f"y must have one target per column of X ({f.shape[-1]}), got shape {y.shape}")
    loss = np.mean((y - np.clip(f, -1.0, 1.0)) ** 2, axis=-1)
    return float(loss) if loss.ndim == 0 else loss


def symmetrized(X, rng: np.random.Generator) -> np.ndarray:
    """The symmetrized sample: column i of X (d₀, n) multiplied by an independent Rademacher
    sign ζᵢ, drawn once (Arora et al. 2021, Section 4: the data of Theorem 12)."""
    X, rng = checks.matrix(X, "X"), checks.generator(rng, "rng")
    return X * rng.choice((-1.0, 1.0), size=X.shape[1])


def relu_dropout_training(
    X: np.ndarray,
    y: np.ndarray,
    u0: np.ndarray,
    V0: np.ndarray,
    retain,
    widths,
    lr,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    optimizer: str = "adam",
    progress: bool = True,
) -> Run:
    """Dropout training of R two-layer ReLU networks x ↦ Σₖ uₖ σ(vₖᵀx) (no biases) on the squared
    loss, all runs (any mix of dropout rates and widths) as one tensor program on the generator's
    device (float64 on the CPU, float32 on a GPU), through :func:`dropnb.engine.train`.

    X (d₀, n): the training inputs as columns, y (n,) their targets; u0 (R, d), V0 (R, d₀, d): the
    initial weights, of which run ρ uses the first ``widths[ρ]`` units, each kept with probability
    θ = ``retain[ρ]``. Each epoch draws for every run its own random order of the n samples; each
    step takes the next B of them (the last step of an epoch the rest), masks bₖ ~ Bernoulli(θ)
    per sample and unit, and updates with ``optimizer`` (``"adam"`` or ``"sgd"``, step size
    ``lr``) on the minibatch loss (1/B) Σ (y − Σₖ uₖ(bₖ/θ)σ(vₖᵀx))². Checkpoints: the start and
    the end. State ``u``, ``V``."""
    X = checks.matrix(X, "X")
    y = checks.matrix(y, "y", ndim=1)
    if y.shape != (X.shape[1],):
        raise ValueError(f"y must have one target per column of X ({X.shape[1]}), got shape {y.shape}")
    u0, V0 = checks.matrix(u0, "u0", ndim=2), checks.matrix(V0, "V0", ndim=3)
    if u0.shape[0] != V0.shape[0] or u0.shape[1] != V0.shape[2] or V0.shape[1] != X.shape[0]:
        raise ValueError(f"u0 and V0 must be (R, d) and (R, {X.shape[0]}, d), got {u0.shape} and {V0.shape}")
    runs, width = u0.shape
    retain = checks.per_run(retain, "retain", runs, checks.probability)
    widths = checks.run_widths(widths, runs, width)
    epochs, batch_size = checks.integer(epochs, "epochs"), checks.integer(batch_size, "batch_size")
    generator = checks.torch_generator(generator)
    optimizer = checks.choice(optimizer, "optimizer", ("adam", "sgd"))
    checks.flag(progress, "progress")
    n = X.shape[1]
    per_epoch = -(-n // batch_size)
    device = generator.device
    dtype = checks.float_dtype(None, device)
    tensor = lambda a, kind=dtype: torch.as_tensor(a, device=device, dtype=kind)  # noqa: E731
    inputs, targets = tensor(X.T), tensor(y)
    theta = tensor(retain)[:, None, None]
    in_use = (torch.arange(width, device=device)[None, :] < tensor(widths, torch.int64)[:, None]).to(dtype)[:, None, :]
    order = {}

    def batch(t: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = t % per_epoch
        if j == 0:
            order["now"] = torch.argsort(torch.rand((runs, n), generator=generator, device=device), dim=1)
        picked = order["now"][:, j * batch_size:(j + 1) * batch_size]
        uniform = torch.rand((runs, picked.shape[1], width), generator=generator, device=device, dtype=torch.float32)
        return picked, (uniform.to(dtype) < theta) * in_use / theta

    def loss(state: State, drawn) -> torch.Tensor:
        picked, masks = drawn
        hidden = torch.relu(torch.bmm(inputs[picked], state["V"]))
        out = (hidden * masks * state["u"][:, None, :]).sum(-1)
        return (targets[picked] - out).pow(2).mean(-1)

    steps = epochs * per_epoch
    return train(dict(u=tensor(u0), V=tensor(V0)), loss, Schedule.of(lr, steps), data=batch, optimizer=optimizer,
                 checkpoints=[0, steps], progress=progress, description="ReLU dropout training")
