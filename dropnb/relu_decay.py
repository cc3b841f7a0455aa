"""A two-layer ReLU network with weight decay, a sum of positively homogeneous subnetworks (Vidal et
al. 2022, §1.4): the model, its derivatives, gradient descent and Theorem 1.10's flat path.

Data come in columns, X ∈ ℝ^{n₀×m} and Y ∈ ℝ^{n₂×m}. The network has r hidden units; unit i has
input weights w_i^{[1]} (column i of W₁ ∈ ℝ^{n₀×r}) and output weights w_i^{[2]} (column i of
W₂ ∈ ℝ^{n₂×r}). Its output and the weight decay are sums over units (Vidal et al. 2022, (1.44)–(1.45)),

    φ(X, w^{[1]}, w^{[2]}) = w^{[2]} ReLU(w^{[1]ᵀ}X),     θ(w^{[1]}, w^{[2]}) = ½(‖w^{[1]}‖² + ‖w^{[2]}‖²),
    Φ = Σᵢ φᵢ = W₂ ReLU(W₁ᵀX),                          Θ = Σᵢ θᵢ,
    F(W) = ½‖Y − Φ‖²_F + λΘ                              (the ½ convention of the source's §1.4),

with ``decay`` = λ, the weight decay; φ and θ are both positively homogeneous of degree p = 2 in
the weights of a unit (Definition 1.7). With the residual G = Y − Φ = −∇_Z ½‖Y − Z‖² and ReLU′(0) = 0,

    ∇_{W₂}F = −G Hᵀ + λW₂,   ∇_{W₁}F = −X((W₂ᵀG) ⊙ 1[W₁ᵀX > 0])ᵀ + λW₁,   H = ReLU(W₁ᵀX).

Euler's identity for degree-2 homogeneity gives, at every point (kinks included),
⟨∇_{unit i}F, W_i⟩ = 2ρᵢ with the per-unit scaling residual ρᵢ = λθᵢ − ⟨G, φᵢ⟩.

Theorem 1.10's flat path: if the outputs of units i ∈ I are linearly dependent, Σβᵢφᵢ = 0, then
Wᵢ(τ) = (1 + τβᵢ)^{1/p} Wᵢ keeps Φ and moves Θ linearly, Θ(τ) = Θ + τs with s = Σβᵢθᵢ, until a
unit reaches zero at τ_end. The polar, the duality-gap certificates, the convex reference and the
algorithms that need them are in :mod:`dropnb.relu_polar`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import checks
from .engine import Run, Schedule, descend


# ---------------------------------------------------------------------------------------------
# validation


def check_data(X, Y) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) as finite float64 matrices with the same positive number of columns m."""
    X, Y = checks.matrix(X, "X"), checks.matrix(Y, "Y")
    if X.shape[1] != Y.shape[1] or X.shape[1] == 0:
        raise ValueError(f"X and Y must hold the same positive number of columns, got {X.shape} and {Y.shape}")
    return X, Y


