"""Adversarial training of two-layer leaky-ReLU networks with the reflected loss (Mianjy 2021, Ch. 6).

The network f(x; a, W) = aᵀσ(Wx) has the leaky ReLU σ(z) = max{αz, z} (α ∈ (0, 1]; α = 1 is a
linear model), a fixed top layer a ∈ R^m and trained rows w_r (no 1/√m here). The attack set of an
input x is the ℓ2 ball of radius ν around it; z = y f(δ) is the margin at a point δ of the ball.
The loss is the logistic loss in natural log, ℓ(z) = ln(1 + e^{−z}), and the attack ascends the
*reflected* loss ℓ₋(z) = −ℓ(−z) = −ln(1 + e^{z}) (concave, decreasing):

* :func:`pgd_attack` is Algorithm 5, batched over runs and points: δ₁ = x,
  δ_{t+1} = Π(δ_t + η ∇_δ ℓ₋(y f(δ_t))), output the iterate δ_τ of smallest margin among δ₁…δ_T;
  also with the ordinary loss, and with normalised or sign steps (ℓ2 or ℓ∞ balls).
* :func:`adversarial_training` is Algorithm 6: one fresh sample per step, its attack δ_t, and
  W ← W − η∇_W ℓ(y f(δ_t; W)), recording the invariants of Lemma 19 along the way.

Also here: the reflected loss (:func:`reflected_logistic`; the loss and its slope are
:func:`dropnb.relu_lazy.logistic` and :func:`dropnb.relu_lazy.logistic_slope` with ``base=e``), the network
(:func:`leaky_relu`, :func:`network`), exact worst cases (:func:`worst_margin_plane` in the plane,
:func:`linear_worst_margin` for α = 1), a certified superset of the β-broken points
(:func:`beta_certificate`), and the multi-class toys of the source's Section 6.5
(:func:`multiclass_pgd`, :func:`grid_readings`, :func:`lattice_flip_count`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import checks
from .relu_lazy import logistic
from .engine import Run, Schedule, check_checkpoints, descend

LOSSES = ("reflected", "logistic")
RULES = ("raw", "normalized", "sign")
BALLS = ("l2", "linf")
READINGS = ("cross-entropy", "greedy target", "worst wrong class", "log(1 - p_y)", "one-vs-one",
            "literal reflection", "margin")


def _leak(alpha) -> float:
    return checks.number(alpha, "alpha", minimum=0.0, maximum=1.0, open_minimum=True)


def leaky_relu(z, alpha: float) -> np.ndarray | float:
    """σ(z) = max{αz, z}, elementwise, for a leak α ∈ (0, 1]."""
    alpha = _leak(alpha)
    z = checks.matrix(z, "z", ndim=np.ndim(z), empty=True)
    value = np.maximum(alpha * z, z)
    return float(value) if value.ndim == 0 else value


def reflected_logistic(z) -> np.ndarray | float:
    """ℓ₋(z) = −ℓ(−z) = −ln(1 + e^{z}), with ℓ the logistic loss in natural log (:func:`dropnb.relu_lazy.logistic`)."""
    z = checks.matrix(z, "z", ndim=np.ndim(z), empty=True)
    value = -np.asarray(logistic(-z, base=math.e))
    return float(value) if value.ndim == 0 else value


def _weights(W, a) -> tuple[np.ndarray, np.ndarray]:
    W, a = checks.matrix(W, "W"), checks.vector(a, "a")
    if a.shape != (W.shape[0],):
        raise ValueError(f"a must have one entry per row of W ({W.shape[0]}), got shape {a.shape}")
    return W, a


def network(W, a, X, alpha: float) -> np.ndarray:
    """f(x; a, W) = aᵀσ(Wx) for every row x of X (n, d), in float64; W (m, d), a (m,)."""
    W, a = _weights(W, a)
    X, alpha = checks.matrix(X, "X"), _leak(alpha)
    if X.shape[1] != W.shape[1]:
        raise ValueError(f"X must have {W.shape[1]} columns for W of shape {W.shape}, got {X.shape}")
    pre = X @ W.T
    return np.maximum(alpha * pre, pre) @ a


def worst_margin_plane(W, a, x, y: float, alpha: float, radius: float) -> tuple[float, np.ndarray]:
    """The exact min_{‖δ − x‖ ≤ ν} y f(δ) in the plane (d = 2) and a point attaining it.

    f is linear on each cone between consecutive lines w_rᵀδ = 0, so the minimum over the disk is
    attained at the origin (when in the disk), where a line meets the circle, or at x − ν g/‖g‖
    for the gradient g of y f on some cone; every candidate lies in the disk, so the smallest
    value among them is the minimum."""
    W, a = _weights(W, a)
    if W.shape[1] != 2:
        raise ValueError(f"W must have 2 columns (the plane), got shape {W.shape}")
    x = checks.vector(x, "x")
    if x.shape != (2,):
        raise ValueError(f"x must be a point of the plane, got shape {x.shape}")
    y = checks.number(y, "y")
    if y not in (-1.0, 1.0):
        raise checks.error("y", "a label ±1", y)
    alpha, radius = _leak(alpha), checks.positive(radius, "radius")
    candidates = [x + radius * np.array([math.cos(p), math.sin(p)]) for p in (0.0, math.pi / 2, math.pi, 1.5 * math.pi)]
    if np.linalg.norm(x) <= radius:
        candidates.append(np.zeros(2))
    for w in W:  # the line wᵀδ = 0 is spanned by u = (−w₂, w₁); solve ‖s u − x‖ = ν
        norm = float(np.linalg.norm(w))
        if norm == 0.0:
            continue
        u = np.array([-w[1], w[0]]) / norm
        b = float(u @ x)
        disc = b * b - float(x @ x) + radius**2
        if disc >= 0:
            candidates += [(b + s * math.sqrt(disc)) * u for s in (-1.0, 1.0)]
        angle = math.atan2(u[1], u[0])  # probe both sides of the line: every cone's gradient
        for side in (-1e-7, 1e-7):
            for turn in (0.0, math.pi):
                probe = np.array([math.cos(angle + turn + side), math.sin(angle + turn + side)])
                slope = np.where(W @ probe >= 0, 1.0, alpha)
                g = y * (W.T @ (a * slope))
                if np.linalg.norm(g) > 0:
                    candidates.append(x - radius * g / np.linalg.norm(g))
    points = np.array(candidates)
    margins = y * network(W, a, points, alpha)
    best = int(np.argmin(margins))
    return float(margins[best]), points[best]


def linear_worst_margin(w, X, y, radius: float) -> np.ndarray:
    """min_{‖δ − x‖ ≤ ν} y wᵀδ = y wᵀx − ν‖w‖ for every row x of X (n, d) with labels y (n,)."""
    w, X, y = checks.vector(w, "w"), checks.matrix(X, "X"), checks.vector(y, "y")
    if X.shape[1] != w.size or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, {w.size}) for w of size {w.size}, and y (n,), got {X.shape} and {y.shape}")
    return y * (X @ w) - checks.nonnegative(radius, "radius") * np.linalg.norm(w)


def beta_certificate(W, a, X, y, alpha: float, radius: float, beta: float) -> np.ndarray:
    """The points of X (n, d) with labels y (n,) that may be β-broken, a superset of those that are:
    y f(x; a, W̄) < ν Σ_r |a_r| ‖w̄_r‖ − β with W̄ = W/‖W‖_F. Each unit is 1-Lipschitz, so
    |f(δ; a, W̄) − f(x; a, W̄)| ≤ Σ_r |a_r| ‖w̄_r‖ ‖δ − x‖, and a point outside the set has
    min_{‖δ − x‖ ≤ ν} y f(δ; a, W̄) ≥ −β; the share of flagged points bounds L_β(W) from above on X."""
    W, a = _weights(W, a)
    X, y = checks.matrix(X, "X"), checks.vector(y, "y")
    if X.shape[1] != W.shape[1]:
        raise ValueError(f"X must have {W.shape[1]} columns for W of shape {W.shape}, got {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per row of X ({X.shape[0]}), got shape {y.shape}")
    radius, beta = checks.nonnegative(radius, "radius"), checks.nonnegative(beta, "beta")
    norm = float(np.linalg.norm(W))
    if norm == 0.0:
        raise ValueError("W must not be zero: the β-robust error normalises it")
    lipschitz = float(np.abs(a) @ np.linalg.norm(W, axis=1)) / norm
    return y * network(W, a, X, alpha) / norm < radius * lipschitz - beta


# ---------------------------------------------------------------------------------------------
# Algorithm 5
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attack:
    """What :func:`pgd_attack` returns (torch tensors): ``point`` (R, n, d) the selected iterate
    δ_τ, ``margin`` (R, n) its margin y f(δ_τ), ``steps`` (R,) the iterates each run searched,
    and with ``keep``, ``path`` (T, R, n, d) the iterates δ₁…δ_T and ``margins`` (T, R, n)."""

    point: torch.Tensor
    margin: torch.Tensor
    steps: torch.Tensor
    path: torch.Tensor | None = None
    margins: torch.Tensor | None = None


def _margin_and_gradient(W, a, delta, y, alpha):
    """z = y f(δ) (R, n) and ∇_δ f(δ) (R, n, d) for W (R, m, d), a (R, m), δ (R, n, d)."""
    pre = torch.einsum("rmd,rnd->rnm", W, delta)
    slope = torch.where(pre >= 0, torch.ones_like(pre), torch.full_like(pre, alpha))
    weights = a[:, None, :] * slope
    return y * (weights * pre).sum(-1), torch.einsum("rnm,rmd->rnd", weights, W)


def pgd_attack(W, a, x, y, alpha: float, radius: float, eta, steps, loss: str = "reflected", rule: str = "raw",
               ball: str = "l2", keep: bool = False) -> Attack:
    """Algorithm 5 for R networks and n inputs each: W (R, m, d), a (R, m), x (R, n, d), y (R, n) ±1.

    δ₁ = x and δ_{t+1} = Π(δ_t + η s_t) with the ascent direction g = ∇_δ L(y f(δ_t)), L = ℓ₋
    (``loss="reflected"``: g = −σ(z) y∇f) or ℓ (``"logistic"``: g = −σ(−z) y∇f), and s = g (``raw``),
    g/‖g‖ (``normalized``) or sign(g) (``sign``); Π projects onto the ball of radius ν around x in
    ℓ2 or ℓ∞. Returns δ_τ with τ ∈ argmin_{t ≤ T} y f(δ_t) (the first on ties), T = ``steps`` (a
    number, or one per run, up to which that run searches); η is a number or one per run. a, x and y
    are moved to W's device and dtype."""
    W = checks.tensor(W, "W", ndim=3)
    runs, width, dim = W.shape
    a, x, y = checks.tensor(a, "a"), checks.tensor(x, "x", ndim=3), checks.tensor(y, "y")
    if tuple(a.shape) != (runs, width) or x.shape[0] != runs or x.shape[2] != dim or tuple(y.shape) != tuple(x.shape[:2]):
        raise ValueError(f"a, x and y must be ({runs}, {width}), ({runs}, n, {dim}) and ({runs}, n) for W of shape "
                         f"{tuple(W.shape)}, got {tuple(a.shape)}, {tuple(x.shape)} and {tuple(y.shape)}")
    if not bool((y.abs() == 1).all()):
        raise ValueError(f"y must be labels ±1, got {checks._shown(y)}")
    alpha, radius = _leak(alpha), checks.positive(radius, "radius")
    loss, rule = checks.choice(loss, "loss", LOSSES), checks.choice(rule, "rule", RULES)
    ball = checks.choice(ball, "ball", BALLS)
    checks.flag(keep, "keep")
    device, dtype = W.device, W.dtype
    a, x, y = (v.to(device=device, dtype=dtype) for v in (a, x, y))
    eta = torch.as_tensor(checks.per_run(eta, "eta", runs, checks.positive), device=device, dtype=dtype)
    steps = checks.per_run(steps, "steps", runs, checks.whole)
    count = torch.as_tensor(steps, device=device, dtype=dtype)
    return _pgd(W, a, x, y, alpha, radius, eta, count, int(np.max(steps)), loss, rule, ball, keep)


