"""Dropout training of two-layer ReLU networks in the lazy regime (Mianjy and Arora 2020).

The network of width m has fixed signs a ∈ {±1}^m on top and trained rows w_r below,
f(x; W) = m^{-1/2} Σ_r a_r σ(w_rᵀx), with the ReLU σ and no biases; dropout keeps hidden unit r
with probability θ, b_r ~ Bernoulli(θ), and the network it visits is
g(W; x, b) = m^{-1/2} Σ_r a_r b_r σ(w_rᵀx). The loss is the logistic loss in base 2,
ℓ(z) = log₂(1 + e^{−z}), and :func:`dropout_sgd` is the source's Algorithm 4: one fresh sample
and one mask per step, W ← Π_c(W − η∇ℓ(y g)), with Π_c the projection of every row onto the ball
of radius c; at test time the weights are θW.

Also here: the loss facts the proofs use (:func:`logistic`, :func:`logistic_slope`), the two data
laws of the chapter (:func:`sphere_margin_sampler`, :func:`circle_sampler`), the NTK margin of
a law on the circle certified by a linear program (:func:`circle_margin`) and its finite-width
counterpart at initialization (:func:`circle_tangent_margins`, Lemma 15), the probability that the
initialization leaves a ball (:func:`largest_row_tail`), and the constants of Theorem 14
(:func:`theorem14_constants`). :func:`relu_classifier_sgd` trains the k-class version,
m^{-1/2} A σ(Wx) with a top layer A (k × m), by dropout SGD on the cross-entropy, R runs at once
(a leading run dimension, on the generator's device, float64 on the CPU and float32 on a GPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.optimize import linprog
from scipy.stats import chi2

from . import checks
from .engine import Run, Schedule, State, check_checkpoints, descend

LN2 = math.log(2.0)


def logistic(z, base: float = 2.0) -> np.ndarray | float:
    """ℓ(z) = log_base(1 + e^{−z}), computed as logaddexp(0, −z)/ln(base)."""
    base = checks.number(base, "base", minimum=1.0, open_minimum=True)
    z = checks.matrix(z, "z", ndim=np.ndim(z), empty=True)
    value = np.logaddexp(0.0, -z) / math.log(base)
    return float(value) if value.ndim == 0 else value


def logistic_slope(z, base: float = 2.0) -> np.ndarray | float:
    """−ℓ'(z) = 1/((1 + e^{z}) ln(base)), the slope's magnitude (written Q in the proofs)."""
    base = checks.number(base, "base", minimum=1.0, open_minimum=True)
    z = checks.matrix(z, "z", ndim=np.ndim(z), empty=True)
    value = np.exp(-np.logaddexp(0.0, z)) / math.log(base)
    return float(value) if value.ndim == 0 else value


def network(W, a, X, mask=None) -> np.ndarray:
    """g(W; x, b) = m^{-1/2} Σ_r a_r b_r σ(w_rᵀx) for every column x of X (d, n), in float64;
    without a mask (b = 1) this is f(x; W). W (m, d), a (m,), mask (m,) or (m, n); or one input
    X (d, 1) under k masks, mask (m, k), which gives k outputs. The sums over units are
    matrix-vector products."""
    W, X = checks.matrix(W, "W"), checks.matrix(X, "X")
    a = checks.vector(a, "a")
    width = W.shape[0]
    if a.shape != (width,) or X.shape[0] != W.shape[1]:
        raise ValueError(f"a and X must be ({width},) and ({W.shape[1]}, n) for W of shape {W.shape}, "
                         f"got {a.shape} and {X.shape}")
    hidden = np.maximum(W @ X, 0.0)  # (m, n)
    if mask is None:
        return a @ hidden / math.sqrt(width)
    mask = checks.matrix(mask, "mask", ndim=np.ndim(mask))
    if mask.shape == (width,):
        return (a * mask) @ hidden / math.sqrt(width)
    if mask.ndim == 2 and mask.shape[0] == width and (mask.shape[1] == X.shape[1] or X.shape[1] == 1):
        if X.shape[1] == 1:  # one input, one mask a column
            return mask.T @ (a * hidden[:, 0]) / math.sqrt(width)
        return np.einsum("r,rn,rn->n", a, mask, hidden) / math.sqrt(width)
    raise ValueError(f"mask must be ({width},), ({width}, {X.shape[1]}) or, for one input, ({width}, k) for W of "
                     f"shape {W.shape} and X of shape {X.shape}, got {mask.shape}")


# ---------------------------------------------------------------------------------------------
# Data laws
# ---------------------------------------------------------------------------------------------

Sampler = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def sphere_margin_sampler(dim: int, gap: float, runs: int, generator: torch.Generator) -> Sampler:
    """Draws of the law D-lin: x uniform on the unit sphere of R^dim conditioned on |x₁| ≥ ``gap``,
    y = sign(x₁); ``sample(n)`` returns x (n, runs, dim) and y (n, runs), independent across runs,
    on the generator's device (rejection sampling from normalised Gaussians)."""
    dim = checks.integer(dim, "dim", minimum=2)
    gap = checks.number(gap, "gap", minimum=0.0, maximum=1.0, open_maximum=True)
    runs = checks.integer(runs, "runs")
    generator = checks.torch_generator(generator)
    device, dtype = generator.device, torch.get_default_dtype()

    def sample(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        wanted, kept = count * runs, []
        while wanted > 0:
            z = torch.randn((int(1.5 * wanted) + 64, dim), generator=generator, device=device, dtype=dtype)
            x = z / z.norm(dim=1, keepdim=True)
            x = x[x[:, 0].abs() >= gap][:wanted]
            kept.append(x)
            wanted -= x.shape[0]
        x = torch.cat(kept).reshape(count, runs, dim)
        return x, torch.sign(x[..., 0])

    return sample


def circle_law(labelling: Callable[[np.ndarray], np.ndarray], points: int, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """A law on the unit circle: the angles φ_k = 2πk/``points`` where |s(φ)| ≥ ``gap`` for the
    score s = ``labelling``(φ), each with label sign(s(φ)) and equal probability. Returns the angles
    and the labels (±1)."""
    labelling = checks.function(labelling, "labelling")
    points = checks.integer(points, "points", minimum=4)
    gap = checks.nonnegative(gap, "gap")
    angles = 2 * np.pi * np.arange(points) / points
    score = checks.vector(labelling(angles), "labelling(angles)")
    if score.shape != angles.shape:
        raise ValueError(f"labelling must return one score per angle, got shape {score.shape}")
    keep = np.abs(score) >= max(gap, 1e-12)
    if not keep.any():
        raise ValueError(f"gap leaves no point of the circle, got {gap!r}")
    return angles[keep], np.sign(score[keep])


def circle_sampler(angles, labels, runs: int, generator: torch.Generator) -> Sampler:
    """Draws of the discrete law of :func:`circle_law`: x = (cos φ, sin φ) with φ uniform among
    ``angles`` and its label; ``sample(n)`` returns x (n, runs, 2) and y (n, runs)."""
    angles, labels = checks.vector(angles, "angles"), checks.vector(labels, "labels")
    if labels.shape != angles.shape or not np.all(np.abs(labels) == 1):
        raise ValueError(f"labels must be ±1, one per entry of angles ({angles.size}), got {labels!r:.80}")
    runs = checks.integer(runs, "runs")
    generator = checks.torch_generator(generator)
    device, dtype = generator.device, torch.get_default_dtype()
    points = torch.as_tensor(np.stack([np.cos(angles), np.sin(angles)], 1), device=device, dtype=dtype)
    signs = torch.as_tensor(labels, device=device, dtype=dtype)

    def sample(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        k = torch.randint(0, angles.size, (count, runs), generator=generator, device=device)
        return points[k], signs[k]

    return sample


# ---------------------------------------------------------------------------------------------
# The NTK margin (Assumption 2)
# ---------------------------------------------------------------------------------------------

def arc_coverage(angles, bins: int) -> np.ndarray:
    """c_k(φ) = |B_k ∩ [φ − π/2, φ + π/2]|/(2π): the probability that a direction z, uniform on
    the circle, falls in bin B_k = [2πk/K, 2π(k+1)/K) and has zᵀx ≥ 0 for x = (cos φ, sin φ).
    Returns (len(angles), K); every row sums to 1/2."""
    angles = checks.vector(angles, "angles")
    bins = checks.integer(bins, "bins", minimum=2)
    width = 2 * np.pi / bins
    starts = width * np.arange(bins)
    low = (np.mod(angles, 2 * np.pi) - np.pi / 2)[:, None]
    overlap = np.zeros((angles.size, bins))
    for shift in (-2 * np.pi, 0.0, 2 * np.pi):  # the half circle may wrap around 0
        s = starts[None, :] + shift
        overlap += np.clip(np.minimum(s + width, low + np.pi) - np.maximum(s, low), 0.0, None)
    return overlap / (2 * np.pi)


@dataclass(frozen=True)
class CircleMargin:
    """The certified NTK margin of a law on the circle at θ = 1: ``margin`` = min_i y_i E_z⟨ξ(z),
    x_i 1[zᵀx_i ≥ 0]⟩ for the map ``xi`` (K, 2), constant on each of K angular bins of z and inside
    the unit disk; ``margins`` (n,): each point's value; ``solver_margin``: the linear program's
    optimum, which ``margin`` recomputes from the returned map."""

    margin: float
    margins: np.ndarray
    xi: np.ndarray
    solver_margin: float


def circle_margin(angles, labels, bins: int = 180, sides: int = 32) -> CircleMargin:
    """The largest margin γ over maps ξ that are constant on K = ``bins`` angular bins and lie in
    the regular polygon with ``sides`` sides inscribed in the unit circle (so ‖ξ‖ ≤ 1), by the
    linear program max t s.t. y_i Σ_k c_k(φ_i)⟨ξ_k, x_i⟩ ≥ t (HiGHS). Any feasible ξ certifies
    that Assumption 2 holds at θ = 1 with its margin: the value is a lower bound on the law's γ(1)."""
    angles, labels = checks.vector(angles, "angles"), checks.vector(labels, "labels")
    if labels.shape != angles.shape or not np.all(np.abs(labels) == 1):
        raise ValueError(f"labels must be ±1, one per entry of angles ({angles.size}), got {labels!r:.80}")
    bins, sides = checks.integer(bins, "bins", minimum=2), checks.integer(sides, "sides", minimum=3)
    coverage = arc_coverage(angles, bins)
    X = np.stack([np.cos(angles), np.sin(angles)], 1)
    # variables: ξ_k1, ξ_k2 for every bin, then t; maximise t
    rows = labels[:, None, None] * coverage[:, :, None] * X[:, None, :]  # (n, K, 2)
    A_margin = np.hstack([-rows.reshape(len(angles), 2 * bins), np.ones((len(angles), 1))])
    normals = np.stack([np.cos(2 * np.pi * np.arange(sides) / sides), np.sin(2 * np.pi * np.arange(sides) / sides)], 1)
    A_poly = np.zeros((bins * sides, 2 * bins + 1))
    for k in range(bins):
        A_poly[k * sides:(k + 1) * sides, 2 * k:2 * k + 2] = normals
    inradius = math.cos(math.pi / sides)
    cost = np.zeros(2 * bins + 1)
    cost[-1] = -1.0
    result = linprog(cost, A_ub=np.vstack([A_margin, A_poly]),
                     b_ub=np.concatenate([np.zeros(len(angles)), np.full(bins * sides, inradius)]),
                     bounds=[(None, None)] * (2 * bins + 1), method="highs")
    if result.status != 0:
        raise RuntimeError(f"the margin program failed: {result.message}")
    xi = result.x[:-1].reshape(bins, 2)
    norms = np.linalg.norm(xi, axis=1)
    xi = xi / np.maximum(norms, 1.0)[:, None]  # a solver's slack never leaves the unit disk
    margins = labels * np.einsum("nk,kj,nj->n", coverage, xi, X)
    return CircleMargin(margin=float(margins.min()), margins=margins, xi=xi, solver_margin=float(result.x[-1]))


def bin_of(W, bins: int) -> np.ndarray:
    """The angular bin k of each row w of W (…, 2): 2πk/K ≤ angle(w) < 2π(k + 1)/K."""
    W = checks.matrix(W, "W", ndim=1, batched=True)
    if W.shape[-1] != 2:
        raise ValueError(f"W must have rows in the plane, got shape {W.shape}")
    bins = checks.integer(bins, "bins", minimum=2)
    angle = np.mod(np.arctan2(W[..., 1], W[..., 0]), 2 * np.pi)
    return np.minimum((angle / (2 * np.pi / bins)).astype(int), bins - 1)


def circle_tangent_margins(angles, labels, xi, W1, retain: float, rng: np.random.Generator) -> np.ndarray:
    """The finite-width margins at initialization of a law on the circle (Lemma 15): for every point
    x_i = (cos φ_i, sin φ_i) with label y_i, y_i⟨∇g(W1; x_i, b_i), V⟩ = (1/m) Σ_r b_{r,i} 1[w_rᵀx_i ≥ 0] y_i⟨ξ(w_r), x_i⟩,
    with rows W1 (m, 2), the map ``xi`` (K, 2) constant on the K angular bins of :func:`bin_of`, and a fresh mask per
    point, b_{r,i} ~ Bernoulli(θ) (θ = ``retain``). Since ξ is constant on a bin, the kept active units of bin k
    number B_{k,i} ~ Binomial(N_{k,i}, θ), N_{k,i} the units of bin k in the half circle facing x_i, and the margin
    is (y_i/m) Σ_k B_{k,i}⟨ξ_k, x_i⟩: the same law as unit by unit, in O(Kn + m log m) operations instead of
    O(mn). Returns (n,)."""
    angles, labels = checks.vector(angles, "angles"), checks.vector(labels, "labels")
    if labels.shape != angles.shape or not np.all(np.abs(labels) == 1):
        raise ValueError(f"labels must be ±1, one per entry of angles ({angles.size}), got {labels!r:.80}")
    xi = checks.matrix(xi, "xi")
    if xi.shape[1] != 2 or xi.shape[0] < 2:
        raise ValueError(f"xi must hold one point of the plane per bin, (K, 2) with K ≥ 2, got shape {xi.shape}")
    W1 = checks.matrix(W1, "W1")
    if W1.shape[1] != 2:
        raise ValueError(f"W1 must have rows in the plane, got shape {W1.shape}")
    retain = checks.probability(retain, "retain")
    rng = checks.generator(rng)
    bins, width = xi.shape[0], W1.shape[0]
    unit_bin = bin_of(W1, bins)
    unit_angle = np.mod(np.arctan2(W1[:, 1], W1[:, 0]), 2 * np.pi)
    low = np.mod(angles, 2 * np.pi) - np.pi / 2  # the half circle facing x_i: [φ_i − π/2, φ_i + π/2]
    counts = np.zeros((bins, angles.size), dtype=np.int64)
    for k in range(bins):
        inside = np.sort(unit_angle[unit_bin == k])
        for shift in (-2 * np.pi, 0.0, 2 * np.pi):  # the half circle may wrap around 0
            counts[k] += (np.searchsorted(inside, low + shift + np.pi, side="right")
                          - np.searchsorted(inside, low + shift, side="left"))
    kept = counts if retain == 1 else rng.binomial(counts, retain)
    X = np.stack([np.cos(angles), np.sin(angles)])
    return labels * np.einsum("ki,ki->i", kept, xi @ X) / width


def largest_row_tail(radius: float, dim: int, width: int) -> float:
    """P(max_r ‖w_r‖ > ρ) for m = ``width`` independent rows w_r ~ N(0, I_d), the initialization of
    Algorithm 4: 1 − F_d(ρ²)^m with F_d the distribution function of χ²_d, computed as −expm1(m log1p(−P(χ²_d > ρ²)))."""
    radius = checks.nonnegative(radius, "radius")
    dim, width = checks.integer(dim, "dim"), checks.integer(width, "width")
    with np.errstate(divide="ignore"):  # ρ = 0: log1p(−1) = −∞, and the probability is 1
        return float(-np.expm1(width * np.log1p(-chi2.sf(radius**2, dim))))


# ---------------------------------------------------------------------------------------------
# Theorem 14's constants
# ---------------------------------------------------------------------------------------------

def theorem14_constants(gamma: float, width: float, dim: int, eta: float, steps) -> dict[str, np.ndarray]:
    """The constants of Theorem 14 for margin γ, width m, dimension d, step η and T steps:
    c = √d + max(1/(14γ²), 2√(ln m)) + 1, Λ = (5/γ) ln(2ηT) + √((44/γ²) ln(24ηc√m T²)) (the source's
    λ), the bound 4Λ²/(ηT) on the averaged error, and the width m ≥ 2401 γ^{-6} Λ² the theorem needs
    (solved for m by fixed-point iteration, since Λ grows with ln m). ``steps`` may be an array."""
    gamma = checks.number(gamma, "gamma", minimum=0.0, maximum=0.5, open_minimum=True)
    width = checks.number(width, "width", minimum=1.0)
    dim = checks.integer(dim, "dim")
    eta = checks.number(eta, "eta", minimum=0.0, maximum=LN2, open_minimum=True)
    T = checks.matrix(steps, "steps", ndim=np.ndim(steps), empty=True)
    if np.any(T < 1):
        raise ValueError(f"steps must be at least 1, got {steps!r}")

    def radius(m):
        return math.sqrt(dim) + np.maximum(1 / (14 * gamma**2), 2 * np.sqrt(np.log(m))) + 1

    def scale(m, T):
        c = radius(m)
        return 5 / gamma * np.log(2 * eta * T) + np.sqrt(44 / gamma**2 * np.log(24 * eta * c * np.sqrt(m) * T**2))

    required = 2401 * gamma**-6 * scale(2.0, T) ** 2
    for _ in range(100):
        updated = 2401 * gamma**-6 * scale(np.maximum(required, 2.0), T) ** 2
        if np.allclose(updated, required, rtol=1e-12):
            break
        required = updated
    lam = scale(width, T)
    return dict(c=np.asarray(radius(width)), scale=lam, bound=4 * lam**2 / (eta * T), required_width=required)


# ---------------------------------------------------------------------------------------------
# Algorithm 4
# ---------------------------------------------------------------------------------------------

def _slope_base2(z: torch.Tensor) -> torch.Tensor:
    """−ℓ'(z) for ℓ = log₂(1 + e^{−z})."""
    return torch.sigmoid(-z) / LN2


def _loss_base2(z: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(-z) / LN2


def dropout_sgd(
    sample: Sampler,
    W1,
    a,
    retain,
    eta: float,
    radius: float,
    steps: int,
    generator: torch.Generator,
    margin_map=None,
    competitor_scale=0.0,
    checkpoints=None,
    block: int = 512,
    keep: bool = False,
    dtype: torch.dtype | None = None,
    progress: bool = True,
) -> Run:
    """Algorithm 4 for R runs of one width m at once, as one tensor program on the generator's device.

    W1 (R, m, d) and a (R, m): the initial rows and the fixed top signs; θ = ``retain`` (R,) per run;
    ``sample(n)`` gives n steps of fresh samples, x (n, R, d) with ‖x‖ = 1 and y (n, R). Step t draws
    b_r ~ Bernoulli(θ), sets z = y g(W_t; x, b), Q = −ℓ'(z) and
    w_r ← Π_c(w_r + η Q y m^{-1/2} a_r b_r 1[w_rᵀx ≥ 0] x).

    Along the way every step records, per run, before its update (prequential, so each is an
    unbiased estimate of its risk given the past):

    * mistakes of the test-time network, y f(x; θW_t) ≤ 0, and of the visited one, y g ≤ 0 (a tie
      counts as a mistake);
    * Σ L_t(W_t) with L_t = ℓ(z), and, for the competitor U = W1 + ΛV of the proofs (V =
      ``margin_map`` (R, m, d), default 0; Λ = ``competitor_scale``, one per run or one for all),
      Σ L_t^{(t)}(U) with L_t^{(t)}(U) = ℓ(y⟨∇g_t(W_t), U⟩) (Lemma 12); the largest excess of the step inequality
      ‖W_{t+1} − U‖² − ‖W_t − U‖² + ηL_t(W_t) − 2ηL_t^{(t)}(U) ≤ 0 (5.3), with both distances read from the
      weights the step started from and the weights it left (after the projection), so a step that does not
      descend shows there; the largest ‖W_t − U‖² (``competitor_distance``, the scale of that check's
      rounding); the largest |y⟨∇g_t(W_t), U⟩| (Lemma 17);
    * the largest |g_t(W1)| (Lemma 14), the smallest y⟨∇g_t(W1), V⟩ (Lemma 15), the largest number of units whose activation differs from
      W1's (Lemma 16), and the largest (Σ_r b_r − θm)/√m (the width of the visited network);
    * the number of row projections that moved a row.

    At each checkpoint the metrics are these running values (sums and counts up to t) and the
    drift of the weights: max_r ‖w_r − w_{r,1}‖ and ‖W − W1‖_F; with ``keep`` the run also keeps W
    there. The run computes in ``dtype`` (default: float64 on a CPU, float32 on a GPU). State: ``W``.
    """
    sample = checks.function(sample, "sample")
    W1 = checks.tensor(W1, "W1", ndim=3)
    runs, width, dim = W1.shape
    a = checks.tensor(a, "a", ndim=2)
    if tuple(a.shape) != (runs, width) or not bool((a.abs() == 1).all()):
        raise ValueError(f"a must be ±1 of shape ({runs}, {width}) (the runs and rows of W1), got {checks._shown(a)}")
    retain = checks.per_run(retain, "retain", runs, checks.probability)
    eta = checks.number(eta, "eta", minimum=0.0, maximum=LN2, open_minimum=True)
    radius = checks.positive(radius, "radius")
    steps = checks.integer(steps, "steps")
    generator = checks.torch_generator(generator)
    block = checks.integer(block, "block")
    checks.flag(keep, "keep")
    checks.flag(progress, "progress")
    device = generator.device
    dtype = checks.float_dtype(dtype, device)
    W1 = W1.to(device=device, dtype=dtype)
    if bool((W1.norm(dim=-1) > radius).any()):
        raise ValueError(f"radius must be at least the largest row norm of W1, got {radius!r}")

    if margin_map is None:
        V = torch.zeros_like(W1)
    else:
        V = checks.tensor(margin_map, "margin_map", ndim=3)
        if tuple(V.shape) != (runs, width, dim):
            raise ValueError(f"margin_map must have the shape of W1 {(runs, width, dim)}, got {tuple(V.shape)}")
    scale = torch.as_tensor(checks.per_run(competitor_scale, "competitor_scale", runs, checks.nonnegative),
                            device=device, dtype=dtype)[:, None]
    fixed = torch.cat([W1, V.to(device=device, dtype=dtype)], dim=1)  # one product gives W1x and Vx
    a = a.to(device=device, dtype=dtype)
    theta = torch.as_tensor(retain, device=device, dtype=dtype)
    root = math.sqrt(width)
    zero = torch.zeros(runs, device=device, dtype=dtype)
    state = dict(W=W1.clone())
    competitor = W1 + scale[:, :, None] * V.to(device=device, dtype=dtype)  # U = W1 + ΛV
    distance = torch.linalg.vector_norm(W1 - competitor, dim=(1, 2)).square()  # ‖W_t − U‖², carried from step to step
    tally = dict(mistakes=zero.clone(), sub_mistakes=zero.clone(), loss=zero.clone(), competitor_loss=zero.clone(),
                 step_excess=torch.full_like(zero, -math.inf), competitor_distance=distance.clone(),
                 competitor_output=zero.clone(),
                 initial_output=zero.clone(), initial_margin=torch.full_like(zero, math.inf), flips=zero.clone(),
                 active_excess=torch.full_like(zero, -math.inf), projections=zero.clone())
    norms = dict(squared=W1.square().sum(-1), distance=distance, difference=torch.empty_like(W1))
    drawn: dict[str, torch.Tensor] = {}

    def rows_times(M, x):
        return torch.bmm(M, x[:, :, None])[..., 0]

    def step(t: int, _eta: float) -> None:
        j = t % block
        if j == 0:
            count = min(block, steps - t)
            x, y = sample(count)
            if tuple(x.shape) != (count, runs, dim) or tuple(y.shape) != (count, runs):
                raise ValueError(f"sample(n) must return x (n, {runs}, {dim}) and y (n, {runs}) for W1 of shape "
                                 f"{tuple(W1.shape)}, got {tuple(x.shape)} and {tuple(y.shape)} for n = {count}")
            drawn["x"], drawn["y"] = (v.to(device=device, dtype=dtype) for v in (x, y))
        x, y = drawn["x"][j], drawn["y"][j]
        b = (torch.rand((runs, width), generator=generator, device=device, dtype=dtype) < theta[:, None]).to(dtype)
        W = state["W"]
        pre, (pre1, pre_v) = rows_times(W, x), rows_times(fixed, x).split(width, dim=1)
        pre_u = pre1 + scale * pre_v
        active, active1 = (pre >= 0).to(dtype), (pre1 >= 0).to(dtype)
        ab = a * b
        full = theta * (a * pre * active).sum(-1) / root
        z = y * (ab * pre * active).sum(-1) / root
        z_u = y * (ab * active * pre_u).sum(-1) / root
        L, L_u = _loss_base2(z), _loss_base2(z_u)
        s = (eta * _slope_base2(z) * y / root)[:, None] * ab * active  # the row steps: w_r += s_r x
        tally["mistakes"] += (y * full <= 0).to(dtype)
        tally["sub_mistakes"] += (z <= 0).to(dtype)
        tally["loss"] += L
        tally["competitor_loss"] += L_u
        torch.maximum(tally["competitor_output"], z_u.abs(), out=tally["competitor_output"])
        torch.maximum(tally["initial_output"], ((ab * pre1 * active1).sum(-1) / root).abs(),
                      out=tally["initial_output"])
        torch.minimum(tally["initial_margin"], y * (ab * active1 * pre_v).sum(-1) / root, out=tally["initial_margin"])
        torch.maximum(tally["flips"], (active != active1).to(dtype).sum(-1), out=tally["flips"])
        torch.maximum(tally["active_excess"], (b.sum(-1) - theta * width) / root, out=tally["active_excess"])
        W.add_(s[:, :, None] * x[:, None, :])
        squared = norms["squared"].add_(2 * s * pre + s.square() * x.square().sum(-1, keepdim=True))
        over = (squared > radius**2) & (s != 0)  # a row the step left alone is in the ball already
        tally["projections"] += over.to(dtype).sum(-1)
        # On a GPU project every step, multiplying the rows inside the ball by exactly 1 (asking whether a
        # row left it would make the host wait for the device at every step); on the CPU, where asking is
        # free, only when one did. Both give the same numbers.
        if device.type != "cpu" or bool(over.any()):
            factor = torch.where(over, radius / squared.sqrt(), torch.ones_like(squared))
            W.mul_(factor[:, :, None])
            squared.mul_(factor.square())
        # (5.3) from the weights themselves: ‖W_{t+1} − U‖² against ‖W_t − U‖², the one carried from the last step
        distance = torch.linalg.vector_norm(torch.sub(W, competitor, out=norms["difference"]), dim=(1, 2)).square()
        torch.maximum(tally["step_excess"], distance - norms["distance"] + eta * L - 2 * eta * L_u,
                      out=tally["step_excess"])
        torch.maximum(tally["competitor_distance"], distance, out=tally["competitor_distance"])
        norms["distance"] = distance

    def metrics(state) -> dict[str, torch.Tensor]:
        drift = state["W"] - W1
        norms["squared"] = state["W"].square().sum(-1)  # no rounding drift between checkpoints
        return {**{name: value.clone() for name, value in tally.items()},
                "row_drift": drift.norm(dim=-1).amax(-1), "drift": drift.flatten(1).norm(dim=-1)}

    return descend(state, step, Schedule.constant(eta, steps), checkpoints=check_checkpoints(checkpoints, steps),
                   metrics=metrics, keep=keep, progress=progress, description="Algorithm 4")


def _check_classifier_data(X, labels, d: int, classes: int, name: str, label_name: str):
    """Inputs as columns (d, n) and integer class labels in [0, classes), one per column."""
    X = checks.matrix(X, name)
    labels = checks.matrix(labels, label_name, ndim=1)
    if X.shape[0] != d:
        raise ValueError(f"{name} must have d = {d} rows to match the columns of W0, got shape {X.shape}")
    if labels.shape != (X.shape[1],):
        raise ValueError(f"{label_name} must have one entry per column of {name} ({X.shape[1]}), got shape {labels.shape}")
    if np.any(labels != np.round(labels)) or labels.min() < 0 or labels.max() >= classes:
        raise checks.error(label_name, f"class indices in 0…{classes - 1} (the rows of A0)", labels)
    return X, labels.astype(np.int64)


def relu_classifier_sgd(
    X: np.ndarray,
    labels: np.ndarray,
    X_test: np.ndarray,
    labels_test: np.ndarray,
    W0: np.ndarray,
    A0: np.ndarray,
    retain,
    lr,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    fixed_masks: int = 0,
    train_top: bool = True,
    checkpoints=None,
    keep: bool = False,
    progress: bool = True,
) -> Run:
    """Dropout SGD on the cross-entropy of R two-layer ReLU classifiers in the NTK scaling,
    f(x) = m^{-1/2} A σ(Wx) (no biases), with Bernoulli dropout on the m hidden units, all runs
    (any mix of retain probabilities) as one tensor program on the generator's device (float64 on
    the CPU, float32 on a GPU), through :func:`dropnb.engine.descend` with the gradient written out.

    X (d, n): the training inputs as columns, ``labels`` (n,) their classes 0…k − 1; W0 (R, m, d)
    and A0 (R, k, m): the initial weights; run ρ keeps each unit with probability θ = ``retain[ρ]``.
    Each epoch draws for every run its own random order of the n samples; each step takes the next
    B = ``batch_size`` of them (the last step of an epoch the rest), a mask b ~ Bernoulli(θ)^m per
    sample, and takes a step of size ``lr`` on the minibatch loss (1/B) Σᵢ ce(g(xᵢ, bᵢ), yᵢ) of the
    sub-networks g(x, b) = m^{-1/2} A (b ⊙ σ(Wx)), unscaled (Algorithm 4 of Mianjy 2021, Chapter
    5): W ← W − η∇_W, and A ← A − η∇_A when ``train_top``. Draw order: one integer seeds a second
    generator for the evaluation masks; then per epoch float32 uniforms (R, n) whose argsort is the order,
    per step uniforms (R, B, m) in float32, b = [u < θ].

    Metrics at ``checkpoints`` (about 40 log-spaced steps if None), on X_test (d, n') and
    ``labels_test``: ``full_accuracy`` (R,), the test accuracy of the full network at test time,
    θf(x) (the weights scaled by θ); ``visited_accuracy`` (R,), that of a sub-network g(·, b) with
    one mask drawn afresh at each checkpoint, as training draws them; with ``fixed_masks`` = K > 0,
    ``fixed_accuracy`` (R, K), that of K sub-networks whose masks are drawn once, before training.
    The step reports each run's minibatch loss; state ``W``, ``A``.
    """
    W0, A0 = checks.matrix(W0, "W0", ndim=3), checks.matrix(A0, "A0", ndim=3)
    runs, width, dim = W0.shape
    if A0.shape[0] != runs or A0.shape[2] != width:
        raise ValueError(f"A0 must be (R, k, m) = ({runs}, k, {width}) to match W0, got shape {A0.shape}")
    classes = A0.shape[1]
    X, labels = _check_classifier_data(X, labels, dim, classes, "X", "labels")
    X_test, labels_test = _check_classifier_data(X_test, labels_test, dim, classes, "X_test", "labels_test")
    retain = checks.per_run(retain, "retain", runs, checks.probability)
    epochs, batch_size = checks.integer(epochs, "epochs"), checks.integer(batch_size, "batch_size")
    fixed_masks = checks.integer(fixed_masks, "fixed_masks", minimum=0)
    generator = checks.torch_generator(generator)
    checks.flag(train_top, "train_top")
    checks.flag(keep, "keep")
    checks.flag(progress, "progress")
    n = X.shape[1]
    per_epoch = -(-n // batch_size)
    schedule = Schedule.of(lr, epochs * per_epoch)
    device = generator.device
    dtype = checks.float_dtype(None, device)
    tensor = lambda a, kind=dtype: torch.as_tensor(a, device=device, dtype=kind)  # noqa: E731
    inputs, targets = tensor(X.T), tensor(labels, torch.int64)
    test_inputs, test_targets = tensor(X_test.T), tensor(labels_test, torch.int64)
    theta = tensor(retain)
    scale = width ** -0.5
    evaluation = torch.Generator(device=device)
    evaluation.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator, device=device).item()))
    fixed = (torch.rand((runs, fixed_masks, width), generator=evaluation, device=device, dtype=torch.float32).to(dtype)
             < theta[:, None, None]) if fixed_masks else None
    cap = 2**27 if device.type == "cuda" else 2**22  # numbers per evaluation block (cache-sized on a CPU)
    samples = max(1, cap // (runs * width))  # test samples per block of hidden activations
    per_block = max(1, cap // (runs * width * classes))  # fixed masks per block

    def metrics(state: State) -> dict[str, torch.Tensor]:
        W, A = state["W"], state["A"]
        visited = torch.rand((runs, 1, width), generator=evaluation, device=device, dtype=torch.float32).to(dtype) < theta[:, None, None]
        right = dict(full=torch.zeros(runs, device=device, dtype=dtype), visited=torch.zeros(runs, device=device, dtype=dtype))
        right_fixed = torch.zeros((runs, fixed_masks), device=device, dtype=dtype)
        for start in range(0, test_inputs.shape[0], samples):
            x, y = test_inputs[start:start + samples], test_targets[start:start + samples]
            hidden = torch.relu(torch.einsum("sd,rmd->rsm", x, W))  # (R, s, m)
            full = torch.bmm(hidden, A.transpose(1, 2)) * (scale * theta[:, None, None])
            right["full"] += (full.argmax(-1) == y).sum(-1)
            sub = torch.bmm(hidden * visited, A.transpose(1, 2)) * scale
            right["visited"] += (sub.argmax(-1) == y).sum(-1)
            for first in range(0, fixed_masks, per_block):
                masks = fixed[:, first:first + per_block]  # (R, K', m)
                top = (masks[..., None] * A.transpose(1, 2)[:, None]).transpose(1, 2).reshape(runs, width, -1)
                out = (torch.bmm(hidden, top) * scale).reshape(runs, x.shape[0], masks.shape[1], classes)
                right_fixed[:, first:first + per_block] += (out.argmax(-1) == y[None, :, None]).sum(1)
        count = test_inputs.shape[0]
        result = dict(full_accuracy=right["full"] / count, visited_accuracy=right["visited"] / count)
        if fixed_masks:
            result["fixed_accuracy"] = right_fixed / count
        return result

    state = dict(W=tensor(W0).clone(), A=tensor(A0).clone())  # the caller's arrays stay as they are
    order = {}

    def step(t: int, eta: float) -> torch.Tensor:
        j = t % per_epoch
        if j == 0:
            order["now"] = torch.argsort(torch.rand((runs, n), generator=generator, device=device, dtype=torch.float32),
                                          dim=1)
        picked = order["now"][:, j * batch_size:(j + 1) * batch_size]
        x, y = inputs[picked], targets[picked]  # (R, B, d), (R, B)
        uniform = torch.rand((runs, picked.shape[1], width), generator=generator, device=device, dtype=torch.float32)
        W, A = state["W"], state["A"]
        pre = torch.bmm(x, W.transpose(1, 2))  # (R, B, m)
        active = (uniform.to(dtype) < theta[:, None, None]) & (pre > 0)
        hidden = pre * active
        logits = torch.bmm(hidden, A.transpose(1, 2)) * scale  # (R, B, k)
        loss = (torch.logsumexp(logits, -1) - logits.gather(-1, y[..., None])[..., 0]).mean(-1)
        residual = torch.softmax(logits, -1)
        residual.scatter_add_(-1, y[..., None], -torch.ones_like(y[..., None], dtype=dtype))
        residual *= scale / picked.shape[1]  # ∂loss/∂(A b⊙σ(Wx)) per sample, with m^{-1/2}
        grad_A = torch.bmm(residual.transpose(1, 2), hidden)
        grad_W = torch.bmm((torch.bmm(residual, A) * active).transpose(1, 2), x)
        W.sub_(eta * grad_W)
        if train_top:
            A.sub_(eta * grad_A)
        return loss

    return descend(state, step, schedule, checkpoints=checkpoints, metrics=metrics, keep=keep, progress=progress,
                   description="ReLU classifier dropout SGD")
