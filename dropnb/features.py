"""A deep feature extractor with DropBlock before a linear head, on the scikit-learn digits.

The experiment behind Figure 2 of Pal et al. (2020), offline. Inputs X ∈ ℝ^{64×N} are 8×8 digit
images (standardized pixels), targets Y ∈ ℝ^{c×N} (c = 10 classes), and the network is

    G = g_Γ(X) = W_L ϕ(… ϕ(W₁X + b₁𝟙ᵀ) …) + b_L𝟙ᵀ ∈ ℝ^{r×N},   ϕ = ReLU,
    prediction U diag(b/μ) G,   U ∈ ℝ^{c×r} (no bias),

with a mask b (for DropBlock, k = r/s blocks of s consecutive units, each kept with probability
θ) on the r features. By Lemma 3.1 of the source, for every mask with mean μ and characteristic
matrix C̄ (see :mod:`dropnb.masks`),

    E_b ‖Y − U diag(b/μ) G‖²_F = ‖Y − UG‖²_F + ⟨C̄, UᵀU ⊙ GGᵀ⟩,

the *deterministic objective*; for DropBlock, C̄ = λ(I_k ⊗ 𝟙ₛ𝟙ₛᵀ), λ = (1 − θ)/θ, and the penalty
is λ Σⱼ ‖UⱼGⱼ‖²_F over the blocks (Uⱼ: the block's columns of U, Gⱼ: its rows of G). Training
minimises it directly by full-batch Adam: its gradient is the expected gradient of training
with sampled masks. Independent runs share nothing but the data: every weight carries a
leading run dimension R (W_l: (R, out, in), b_l: (R, out, 1), U: (R, c, r)), one tensor program
advances all runs, and since Adam acts entrywise, the batch is R separate Adam runs. Everything
is float64 (on the CPU unless a device is given).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.datasets import load_digits

from . import checks, engine
from .engine import Run, Schedule, to_numpy
from .linear import _batched_objective
from .masks import MaskDistribution

CLASSES = 10


@dataclass(frozen=True)
class Digits:
    """A class-balanced subset of the digits: ``inputs`` X (64, N), standardized pixel by pixel
    over the subset (constant pixels are set to 0); ``labels`` (N,) in 0..9; ``onehot`` (10, N)."""

    inputs: np.ndarray
    labels: np.ndarray
    onehot: np.ndarray


def load_digit_subset(n: int, rng: np.random.Generator) -> Digits:
    """n/10 images of every digit, drawn without replacement by ``rng`` from the 1797 bundled 8×8
    digits (the smallest class has 174, so n ≤ 1740), in their original order. Each pixel is
    standardized over the subset: xᵢ ← (xᵢ − mean)/std, and set to 0 where std = 0."""
    images, labels = load_digits(return_X_y=True)
    counts = np.bincount(labels, minlength=CLASSES)
    n, rng = checks.integer(n, "n"), checks.generator(rng, "rng")
    if n % CLASSES or n // CLASSES > counts.min():
        raise ValueError(f"n must be a multiple of {CLASSES} up to {CLASSES * counts.min()} "
                         f"(equal class counts), got {n}")
    chosen = np.sort(np.concatenate([rng.choice(np.flatnonzero(labels == c), n // CLASSES, replace=False)
                                     for c in range(CLASSES)]))
    X = images[chosen].T.astype(np.float64)
    X = X - X.mean(axis=1, keepdims=True)
    std = X.std(axis=1, keepdims=True)
    X = X / np.where(std > 0, std, 1.0)
    return Digits(inputs=X, labels=labels[chosen], onehot=np.eye(CLASSES)[labels[chosen]].T)


def spread_targets(onehot, first: float = 3.0, ratio: float = 0.6) -> np.ndarray:
    """Y = diag(first·ratio^{i−1}) · onehot: class i's target is scaled by first·ratioⁱ⁻¹, so with
    balanced classes the singular values of Y decay geometrically instead of being equal."""
    onehot = checks.matrix(onehot, "onehot")
    first, ratio = checks.positive(first, "first"), checks.positive(ratio, "ratio")
    return (first * ratio ** np.arange(onehot.shape[0]))[:, None] * onehot


def init_weights(sizes, outputs: int, runs: int, rng: np.random.Generator,
                 device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Weights [W₁, b₁, …, W_L, b_L, U] of R = ``runs`` networks with layer widths
    ``sizes`` = (d, h₁, …, r) and c = ``outputs``, float64 on ``device``, drawn by ``rng`` as in
    torch's default: every entry of W_l, b_l uniform on ±1/√(fan-in), of U on ±1/√r. Run n is
    drawn after runs 0..n−1, so the first runs do not depend on how many follow."""
    sizes = [checks.integer(size, "sizes") for size in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least the input and feature widths, got {sizes}")
    runs, outputs = checks.integer(runs, "runs"), checks.integer(outputs, "outputs")
    rng = checks.generator(rng, "rng")
    shapes = [shape for fan_in, fan_out in zip(sizes, sizes[1:]) for shape in ((fan_out, fan_in), (fan_out, 1))]
    shapes.append((outputs, sizes[-1]))
    fans = [fan_in for fan_in in sizes[:-1] for _ in range(2)] + [sizes[-1]]
    draws = [[rng.uniform(-1, 1, shape) / np.sqrt(fan) for shape, fan in zip(shapes, fans)] for _ in range(runs)]
    return [torch.tensor(np.stack(weight), device=device) for weight in zip(*draws)]


def features(weights: list[torch.Tensor], X: torch.Tensor) -> torch.Tensor:
    """G = g_Γ(X), shape (R, r, N): affine layers with ReLU between them (none after the last).
    ``weights`` as from :func:`init_weights` (the head U, last, is not used)."""
    return _features(*_check_network(weights, X))


def _check_network(weights, X):
    """Validate [W₁, b₁, …, W_L, b_L, U] (tensors (R, ·, ·), chaining, one R) and X (d, N) (tensors of
    one dtype and device)."""
    if not isinstance(weights, (list, tuple)) or len(weights) < 3 or len(weights) % 2 == 0:
        got = f"{len(weights)} of them" if isinstance(weights, (list, tuple)) else f"a {type(weights).__name__}"
        raise ValueError(f"weights must be a list [W1, b1, …, WL, bL, U] of tensors (as from init_weights), got {got}")
    weights = [checks.tensor(W, f"weights[{i}]", ndim=3) for i, W in enumerate(weights)]
    X = checks.tensor(X, "X")
    named = {f"weights[{i}]": W for i, W in enumerate(weights)}
    checks.same_batch(named)
    checks.same_dtype({**named, "X": X})
    width = X.shape[0]
    for index in range(0, len(weights) - 1, 2):
        W, b = weights[index], weights[index + 1]
        if W.shape[-1] != width or b.shape[-2:] != (W.shape[-2], 1):
            raise ValueError(f"weights[{index}] and weights[{index + 1}] must be (R, h, {width}) and (R, h, 1) to "
                             f"follow X {tuple(X.shape)}, got {tuple(W.shape)} and {tuple(b.shape)}")
        width = W.shape[-2]
    if weights[-1].shape[-1] != width:
        raise ValueError(f"weights[{len(weights) - 1}] must have {width} columns, got {tuple(weights[-1].shape)}")
    return weights, X


def _features(weights, X):
    hidden = X
    layers = weights[:-1]
    for index in range(0, len(layers), 2):
        if index:
            hidden = torch.relu(hidden)
        hidden = layers[index] @ hidden + layers[index + 1]
    return hidden


def deterministic_objective(weights: list[torch.Tensor], X: torch.Tensor, Y: torch.Tensor,
                            cbar: torch.Tensor) -> torch.Tensor:
    """‖Y − UG‖²_F + ⟨C̄, UᵀU ⊙ GGᵀ⟩ per run, shape (R,), with G = g_Γ(X) and U = ``weights[-1]``;
    Y is (c, N) or (R, c, N). Differentiable; validated at entry (training calls the unvalidated core)."""
    weights, X = _check_network(weights, X)
    Y, cbar = checks.tensor(Y, "Y", batched=True), checks.tensor(cbar, "cbar", batched=True)
    (c, r), N = weights[-1].shape[-2:], X.shape[1]
    if Y.shape[-2:] != (c, N):
        raise ValueError(f"Y must be (…, {c}, {N}) to match the head weights[-1] and X, got {tuple(Y.shape)}")
    if cbar.shape[-2:] != (r, r):
        raise ValueError(f"cbar must be (…, {r}, {r}) to match the features, got {tuple(cbar.shape)}")
    checks.same_dtype({"X": X, "Y": Y, "cbar": cbar})
    return _deterministic_objective(weights, X, Y, cbar)


def _deterministic_objective(weights, X, Y, cbar):
    """:func:`deterministic_objective` without validation."""
    return _batched_objective(Y, weights[-1], _features(weights, X).transpose(-1, -2), cbar)


def _check_targets(Y, N: int, runs: int) -> np.ndarray:
    Y = checks.real_array(Y, "Y")
    if not (Y.ndim == 2 or (Y.ndim == 3 and Y.shape[0] == runs)) or Y.shape[-1] != N:
        raise ValueError(f"Y must be (c, {N}) or ({runs}, c, {N}) to match X and runs, got {Y.shape}")
    return checks.matrix(Y, "Y", ndim=Y.ndim)


def train(X, Y, mask: MaskDistribution, hidden, *, runs: int, lr, steps: int | None = None, rng: np.random.Generator,
          checkpoints=None, device: torch.device | str = "cpu", progress: bool = True) -> Run:
    """Full-batch Adam (:func:`dropnb.engine.train`, step sizes ``lr`` and ``steps`` as in
    ``Schedule.of``) on the deterministic objective of R = ``runs`` networks d → h₁ → ReLU → … →
    h_L → ReLU → r → head, r = ``mask.width``, from :func:`init_weights` by ``rng``, float64 on
    ``device``. X (d, N) is shared; Y is (c, N) for every run or (R, c, N) one target per run.

    The run's state is the weights ``W1``, ``b1``, …, ``U``; ``metrics["objective"]`` (C, R) is the
    objective at the checkpoints (about 40 log-spaced ones if None), ``losses`` (R, T) at every
    step; ``outcome`` holds ``final`` (R,), the objective after the last step, ``lowest`` (R,), its
    smallest value over every step 0..T, ``rises`` (R,), the number of steps that increased it, and
    ``G`` (R, r, N), the features after the last step (``final["U"] @ outcome["G"]`` is the
    prediction on the training set).
    """
    X = checks.matrix(X, "X")
    runs, rng = checks.integer(runs, "runs"), checks.generator(rng, "rng")
    checks.flag(progress, "progress")
    Y = _check_targets(Y, X.shape[1], runs)
    if not isinstance(mask, MaskDistribution):
        raise ValueError(f"mask must be a MaskDistribution, got {type(mask).__name__}")
    hidden = [checks.integer(h, "hidden") for h in np.atleast_1d(hidden)]
    schedule = Schedule.of(lr, steps)
    weights = init_weights([X.shape[0], *hidden, mask.width], Y.shape[-2], runs, rng, device)
    names = [f"{kind}{layer + 1}" for layer in range(len(hidden) + 1) for kind in ("W", "b")] + ["U"]
    X_t, Y_t, cbar = (torch.tensor(a, device=device) for a in (X, Y, mask.characteristic))
    objective = lambda state, _=None: _deterministic_objective(list(state.values()), X_t, Y_t, cbar)  # noqa: E731
    run = engine.train(dict(zip(names, weights)), objective, schedule, optimizer="adam", checkpoints=checkpoints,
                metrics=lambda state: dict(objective=objective(state)), progress=progress,
                description="Adam on the deterministic objective")
    final = {name: torch.tensor(w, device=device) for name, w in run.final.items()}
    with torch.no_grad():
        values = np.concatenate([run.losses, to_numpy(objective(final))[:, None]], axis=1)
        run.outcome.update(final=values[:, -1], lowest=values.min(axis=1), rises=np.sum(np.diff(values) > 0, axis=1),
                           G=to_numpy(features(list(final.values()), X_t)))
    return run