def _pgd(W, a, x, y, alpha: float, radius: float, eta: torch.Tensor, count: torch.Tensor, horizon: int, loss: str,
         rule: str, ball: str, keep: bool) -> Attack:
    """Algorithm 5 on validated tensors: η (R,) and T (R,) per run, for ``horizon`` ≥ max T steps (a run
    stops improving its point after its own T)."""
    device, dtype = W.device, W.dtype
    eta = eta[:, None, None]
    if isinstance(radius, torch.Tensor):
        radius = radius[:, None, None]
    delta = x.clone()
    best, best_margin = x.clone(), torch.full(y.shape, math.inf, device=device, dtype=dtype)
    path, margins = [], []
    for t in range(horizon):
        z, grad = _margin_and_gradient(W, a, delta, y, alpha)
        better = (z < best_margin) & (t < count)[:, None]
        best = torch.where(better[..., None], delta, best)
        best_margin = torch.where(better, z, best_margin)
        if keep:
            path.append(delta.clone())
            margins.append(z)
        factor = -torch.sigmoid(z) if loss == "reflected" else -torch.sigmoid(-z)
        g = (factor * y)[..., None] * grad
        if rule == "normalized":
            norm = g.norm(dim=-1, keepdim=True)
            g = torch.where(norm > 0, g / torch.where(norm > 0, norm, torch.ones_like(norm)), torch.zeros_like(g))
        elif rule == "sign":
            g = torch.sign(g)
        moved = delta + eta * g - x
        if ball == "l2":
            length = moved.norm(dim=-1, keepdim=True)
            moved = torch.where(length > radius, moved * (radius / torch.where(length > 0, length, torch.ones_like(length))),
                                moved)
        else:
            moved = torch.maximum(torch.minimum(moved, radius + 0 * moved), -radius + 0 * moved)
        delta = x + moved
    return Attack(point=best, margin=best_margin, steps=count,
                  path=torch.stack(path) if keep else None, margins=torch.stack(margins) if keep else None)