def check_weights(W1, W2, n0: int | None = None, n2: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """W₁ (…, n₀, r) and W₂ (…, n₂, r) as finite float64 arrays with the same leading (batch)
    shape and the same width r ≥ 1; n₀, n₂ checked when given."""
    W1, W2 = checks.matrix(W1, "W1", batched=True), checks.matrix(W2, "W2", batched=True)
    n0 = None if n0 is None else checks.integer(n0, "n0")
    n2 = None if n2 is None else checks.integer(n2, "n2")
    if W1.shape[:-2] != W2.shape[:-2]:
        raise ValueError(f"W1 and W2 must have the same batch shape, got {W1.shape} and {W2.shape}")
    if W1.shape[-1] != W2.shape[-1] or W1.shape[-1] == 0:
        raise ValueError(f"W1 and W2 must have the same positive number of columns r, got {W1.shape} and {W2.shape}")
    if n0 is not None and W1.shape[-2] != n0:
        raise ValueError(f"W1 must have {n0} rows to match X, got shape {W1.shape}")
    if n2 is not None and W2.shape[-2] != n2:
        raise ValueError(f"W2 must have {n2} rows to match Y, got shape {W2.shape}")
    return W1, W2


def _check_network(X, Y, W1, W2, decay=None):
    X, Y = check_data(X, Y)
    W1, W2 = check_weights(W1, W2, X.shape[0], Y.shape[0])
    return (X, Y, W1, W2) if decay is None else (X, Y, W1, W2, checks.positive(decay, "decay"))


# ---------------------------------------------------------------------------------------------
# the network


def hidden(X, W1) -> np.ndarray:
    """H = ReLU(W₁ᵀX), shape (…, r, m)."""
    X, W1 = checks.matrix(X, "X"), checks.matrix(W1, "W1", batched=True)
    if W1.shape[-2] != X.shape[0]:
        raise ValueError(f"W1 must have {X.shape[0]} rows to match X, got shape {W1.shape}")
    return np.maximum(np.swapaxes(W1, -1, -2) @ X, 0.0)


def outputs(X, W1, W2) -> np.ndarray:
    """Φ = W₂ ReLU(W₁ᵀX) = Σᵢ φᵢ, shape (…, n₂, m)."""
    X = checks.matrix(X, "X")
    W1, W2 = check_weights(W1, W2, X.shape[0])
    return W2 @ hidden(X, W1)


def unit_outputs(X, W1, W2) -> np.ndarray:
    """The subnetwork outputs φᵢ = w_i^{[2]} ReLU(w_i^{[1]ᵀ}X), shape (…, r, n₂, m)."""
    X = checks.matrix(X, "X")
    W1, W2 = check_weights(W1, W2, X.shape[0])
    return np.swapaxes(W2, -1, -2)[..., :, :, None] * hidden(X, W1)[..., :, None, :]


def unit_regularizers(W1, W2) -> np.ndarray:
    """θᵢ = ½(‖w_i^{[1]}‖² + ‖w_i^{[2]}‖²), shape (…, r)."""
    W1, W2 = check_weights(W1, W2)
    return 0.5 * (np.sum(W1**2, axis=-2) + np.sum(W2**2, axis=-2))


def regularizer(W1, W2) -> np.ndarray | float:
    """Θ = Σᵢ θᵢ = ½(‖W₁‖²_F + ‖W₂‖²_F), shape (…)."""
    value = np.sum(unit_regularizers(W1, W2), axis=-1)
    return float(value) if np.ndim(value) == 0 else value


def objective(X, Y, W1, W2, decay) -> np.ndarray | float:
    """F = ½‖Y − Φ‖²_F + λΘ, shape (…)."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    value = 0.5 * np.sum((Y - outputs(X, W1, W2)) ** 2, axis=(-2, -1)) + decay * regularizer(W1, W2)
    return float(value) if np.ndim(value) == 0 else value


def gradient(X, Y, W1, W2, decay) -> tuple[np.ndarray, np.ndarray]:
    """(∇_{W₁}F, ∇_{W₂}F) = (−X((W₂ᵀG) ⊙ 1[W₁ᵀX > 0])ᵀ + λW₁, −G Hᵀ + λW₂), G = Y − Φ, ReLU′(0) = 0."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    Z = np.swapaxes(W1, -1, -2) @ X
    H = np.maximum(Z, 0.0)
    G = Y - W2 @ H
    back = (np.swapaxes(W2, -1, -2) @ G) * (Z > 0)
    return -X @ np.swapaxes(back, -1, -2) + decay * W1, -G @ np.swapaxes(H, -1, -2) + decay * W2


def dropout_penalty(X, W1, W2) -> np.ndarray | float:
    """Σᵢ ‖w_i^{[2]}‖² ‖ReLU(w_i^{[1]ᵀ}X)‖²: hidden-unit dropout's regularizer without its factor
    (1 − θ)/θ (θ the retain probability), positively homogeneous of degree 4 (not 2) in the weights of a unit."""
    X = checks.matrix(X, "X")
    W1, W2 = check_weights(W1, W2, X.shape[0])
    value = np.sum(np.sum(W2**2, axis=-2) * np.sum(hidden(X, W1) ** 2, axis=-1), axis=-1)
    return float(value) if np.ndim(value) == 0 else value


def split_units(W1, W2, shares) -> tuple[np.ndarray, np.ndarray]:
    """Replace every unit by k copies (√cⱼ w^{[1]}, √cⱼ w^{[2]}), Σⱼcⱼ = 1: Φ and Θ are unchanged
    (copies of unit i are consecutive columns)."""
    W1, W2 = check_weights(W1, W2)
    c = checks.distribution(shares, "shares", positive=True)
    root = np.sqrt(c)
    return np.repeat(W1, len(c), axis=-1) * np.tile(root, W1.shape[-1]), np.repeat(W2, len(c), axis=-1) * np.tile(root, W2.shape[-1])


# ---------------------------------------------------------------------------------------------
# gradient descent, batched over a leading seed dimension


def gradient_descent(X, Y, W1, W2, decay, schedule, every: int = 0) -> Run:
    """W ← W − η∇F for each (η, n) of ``schedule`` (or a :class:`dropnb.engine.Schedule`) in turn,
    on all leading (seed) dimensions at once, in numpy on :func:`dropnb.engine.descend`.

    The run's ``final`` state is ``W1``, ``W2``; ``every`` > 0 records ``metrics["objective"]``, F at
    step 0, every ``every`` steps and at the end. Plain gradient descent is not monotone where
    units cross kinks (F may rise by O(η) between steps). The step is written out in numpy with
    in-place products on preallocated arrays: for these small networks that is several times
    faster than a torch graph."""
    X, Y, W1, W2, decay = _check_network(X, Y, W1, W2, decay)
    schedule = Schedule.of(schedule, name="schedule")
    every = checks.integer(every, "every", minimum=0)
    batch = W1.shape[:-2]
    A = np.swapaxes(W1.reshape((-1,) + W1.shape[-2:]), -1, -2).copy()  # (S, r, n₀): rows are w_i^{[1]ᵀ}
    B = W2.reshape((-1,) + W2.shape[-2:]).copy()  # (S, n₂, r)
    S, r, m = A.shape[0], A.shape[1], X.shape[1]
    XT = np.ascontiguousarray(X.T)
    Z, H, back = np.empty((S, r, m)), np.empty((S, r, m)), np.empty((S, r, m))
    active = np.empty((S, r, m), dtype=bool)
    R = np.empty((S, Y.shape[0], m))
    factors = {}  # η ↦ (η, 1 − ηλ, 1 − ηλ) as full arrays: same-shape in-place products are the fastest

    def forward():
        np.matmul(A, X, out=Z)
        np.maximum(Z, 0.0, out=H)
        np.matmul(B, H, out=R)
        np.subtract(R, Y, out=R)  # R = Φ − Y = −G

    def value(state):
        forward()
        return dict(objective=(0.5 * np.sum(R**2, axis=(1, 2))
                               + 0.5 * decay * (np.sum(A**2, axis=(1, 2)) + np.sum(B**2, axis=(1, 2)))).reshape(batch))

    def step(t: int, eta: float) -> None:
        if eta not in factors:
            factors[eta] = (np.full(R.shape, eta), np.full(A.shape, 1 - eta * decay), np.full(B.shape, 1 - eta * decay))
        eta_R, decay_A, decay_B = factors[eta]
        forward()
        np.multiply(R, eta_R, out=R)
        np.multiply(np.swapaxes(B, -1, -2), R, out=back)
        np.greater(Z, 0, out=active)
        np.multiply(back, active, out=back)
        np.multiply(B, decay_B, out=B)
        np.subtract(B, R @ np.swapaxes(H, -1, -2), out=B)
        np.multiply(A, decay_A, out=A)
        np.subtract(A, back @ XT, out=A)

    checkpoints = np.union1d(np.arange(0, schedule.steps, every), [schedule.steps]) if every else [schedule.steps]
    run = descend(dict(A=A, B=B), step, schedule, checkpoints=checkpoints, metrics=value if every else None,
                  progress=False, description="gradient descent")
    run.final = dict(W1=np.swapaxes(A, -1, -2).reshape(W1.shape), W2=B.reshape(W2.shape))
    return run


# ---------------------------------------------------------------------------------------------
# Theorem 1.10's flat path


@dataclass
class FlatPath:
    """Wᵢ(τ) = (1 + τβᵢ)^{1/p} Wᵢ for τ ∈ [0, τ_end]: Σβᵢφᵢ = 0 keeps Φ, Θ(τ) = Θ + τs with s = Σβᵢθᵢ ≤ 0,
    and unit ``index`` reaches zero at τ_end = −1/β_index."""

    W1: np.ndarray
    W2: np.ndarray
    beta: np.ndarray  # (r,), zero outside the units used, ‖β‖ = 1
    slope: float
    tau_end: float
    index: int
    singular_value: float  # ‖Σβᵢφᵢ‖ for the unit-norm β found (≈ 0 for a dependent set)
    degree: int = 2

    def weights(self, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """(W₁(τ), W₂(τ)); at τ = τ_end unit ``index`` is set exactly to zero."""
        tau = checks.number(tau, "tau")
        factor = np.maximum(1 + tau * self.beta, 0.0) ** (1 / self.degree)
        if tau >= self.tau_end:
            factor[self.index] = 0.0
        return self.W1 * factor, self.W2 * factor


def flat_path(X, W1, W2, units=None) -> FlatPath:
    """The flat path of Theorem 1.10 through the units ``units`` (default: all non-zero units).

    β is the right singular vector of the smallest singular value of [vec φᵢ]_{i∈units} (an exact null
    vector when the units outnumber the entries of φ), signed so that s = Σβᵢθᵢ ≤ 0."""
    X = checks.matrix(X, "X")
    W1, W2 = check_weights(W1, W2, X.shape[0])
    if W1.ndim != 2:
        raise ValueError(f"W1 must be a single network (n0, r), got shape {W1.shape}")
    theta = unit_regularizers(W1, W2)
    r = W1.shape[1]
    chosen = np.flatnonzero(theta > 0) if units is None else np.unique(np.asarray(units, dtype=int))
    if chosen.size < 2 or chosen.min() < 0 or chosen.max() >= r:
        raise ValueError(f"units must name at least two units among 0..{r - 1}, got {units!r}")
    phi = unit_outputs(X, W1, W2)[chosen].reshape(len(chosen), -1).T  # (|φ|, k)
    _, s, Vt = np.linalg.svd(phi, full_matrices=True)
    sigma = float(s[-1]) if len(chosen) <= phi.shape[0] else 0.0
    b = Vt[-1]
    beta = np.zeros(r)
    beta[chosen] = b
    slope = float(beta @ theta)
    if slope > 0 or (slope == 0 and beta.min() > -beta.max()):
        beta, slope = -beta, -slope
    index = int(np.argmin(beta))
    return FlatPath(W1.copy(), W2.copy(), beta, slope, float(-1 / beta[index]), index, sigma)

