"""Dropout training of the shallow linear network, batched over independent runs (torch).

R runs advance together as one tensor program: weights carry a leading run dimension
(U: (R, d₁, r), V: (R, d₂, r)), every step draws fresh inputs and masks for all runs at once,
and nothing loops over runs in Python. The program runs on the device of the torch generator
(float64 on the CPU, float32 on a GPU). At checkpoint steps the engine evaluates *metrics*,
functions of the batched weights returning tensors with a leading run dimension (for example
:func:`objective_metrics`), and optionally keeps the weights.

* :func:`algorithm1` is dropout SGD on fresh samples (Algorithm 1 of Mianjy et al. 2018), with
  minibatches and a step-size schedule as options.
* :func:`gradient_descent` follows the expected direction of Algorithm 1, ½∇f·diag(μ), without
  noise: the deterministic reference for the same step sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from .linear import batched_objective
from .masks import MaskDistribution

Metrics = Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]
StepSize = float | Callable[[int], float]


@dataclass
class Trajectory:
    """What a training run records.

    ``steps``: the checkpoint steps (sorted, distinct); ``metrics[name]``: the metric at each
    checkpoint, shape (C, R, …); ``losses[n, t]``: the minibatch dropout loss of run n at step t
    before its update (SGD only, else None); ``U``, ``V``: the weights at each checkpoint,
    (C, R, d, r), when kept (else None); ``final_U``, ``final_V``: the weights after the last step.
    All arrays are numpy float64.
    """

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    losses: np.ndarray | None
    U: np.ndarray | None
    V: np.ndarray | None
    final_U: np.ndarray
    final_V: np.ndarray


def log_checkpoints(steps: int, count: int) -> np.ndarray:
    """About ``count`` distinct integers from 0 to ``steps``, log-spaced (0 and ``steps`` included)."""
    if steps < 1 or count < 2:
        raise ValueError(f"steps must be ≥ 1 and count ≥ 2, got {steps} and {count}")
    return np.unique(np.concatenate([[0], np.geomspace(1, steps, count - 1).round().astype(int)]))


def inverse_time_decay(initial: float, scale: float) -> Callable[[int], float]:
    """The step-size schedule ηₜ = η₀ / (1 + t/s) with η₀ = ``initial`` and s = ``scale``."""
    if not (np.isfinite(initial) and initial > 0 and np.isfinite(scale) and scale > 0):
        raise ValueError(f"initial and scale must be positive numbers, got {initial!r} and {scale!r}")
    return lambda t: initial / (1 + t / scale)


def objective_metrics(M: np.ndarray, mask: MaskDistribution, S: np.ndarray | None = None) -> Metrics:
    """Metrics of the shallow network at a checkpoint, per run, in float64 on any device:
    ``objective`` f (closed form, :func:`dropnb.linear.batched_objective`), ``loss`` ℓ and
    ``scores`` αᵢ = ‖uᵢ‖ (vᵢᵀSvᵢ)^{1/2}."""
    constants = {}

    def metrics(U: torch.Tensor, V: torch.Tensor) -> dict[str, torch.Tensor]:
        U, V = U.double(), V.double()
        if not constants:
            tensor = lambda a: torch.as_tensor(a, device=U.device, dtype=torch.float64)  # noqa: E731
            constants.update(M=tensor(M), cbar=tensor(mask.characteristic), S=None if S is None else tensor(S))
        c = constants
        loss = batched_objective(c["M"], U, V, torch.zeros_like(c["cbar"]), c["S"])
        SV = V if c["S"] is None else c["S"] @ V
        return dict(objective=batched_objective(c["M"], U, V, c["cbar"], c["S"]), loss=loss,
                    scores=U.norm(dim=-2) * (V * SV).sum(dim=-2).clamp(min=0).sqrt())

    return metrics


def _check_step_size(lr: StepSize) -> Callable[[int], float]:
    schedule = lr if callable(lr) else (lambda t: lr)
    first = schedule(0)
    if isinstance(first, bool) or not isinstance(first, (int, float, np.floating)) or not (np.isfinite(first) and first > 0):
        raise ValueError(f"lr must be a positive number or a schedule t ↦ ηₜ > 0, got {lr!r}")
    return schedule


def _check_problem(M, U0, V0, mask, steps, checkpoints) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    M = np.asarray(M, dtype=np.float64)
    U0, V0 = np.asarray(U0, dtype=np.float64), np.asarray(V0, dtype=np.float64)
    if U0.ndim != 3 or V0.ndim != 3 or U0.shape[0] != V0.shape[0] or U0.shape[2] != V0.shape[2]:
        raise ValueError(f"U0 and V0 must be (R, d1, r) and (R, d2, r), got {U0.shape} and {V0.shape}")
    if U0.shape[1:2] + V0.shape[1:2] != M.shape:
        raise ValueError(f"U0 and V0 must have {M.shape[0]} and {M.shape[1]} rows to match M, "
                         f"got {U0.shape} and {V0.shape}")
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(U0)) and np.all(np.isfinite(V0))):
        raise ValueError("M, U0 and V0 must be finite")
    if not isinstance(mask, MaskDistribution) or mask.width != U0.shape[2]:
        raise ValueError(f"mask must be a MaskDistribution of width {U0.shape[2]}, got {mask!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    checkpoints = log_checkpoints(steps, 40) if checkpoints is None else np.unique(np.asarray(checkpoints, dtype=int))
    if checkpoints.size == 0 or checkpoints.min() < 0 or checkpoints.max() > steps:
        raise ValueError(f"checkpoints must be a non-empty set of steps in [0, {steps}]")
    return M, U0, V0, checkpoints


def _train(U: torch.Tensor, V: torch.Tensor, steps: int, checkpoints: np.ndarray,
           step: Callable[[int], None], metrics: Metrics | None, keep_weights: bool, progress: bool,
           description: str) -> tuple[np.ndarray, dict[str, np.ndarray], list, list]:
    """Call ``step(t)`` for t = 0 … steps − 1 (it updates U and V in place), recording at checkpoints;
    FloatingPointError if the weights are not finite at a checkpoint."""
    records: dict[str, list] = {}
    snapshots_u, snapshots_v, wanted = [], [], set(checkpoints.tolist())
    to_numpy = lambda a: a.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    for t in tqdm(range(steps + 1), disable=not progress, desc=description, mininterval=1.0):
        if t in wanted:
            if not (torch.isfinite(U).all() and torch.isfinite(V).all()):
                raise FloatingPointError(f"{description} diverged before step {t}: the weights are not finite; "
                                         "lower the step size")
            if keep_weights:
                snapshots_u.append(to_numpy(U))
                snapshots_v.append(to_numpy(V))
            for name, value in (metrics(U, V) if metrics else {}).items():
                records.setdefault(name, []).append(to_numpy(value))
        if t < steps:
            step(t)
    return checkpoints, {name: np.stack(values) for name, values in records.items()}, snapshots_u, snapshots_v


def _trajectory(U, V, recorded, losses) -> Trajectory:
    steps, metrics, snapshots_u, snapshots_v = recorded
    return Trajectory(steps=steps, metrics=metrics, losses=losses,
                      U=np.stack(snapshots_u) if snapshots_u else None, V=np.stack(snapshots_v) if snapshots_v else None,
                      final_U=U.cpu().numpy().astype(np.float64), final_V=V.cpu().numpy().astype(np.float64))


def _dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type == "cpu" else torch.float32


def algorithm1(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    mask: MaskDistribution,
    lr: StepSize,
    steps: int,
    generator: torch.Generator,
    input_factor: np.ndarray | None = None,
    batch_size: int = 1,
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    keep_weights: bool = True,
    progress: bool = True,
) -> Trajectory:
    """Algorithm 1 (dropout with SGD on fresh samples) for R runs at once.

    Each step t draws, for every run, B = ``batch_size`` inputs x = Az with z ~ N(0, I)
    (A = ``input_factor``, so E[xxᵀ] = AAᵀ; A = I if omitted), then B masks b, forms
    e = U diag(b/μ) Vᵀx − y (y = Mx) and h = b ⊙ Vᵀx, and updates, with the old weights,
    U ← U − (ηₜ/B) Σ e hᵀ and V ← V − (ηₜ/B) Σ x (b ⊙ Uᵀe)ᵀ. For B = 1 and Bernoulli masks
    (μ = θ𝟙) this is the printed algorithm; its expected direction is ½∇f·diag(μ) = (θ/2)∇f.
    ``lr`` is a number or a schedule t ↦ ηₜ (see :func:`inverse_time_decay`).
    """
    M, U0, V0, checkpoints = _check_problem(M, U0, V0, mask, steps, checkpoints)
    schedule = _check_step_size(lr)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs, d2 = U0.shape[0], M.shape[1]
    Mt_T, U, V = tensor(M.T), tensor(U0).clone(), tensor(V0).clone()
    A_T = None if input_factor is None else tensor(np.asarray(input_factor, dtype=np.float64).T)
    inverse_mean = tensor(1 / mask.mean)
    losses = torch.empty((runs, steps), device=device, dtype=dtype)

    def step(t: int) -> None:
        x = torch.randn((runs, batch_size, d2), generator=generator, device=device, dtype=dtype)
        if A_T is not None:
            x = x @ A_T
        b = mask.sample_torch((runs, batch_size), generator, dtype)
        hidden = b * torch.bmm(x, V)
        error = torch.bmm(hidden * inverse_mean, U.transpose(1, 2)) - x @ Mt_T
        losses[:, t] = (error**2).sum(dim=2).mean(dim=1)
        back = b * torch.bmm(error, U)
        scale = schedule(t) / batch_size
        U.baddbmm_(error.transpose(1, 2), hidden, alpha=-scale)
        V.baddbmm_(x.transpose(1, 2), back, alpha=-scale)

    recorded = _train(U, V, steps, checkpoints, step, metrics, keep_weights, progress, "Algorithm 1")
    return _trajectory(U, V, recorded, losses.cpu().numpy().astype(np.float64))


def gradient_descent(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    mask: MaskDistribution,
    lr: StepSize,
    steps: int,
    device: torch.device | str = "cpu",
    S: np.ndarray | None = None,
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    keep_weights: bool = True,
    progress: bool = True,
) -> Trajectory:
    """Full-batch gradient descent along the expected direction of Algorithm 1 for R runs at once:
    U ← U − ηₜ · ½∇_U f · diag(μ), V ← V − ηₜ · ½∇_V f · diag(μ), with the closed-form gradient
    ∇_U f = −2(M − UVᵀ)SV + 2U(C̄ ⊙ VᵀSV), ∇_V f = −2S(M − UVᵀ)ᵀU + 2SV(C̄ ⊙ UᵀU)."""
    M, U0, V0, checkpoints = _check_problem(M, U0, V0, mask, steps, checkpoints)
    schedule = _check_step_size(lr)
    device = torch.device(device)
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    M_t, U, V = tensor(M), tensor(U0).clone(), tensor(V0).clone()
    S_t = None if S is None else tensor(S)
    cbar, half_mean = tensor(mask.characteristic), tensor(mask.mean / 2)

    def step(t: int) -> None:
        residual = M_t - U @ V.transpose(1, 2)
        SV = V if S_t is None else S_t @ V
        back = residual.transpose(1, 2) @ U
        grad_u = -2 * residual @ SV + 2 * U @ (cbar * (V.transpose(1, 2) @ SV))
        grad_v = -2 * (back if S_t is None else S_t @ back) + 2 * SV @ (cbar * (U.transpose(1, 2) @ U))
        eta = schedule(t)
        U.sub_(eta * grad_u * half_mean)
        V.sub_(eta * grad_v * half_mean)

    recorded = _train(U, V, steps, checkpoints, step, metrics, keep_weights, progress, "gradient descent")
    return _trajectory(U, V, recorded, None)