# ---------------------------------------------------------------------------------------------
# Algorithm 6
# ---------------------------------------------------------------------------------------------

def adversarial_training(sample, W1, a, alpha: float, radius: float, eta: float, steps: int, generator: torch.Generator,
                         attack_rate: float = 1.0, attack_steps: int = 20, accuracy: float | None = None,
                         direction=None, margin: float = 0.0, loss: str = "reflected", checkpoints=None,
                         keep: bool = False, dtype: torch.dtype | None = None, progress: bool = True) -> Run:
    """Algorithm 6 for R runs at once on the generator's device, in ``dtype`` (default: float64 on the
    CPU, float32 on a GPU).

    W1 (R, m, d), a (R, m); ν = ``radius`` and η = ``eta`` are numbers or one per run; ``sample(n)`` gives x (n, R, d), y (n, R) as in
    :func:`dropnb.relu_lazy.sphere_margin_sampler`. Step t draws (x_t, y_t), attacks it with
    :func:`pgd_attack` (step η_atk = c/(κ²m‖W_t‖_F²), c = ``attack_rate``, κ = max_r |a_r|; T_atk =
    ``attack_steps``, or min(T_atk, ⌈8ν²/(η_atk ϵ)⌉) with ϵ = ``accuracy``), sets z_t = y_t f(δ_t; W_t),
    Q_t = −ℓ'(z_t) = 1/(1 + e^{z_t}) and w_r ← w_r + η Q_t y_t a_r σ'(w_rᵀδ_t) δ_t.

    Recorded per run, as running values up to each checkpoint (prequential):

    * ``mistakes``: steps whose attacked point is misclassified, z_t ≤ 0; ``slope``: Σ_t Q_t;
    * ``norm_excess``: max_t (‖W_{t+1}‖_F² − ‖W_t‖_F²)/η (Lemma 19: at most 3);
    * with the unit ``direction`` v* (d,) and the data's ``margin`` γ: for V* with rows
      sign(a_r) v*/√m and Ĥ_t = ⟨W_t, V*⟩, ``increment`` min_t (Ĥ_{t+1} − Ĥ_t)/(η Q_t α √m (γ − ν)),
      which Lemma 19 bounds below by κ when every |a_r| = κ (and by min_r |a_r| in general);
      ``increment_failures`` the steps where it is below max_r |a_r|; ``proof_ratio`` min and
      ``proof_ratio_max`` max of (Ĥ_{t+1} − Ĥ_t)/(η Q_t (κ/√m) Σ_r σ'(w_rᵀδ_t) y_t⟨δ_t, v*⟩), the
      proof's expression for the increment;
    * ``ball_excess``: max_t ‖δ_t − x_t‖ − ν; ``attack_work``: Σ_t T_atk,t.

    At each checkpoint also ``norm`` ‖W_t‖_F and ``progress_h`` Ĥ_t; with ``keep``, W. State: ``W``.
    """
    sample = checks.function(sample, "sample")
    W1 = checks.tensor(W1, "W1", ndim=3)
    runs, width, dim = W1.shape
    a = checks.tensor(a, "a")
    if tuple(a.shape) != (runs, width) or not bool((a != 0).all()):
        raise ValueError(f"a must be non-zero, of shape ({runs}, {width}) (the runs and rows of W1), "
                         f"got {checks._shown(a)}")
    alpha, steps = _leak(alpha), checks.integer(steps, "steps")
    generator = checks.torch_generator(generator)
    device = generator.device
    dtype = checks.float_dtype(dtype, device)
    radius = torch.as_tensor(checks.per_run(radius, "radius", runs, checks.nonnegative), device=device, dtype=dtype)
    eta = torch.as_tensor(checks.per_run(eta, "eta", runs, checks.positive), device=device, dtype=dtype)
    attack_rate = checks.positive(attack_rate, "attack_rate")
    attack_steps = checks.integer(attack_steps, "attack_steps")
    if accuracy is not None:
        accuracy = checks.positive(accuracy, "accuracy")
    margin = checks.nonnegative(margin, "margin")
    loss = checks.choice(loss, "loss", LOSSES)
    checks.flag(keep, "keep")
    checks.flag(progress, "progress")
    W1, a = W1.to(device=device, dtype=dtype), a.to(device=device, dtype=dtype)
    if direction is None:
        v = torch.zeros(dim, device=device, dtype=dtype)
    else:
        v = checks.tensor(direction, "direction", ndim=1).to(device=device, dtype=dtype)
        if tuple(v.shape) != (dim,) or abs(float(v.norm()) - 1) > 1e-12:
            raise ValueError(f"direction must be a unit vector of R^{dim} (the rows of W1), "
                             f"got {checks._shown(direction)}")
    root = math.sqrt(width)
    kappa = a.abs().amax(-1)  # (R,)
    V = torch.sign(a)[:, :, None] * v / root  # (R, m, d)
    zero = torch.zeros(runs, device=device, dtype=dtype)
    tally = dict(mistakes=zero.clone(), slope=zero.clone(), norm_excess=torch.full_like(zero, -math.inf),
                 increment=torch.full_like(zero, math.inf), increment_failures=zero.clone(),
                 proof_ratio=torch.full_like(zero, math.inf), proof_ratio_max=torch.full_like(zero, -math.inf),
                 ball_excess=torch.full_like(zero, -math.inf), attack_work=zero.clone())
    state = dict(W=W1.clone())
    scale = alpha * root * (margin - radius)

    def step(t: int, _eta: float) -> None:
        x, y = sample(1)
        if tuple(x.shape) != (1, runs, dim) or tuple(y.shape) != (1, runs):
            raise ValueError(f"sample(n) must return x (n, {runs}, {dim}) and y (n, {runs}), got {tuple(x.shape)} "
                             f"and {tuple(y.shape)} for n = 1")
        x, y = x[0].to(device=device, dtype=dtype), y[0].to(device=device, dtype=dtype)
        W = state["W"]
        squared = W.square().sum((1, 2))
        rate = attack_rate / (kappa**2 * width * squared)
        count = torch.full_like(rate, float(attack_steps))
        if accuracy is not None:
            count = torch.clamp(torch.ceil(8 * radius**2 / (rate * accuracy)), min=1.0, max=float(attack_steps))
        # On a GPU every attack runs T_atk steps (the runs past their own count masked), since reading the
        # largest count back would make the host wait for the device at every step; on the CPU it is free.
        horizon = int(count.max()) if accuracy is not None and device.type == "cpu" else attack_steps
        attack = _pgd(W, a, x[:, None, :], y[:, None], alpha, radius, rate, count, horizon, loss, "raw", "l2", False)
        delta = attack.point[:, 0]
        pre = torch.bmm(W, delta[:, :, None])[..., 0]
        slope = torch.where(pre >= 0, torch.ones_like(pre), torch.full_like(pre, alpha))
        z = y * (a * slope * pre).sum(-1)
        Q = torch.sigmoid(-z)
        update = (eta * Q * y)[:, None, None] * (a * slope)[:, :, None] * delta[:, None, :]
        gain = (update * V).flatten(1).sum(-1)
        projected = y * (delta @ v)
        tally["mistakes"] += (z <= 0).to(dtype)
        tally["slope"] += Q
        tally["ball_excess"] = torch.maximum(tally["ball_excess"], (delta - x).norm(dim=-1) - radius)
        tally["attack_work"] += attack.steps
        if direction is not None:
            ratio = gain / (eta * Q * scale)
            tally["increment"] = torch.minimum(tally["increment"], ratio)
            tally["increment_failures"] += (ratio < kappa).to(dtype)
            printed = gain / (eta * Q * kappa / root * slope.sum(-1) * projected)
            tally["proof_ratio"] = torch.minimum(tally["proof_ratio"], printed)
            tally["proof_ratio_max"] = torch.maximum(tally["proof_ratio_max"], printed)
        W.add_(update)
        tally["norm_excess"] = torch.maximum(tally["norm_excess"], (W.square().sum((1, 2)) - squared) / eta)

    def metrics(state) -> dict[str, torch.Tensor]:
        return {**{name: value.clone() for name, value in tally.items()},
                "norm": state["W"].flatten(1).norm(dim=-1), "progress_h": (state["W"] * V).flatten(1).sum(-1)}

    return descend(state, step, Schedule.constant(float(eta.max()), steps),
                   checkpoints=check_checkpoints(checkpoints, steps), metrics=metrics, keep=keep, progress=progress,
                   description="Algorithm 6")


# ---------------------------------------------------------------------------------------------
# Multi-class toys (Section 6.5)
# ---------------------------------------------------------------------------------------------

def _softmax_terms(Z: np.ndarray, y: int):
    shifted = Z - Z.max(-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return log_p


def multiclass_pgd(W, x, y: int, radius: float, step: float, steps: int, loss: str = "cross-entropy",
                   target: int | None = None) -> np.ndarray:
    """ℓ2 PGD with normalised steps on the linear classifier z = W x' (classes are rows of W):
    x'₁ = x, x'_{t+1} = Π(x'_t + s ∇L/‖∇L‖) over the ball of radius ν around x, for
    L = −ln p_y (``cross-entropy``), ln p_j with j the most likely wrong class re-chosen at every step
    (``greedy``, the greedy reflected attack), or ln p_target (``targeted``). Returns the path
    (steps + 1, d)."""
    W, x = checks.matrix(W, "W"), checks.vector(x, "x")
    if x.shape != (W.shape[1],):
        raise ValueError(f"x must have {W.shape[1]} entries for W of shape {W.shape}, got {x.shape}")
    y = checks.integer(y, "y", minimum=0, maximum=W.shape[0] - 1)
    radius, step = checks.positive(radius, "radius"), checks.positive(step, "step")
    steps = checks.integer(steps, "steps")
    loss = checks.choice(loss, "loss", ("cross-entropy", "greedy", "targeted"))
    if loss == "targeted":
        if target is None:
            raise ValueError("target must be a class for loss='targeted', got None")
        target = checks.integer(target, "target", minimum=0, maximum=W.shape[0] - 1)
    path = [x.copy()]
    point = x.copy()
    for _ in range(steps):
        Z = W @ point
        p = np.exp(_softmax_terms(Z, y))
        if loss == "cross-entropy":
            g = -(W[y] - p @ W)
        else:
            j = target if loss == "targeted" else int(np.argmax(np.where(np.arange(W.shape[0]) == y, -np.inf, Z)))
            g = W[j] - p @ W
        norm = np.linalg.norm(g)
        moved = point + (step * g / norm if norm > 0 else 0.0) - x
        length = np.linalg.norm(moved)
        point = x + (moved * radius / length if length > radius else moved)
        path.append(point.copy())
    return np.array(path)


def _grid(box: float, points: int, endpoints: bool = True) -> np.ndarray:
    """The grid values of one axis: ``points`` values from −b to b with both ends (a closed box), or,
    with ``endpoints=False``, the ``points`` inner values of ``points + 2`` from −b to b (inside the open box)."""
    return np.linspace(-box, box, points) if endpoints else np.linspace(-box, box, points + 2)[1:-1]


def _box_grid(x, y, radius, box, points, endpoints=True):
    x = checks.vector(x, "x")
    y = checks.integer(y, "y", minimum=0, maximum=x.size - 1)
    radius, box = checks.positive(radius, "radius"), checks.positive(box, "box")
    points = checks.integer(points, "points", minimum=2)
    checks.flag(endpoints, "endpoints")
    if x.size != 3:
        raise ValueError(f"x must have 3 entries (three classes), got {x.size}")
    return x, y, radius, box, points, endpoints


# Lipschitz constant in δ (ℓ2) of every reading of :data:`READINGS`: the gradients in z are p − e_y, e_j − p,
# q − p (q, p probability vectors), Σ_j σ(·)(e_j − e_y) over two classes, a softmax of −z, and a logistic of the
# margin, whose own gradient is e_y − e_j; each has norm at most √2, the one-versus-one sum at most 2√2.
_READING_LIPSCHITZ = 2 * math.sqrt(2)


def _reading_scores(Z: np.ndarray, x: np.ndarray, y: int, names=READINGS) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The readings ``names`` of :data:`READINGS` at the logits Z (n, 3), and the multi-class margins
    z_y − max_{j≠y} z_j."""
    others = [j for j in range(3) if j != y]
    log_p = _softmax_terms(Z, y)
    margin = Z[:, y] - Z[:, others].max(-1)
    formulas = {
        "cross-entropy": lambda: -log_p[:, y],
        "greedy target": lambda: log_p[:, others[int(np.argmax(x[others]))]],
        "worst wrong class": lambda: log_p[:, others].max(-1),
        "log(1 - p_y)": lambda: np.log1p(-np.exp(log_p[:, y])),
        "one-vs-one": lambda: -np.logaddexp(0.0, Z[:, [y]] - Z[:, others]).sum(-1),
        "literal reflection": lambda: _softmax_terms(-Z, y)[:, y],
        "margin": lambda: -np.logaddexp(0.0, margin),
    }
    return {name: formulas[name]() for name in names}, margin


def _ball_runs(s: np.ndarray, grid: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """For each partial sum s of squares, the run lo ≤ k < hi of the increasing ``grid`` whose values g meet
    fl(s + fl(g²)) ≤ ``bound``, exactly: that set is a run, since fl(g²) grows with |g| and fl(s + q) with q;
    a first guess by bisection at ±√(bound − s) is corrected one entry at a time with the floating-point test."""
    n = grid.size
    half = np.sqrt(np.maximum(bound - s, 0.0))
    lo, hi = np.searchsorted(grid, -half, side="left"), np.searchsorted(grid, half, side="right")

    def inside(k):
        g = grid[np.clip(k, 0, n - 1)]
        return (k >= 0) & (k < n) & (s + g * g <= bound)

    while True:
        moves = [inside(lo - 1), ~inside(lo) & (lo < hi), inside(hi), ~inside(hi - 1) & (lo < hi)]
        if not any(m.any() for m in moves):
            return lo, np.maximum(hi, lo)
        lo = lo - moves[0] + moves[1]
        hi = hi + moves[2] - moves[3]


def grid_readings(x, y: int, radius: float, box: float, points: int, top: int = 1000,
                  endpoints: bool = True, block: int = 8) -> dict[str, np.ndarray]:
    """The grid search of the source's Figure 6-2 for the identity classifier z = x + δ: among the δ of
    the grid G³ (G = ``points`` values per axis on [−b, b], b = ``box``, see ``endpoints``) with
    ‖δ‖ ≤ ν (tested as fl(fl(δ₁² + δ₂²) + δ₃²) ≤ fl(ν²)), the ``top`` of highest score for each reading of
    the multi-class reflected loss (:data:`READINGS`), ties broken by position (first axis slowest). Returns,
    for each reading, the multi-class margins z_y − max_{j≠y} z_j of those points in rank order (a negative
    margin is a label flip), and ``"feasible"``, the number of grid points in the ball.

    Exact without scoring every point (branch and bound): the grid is cut into cubes of ``block``³ points;
    every reading is 2√2-Lipschitz in δ, so no point of a cube scores more than the cube's centre plus
    2√2 times its half-diagonal (plus 10⁻⁹ for rounding); the cubes are scored in decreasing order of that
    bound until the next bound falls below the ``top``-th best score found."""
    x, y, radius, box, points, endpoints = _box_grid(x, y, radius, box, points, endpoints)
    top = checks.integer(top, "top")
    block = checks.integer(block, "block")
    grid = _grid(box, points, endpoints)
    bound = radius * radius
    D1, D2 = (v.ravel() for v in np.meshgrid(grid, grid, indexing="ij"))
    lo, hi = _ball_runs(D1 * D1 + D2 * D2, grid, bound)
    feasible = int(np.sum(hi - lo))
    starts = np.arange(0, points, block)
    ends = np.minimum(starts + block, points)
    low, high = grid[starts], grid[ends - 1]
    centre, half = (low + high) / 2, (high - low) / 2
    # cubes that meet the ball: the nearest point of the cube to the origin is within ν
    near = np.where(low > 0, low, np.where(high < 0, -high, 0.0))
    cubes = np.stack([v.ravel() for v in np.meshgrid(*(np.arange(starts.size),) * 3, indexing="ij")], 1)
    cubes = cubes[(near[cubes] ** 2).sum(1) <= bound * (1 + 1e-12)]
    reach = _READING_LIPSCHITZ * np.sqrt((half[cubes] ** 2).sum(1)) + 1e-9
    centre_scores, _ = _reading_scores(x + centre[cubes], x, y)
    result = {}
    for name in READINGS:
        order = np.argsort(-(centre_scores[name] + reach), kind="stable")
        ceiling = (centre_scores[name] + reach)[order]
        best_score, best_index, best_margin = np.empty(0), np.empty(0, dtype=np.int64), np.empty(0)
        done = 0
        while done < order.size:
            if best_score.size >= top and ceiling[done] < best_score[top - 1]:
                break
            batch = order[done:done + 64]
            done += batch.size
            pieces = []
            for c in cubes[batch]:
                axes = np.meshgrid(*(np.arange(starts[v], ends[v]) for v in c), indexing="ij")
                pieces.append(np.stack([v.ravel() for v in axes], 1))
            index = np.concatenate(pieces)
            d1, d2, d3 = grid[index[:, 0]], grid[index[:, 1]], grid[index[:, 2]]
            inside = d1 * d1 + d2 * d2 + d3 * d3 <= bound
            index = index[inside]
            Z = np.stack([x[0] + grid[index[:, 0]], x[1] + grid[index[:, 1]], x[2] + grid[index[:, 2]]], 1)
            scores, margins = _reading_scores(Z, x, y, (name,))
            linear = (index[:, 0] * points + index[:, 1]) * points + index[:, 2]
            best_score = np.concatenate([best_score, scores[name]])
            best_index = np.concatenate([best_index, linear])
            best_margin = np.concatenate([best_margin, margins])
            keep = np.lexsort((best_index, -best_score))[:top]
            best_score, best_index, best_margin = best_score[keep], best_index[keep], best_margin[keep]
        result[name] = best_margin
    result["feasible"] = np.array(feasible)
    return result


def lattice_flip_count(x, y: int, radius: float, box: float, points: int, endpoints: bool = True) -> int:
    """The number of δ of the grid of :func:`grid_readings` in the ball (the same floating-point test) whose
    logits z = x + δ put another class strictly above y (z_y < max_{j≠y} z_j, ties not counted), counted
    without visiting the points: for each pair (δ₁, δ₂) of the first two axes, the values of δ₃ in the ball
    form a run of the grid, and so do the flipping ones (z₃ = x₃ + δ₃ grows with δ₃); both runs are found
    by bisection and corrected with the exact floating-point tests, so the count is exact, points on the
    sphere included."""
    x, y, radius, box, points, endpoints = _box_grid(x, y, radius, box, points, endpoints)
    grid = _grid(box, points, endpoints)
    D1, D2 = (v.ravel() for v in np.meshgrid(grid, grid, indexing="ij"))
    lo, hi = _ball_runs(D1 * D1 + D2 * D2, grid, radius * radius)
    z1, z2, z3 = x[0] + D1, x[1] + D2, x[2] + grid  # z₃ does not decrease along the grid
    n = points

    def first_above(level):  # the first k with z₃[k] > level, exactly
        k = np.searchsorted(z3, level, side="right")
        while True:
            up = (k < n) & ~(z3[np.minimum(k, n - 1)] > level)
            down = (k > 0) & (z3[np.maximum(k - 1, 0)] > level)
            if not (up.any() or down.any()):
                return k
            k = k + up - down

    if y == 2:  # a flip needs z₃ < max(z₁, z₂): the δ₃ before the first with z₃ ≥ that level
        level = np.maximum(z1, z2)
        k = np.searchsorted(z3, level, side="left")
        while True:
            up = (k < n) & (z3[np.minimum(k, n - 1)] < level)
            down = (k > 0) & ~(z3[np.maximum(k - 1, 0)] < level)
            if not (up.any() or down.any()):
                break
            k = k + up - down
        return int(np.sum(np.maximum(np.minimum(hi, k) - lo, 0)))
    own, other = (z1, z2) if y == 0 else (z2, z1)
    start = np.where(other > own, 0, first_above(own))  # the pair flips already, or δ₃ must lift z₃ above z_y
    return int(np.sum(np.maximum(hi - np.maximum(lo, start), 0)))
