"""Dropout training of the shallow linear network, batched over independent runs (torch).

R runs advance together as one tensor program: weights carry a leading run dimension
(U: (R, d₁, r), V: (R, d₂, r)), every step draws fresh inputs and masks for all runs at once,
and nothing loops over runs in Python. The program runs on the device of the torch generator
(float64 on the CPU, float32 on a GPU). At checkpoint steps the engine evaluates *metrics*,
functions of the batched weights returning tensors with a leading run dimension (for example
:func:`objective_metrics`), and optionally keeps the weights.

* :func:`algorithm1` is dropout SGD on fresh samples (Algorithm 1 of Mianjy et al. 2018), with
  minibatches and a step-size schedule as options.
* :func:`dropconnect_sgd` is the same with DropConnect masks on the input weights.
* :func:`gradient_descent` follows the expected direction of Algorithm 1, ½∇f·diag(μ), without
  noise: the deterministic reference for the same step sizes.
* :func:`deep_gradient_descent` does the same for deep linear networks with dropout on every
  hidden layer: gradient descent on the exact dropout objective of :mod:`dropnb.deep`, which is
  the expected direction of dropout SGD, with a dropout rate per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from . import checks, deep
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
    steps, count = checks.integer(steps, "steps"), checks.integer(count, "count", minimum=2)
    return np.unique(np.concatenate([[0], np.geomspace(1, steps, count - 1).round().astype(int)]))


def inverse_time_decay(initial: float, scale: float) -> Callable[[int], float]:
    """The step-size schedule ηₜ = η₀ / (1 + t/s) with η₀ = ``initial`` and s = ``scale``."""
    initial, scale = checks.positive(initial, "initial"), checks.positive(scale, "scale")
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
    checks.positive(schedule(0), "lr(0)" if callable(lr) else "lr")
    return schedule


def _check_checkpoints(steps, checkpoints) -> np.ndarray:
    """The sorted distinct checkpoint steps in [0, steps] (about 40 log-spaced ones if None)."""
    steps = checks.integer(steps, "steps")
    checkpoints = log_checkpoints(steps, 40) if checkpoints is None else np.unique(np.asarray(checkpoints, dtype=int))
    if checkpoints.size == 0 or checkpoints.min() < 0 or checkpoints.max() > steps:
        raise ValueError(f"checkpoints must be a non-empty set of steps in [0, {steps}]")
    return checkpoints


def _check_problem(M, U0, V0, mask: MaskDistribution | None, steps, checkpoints) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    M = np.asarray(M, dtype=np.float64)
    U0, V0 = np.asarray(U0, dtype=np.float64), np.asarray(V0, dtype=np.float64)
    if U0.ndim != 3 or V0.ndim != 3 or U0.shape[0] != V0.shape[0] or U0.shape[2] != V0.shape[2]:
        raise ValueError(f"U0 and V0 must be (R, d1, r) and (R, d2, r), got {U0.shape} and {V0.shape}")
    if U0.shape[1:2] + V0.shape[1:2] != M.shape:
        raise ValueError(f"U0 and V0 must have {M.shape[0]} and {M.shape[1]} rows to match M, "
                         f"got {U0.shape} and {V0.shape}")
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(U0)) and np.all(np.isfinite(V0))):
        raise ValueError("M, U0 and V0 must be finite")
    if mask is not None and (not isinstance(mask, MaskDistribution) or mask.width != U0.shape[2]):
        raise ValueError(f"mask must be a MaskDistribution of width {U0.shape[2]}, got {mask!r}")
    return M, U0, V0, _check_checkpoints(steps, checkpoints)


def _train(weights: list[torch.Tensor], steps: int, checkpoints: np.ndarray, step: Callable[[int], None],
           metrics: Callable[..., dict[str, torch.Tensor]] | None, keep_weights: bool, progress: bool,
           description: str) -> tuple[np.ndarray, dict[str, np.ndarray], list[list[np.ndarray]]]:
    """Call ``step(t)`` for t = 0 … steps − 1 (it updates the weights in place), recording
    ``metrics(*weights)`` and, if kept, the weights at checkpoints; FloatingPointError if the
    weights are not finite at a checkpoint."""
    records: dict[str, list] = {}
    snapshots: list[list[np.ndarray]] = [[] for _ in weights]
    wanted = set(checkpoints.tolist())
    for t in tqdm(range(steps + 1), disable=not progress, desc=description, mininterval=1.0):
        if t in wanted:
            if not all(bool(torch.isfinite(W).all()) for W in weights):
                raise FloatingPointError(f"{description} diverged before step {t}: the weights are not finite; "
                                         "lower the step size")
            if keep_weights:
                for kept, W in zip(snapshots, weights):
                    kept.append(_to_numpy(W))
            with torch.no_grad():
                for name, value in (metrics(*weights) if metrics else {}).items():
                    records.setdefault(name, []).append(_to_numpy(value))
        if t < steps:
            step(t)
    return checkpoints, {name: np.stack(values) for name, values in records.items()}, snapshots


def _to_numpy(a: torch.Tensor) -> np.ndarray:
    return a.detach().cpu().numpy().astype(np.float64)


def _trajectory(U, V, recorded, losses) -> Trajectory:
    steps, metrics, (snapshots_u, snapshots_v) = recorded
    return Trajectory(steps=steps, metrics=metrics, losses=losses,
                      U=np.stack(snapshots_u) if snapshots_u else None, V=np.stack(snapshots_v) if snapshots_v else None,
                      final_U=_to_numpy(U), final_V=_to_numpy(V))


def _dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type == "cpu" else torch.float32


def _input_sampler(d2: int, runs: int, batch_size: int, input_factor, data, generator: torch.Generator,
                   dtype: torch.dtype) -> Callable[[], torch.Tensor]:
    """A function drawing the inputs of one step, shape (R, B, d₂): x = Az with z ~ N(0, I)
    (A = ``input_factor``, so E[xxᵀ] = AAᵀ; A = I if omitted), or, given ``data`` X (d₂ × N),
    B columns of X drawn uniformly with replacement (so E[xxᵀ] = XXᵀ/N)."""
    batch_size = checks.integer(batch_size, "batch_size")
    device = generator.device
    tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), device=device, dtype=dtype)  # noqa: E731
    if data is not None:
        if input_factor is not None:
            raise ValueError("give either input_factor (Gaussian inputs) or data (a finite input set), not both")
        X = np.asarray(data, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] != d2 or X.shape[1] < 1 or not np.all(np.isfinite(X)):
            raise ValueError(f"data must be a finite ({d2}, N) array of input columns, got shape {X.shape}")
        columns = tensor(X.T)
        return lambda: columns[torch.randint(X.shape[1], (runs, batch_size), generator=generator, device=device)]
    A_T = None if input_factor is None else tensor(np.asarray(input_factor, dtype=np.float64).T)

    def gaussian() -> torch.Tensor:
        x = torch.randn((runs, batch_size, d2), generator=generator, device=device, dtype=dtype)
        return x if A_T is None else x @ A_T

    return gaussian


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
    data: np.ndarray | None = None,
) -> Trajectory:
    """Algorithm 1 (dropout with SGD on fresh samples) for R runs at once.

    Each step t draws, for every run, B = ``batch_size`` inputs (see :func:`_input_sampler`:
    Gaussian x = Az, or columns of a finite input set ``data``), then B masks b, forms
    e = U diag(b/μ) Vᵀx − y (y = Mx) and h = b ⊙ Vᵀx, and updates, with the old weights,
    U ← U − (ηₜ/B) Σ e hᵀ and V ← V − (ηₜ/B) Σ x (b ⊙ Uᵀe)ᵀ. For B = 1 and Bernoulli masks
    (μ = θ𝟙) this is the printed algorithm; its expected direction is ½∇f·diag(μ) = (θ/2)∇f.
    ``lr`` is a number or a schedule t ↦ ηₜ (see :func:`inverse_time_decay`).
    """
    M, U0, V0, checkpoints = _check_problem(M, U0, V0, mask, steps, checkpoints)
    schedule = _check_step_size(lr)
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs = U0.shape[0]
    draw = _input_sampler(M.shape[1], runs, batch_size, input_factor, data, generator, dtype)
    Mt_T, U, V = tensor(M.T), tensor(U0).clone(), tensor(V0).clone()
    inverse_mean = tensor(1 / mask.mean)
    losses = torch.empty((runs, steps), device=device, dtype=dtype)

    def step(t: int) -> None:
        x = draw()
        b = mask.sample_torch((runs, batch_size), generator, dtype)
        hidden = b * torch.bmm(x, V)
        error = torch.bmm(hidden * inverse_mean, U.transpose(1, 2)) - x @ Mt_T
        losses[:, t] = (error**2).sum(dim=2).mean(dim=1)
        back = b * torch.bmm(error, U)
        scale = schedule(t) / batch_size
        U.baddbmm_(error.transpose(1, 2), hidden, alpha=-scale)
        V.baddbmm_(x.transpose(1, 2), back, alpha=-scale)

    recorded = _train([U, V], steps, checkpoints, step, metrics, keep_weights, progress, "Algorithm 1")
    return _trajectory(U, V, recorded, losses.cpu().numpy().astype(np.float64))


def dropconnect_sgd(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    retain: float,
    lr: StepSize,
    steps: int,
    generator: torch.Generator,
    input_factor: np.ndarray | None = None,
    batch_size: int = 1,
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    keep_weights: bool = True,
    progress: bool = True,
    data: np.ndarray | None = None,
) -> Trajectory:
    """DropConnect SGD for R runs at once, in the convention of :func:`algorithm1`.

    Each step draws B inputs (as in :func:`algorithm1`) and, per input, a mask Z ∈ {0,1}^{d₂×r}
    on the input weights with Z_jk ~ Bernoulli(θ); it forms h = (Z ⊙ V)ᵀx, e = Uh/θ − y (y = Mx)
    and updates U ← U − (ηₜ/B) Σ e hᵀ, V ← V − (ηₜ/B) Σ (x (Uᵀe)ᵀ) ⊙ Z: θ times the gradient of
    ½‖e‖², so that the expected direction is (θ/2)∇f, as for dropout in :func:`algorithm1`."""
    retain = checks.probability(retain, "retain")
    M, U0, V0, checkpoints = _check_problem(M, U0, V0, None, steps, checkpoints)
    schedule = _check_step_size(lr)
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs, (d2, r) = U0.shape[0], V0.shape[1:]
    draw = _input_sampler(d2, runs, batch_size, input_factor, data, generator, dtype)
    Mt_T, U, V = tensor(M.T), tensor(U0).clone(), tensor(V0).clone()
    losses = torch.empty((runs, steps), device=device, dtype=dtype)

    def step(t: int) -> None:
        x = draw()
        Z = (torch.rand((runs, batch_size, d2, r), generator=generator, device=device, dtype=dtype) < retain).to(dtype)
        hidden = torch.einsum("nbj,nbjk,njk->nbk", x, Z, V)
        error = torch.bmm(hidden / retain, U.transpose(1, 2)) - x @ Mt_T
        losses[:, t] = (error**2).sum(dim=2).mean(dim=1)
        back = torch.bmm(error, U)
        scale = schedule(t) / batch_size
        U.baddbmm_(error.transpose(1, 2), hidden, alpha=-scale)
        V.sub_(scale * torch.einsum("nbj,nbk,nbjk->njk", x, back, Z))

    recorded = _train([U, V], steps, checkpoints, step, metrics, keep_weights, progress, "DropConnect SGD")
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

    recorded = _train([U, V], steps, checkpoints, step, metrics, keep_weights, progress, "gradient descent")
    return _trajectory(U, V, recorded, None)


@dataclass
class DeepTrajectory:
    """What deep training records: ``steps`` (the checkpoints), ``metrics[name]`` of shape (C, R, …)
    and ``final_layers``, the weights after the last step, each (R, dᵢ, dᵢ₋₁). numpy float64."""

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    final_layers: list[np.ndarray]


def deep_metrics(M: np.ndarray, lam, S: np.ndarray | None = None) -> Callable[..., dict[str, torch.Tensor]]:
    """Metrics of R deep networks, per run, in float64 on any device: ``objective`` (the exact dropout
    objective, λ a number or one per run), ``sub_regularizers`` (R₁, …, R_k) and ``singular_values``
    of WS^{1/2}, W the network map."""
    constants = {}

    def metrics(*layers: torch.Tensor) -> dict[str, torch.Tensor]:
        layers = [W.double() for W in layers]
        if not constants:
            tensor = lambda a: None if a is None else torch.as_tensor(a, device=layers[0].device, dtype=torch.float64)  # noqa: E731
            constants.update(M=tensor(M), lam=tensor(lam), S=tensor(S),
                             root=None if S is None else tensor(deep.psd_sqrt(S)))
        c = constants
        product = layers[0]
        for W in layers[1:]:
            product = W @ product
        return dict(objective=deep.batched_objective(c["M"], layers, c["lam"], c["S"]),
                    sub_regularizers=deep.batched_sub_regularizers(layers, c["S"]),
                    singular_values=torch.linalg.svdvals(product if c["root"] is None else product @ c["root"]))

    return metrics


def deep_gradient_descent(
    M: np.ndarray,
    layers0: list[np.ndarray],
    lam,
    lr: StepSize,
    steps: int,
    S: np.ndarray | None = None,
    device: torch.device | str = "cpu",
    checkpoints: np.ndarray | None = None,
    metrics: Callable[..., dict[str, torch.Tensor]] | None = None,
    progress: bool = True,
) -> DeepTrajectory:
    """Gradient descent Wᵢ ← Wᵢ − ηₜ ∇_{Wᵢ} f for R deep linear networks at once, f the exact dropout
    objective tr((M − W)S(M − W)ᵀ) + Σ_l λ^l R_l (gradients by autograd). ``layers0``: the initial
    layers, each (R, dᵢ, dᵢ₋₁); ``lam``: λ = (1 − θ)/θ, one number or one per run."""
    M = np.asarray(M, dtype=np.float64)
    layers0 = [np.asarray(W, dtype=np.float64) for W in layers0]
    if len(layers0) < 2 or any(W.ndim != 3 or W.shape[0] != layers0[0].shape[0] for W in layers0):
        raise ValueError("layers0 must hold at least two arrays of shape (R, dᵢ, dᵢ₋₁) with a common R")
    try:
        deep.check_layers([W[0] for W in layers0])
    except ValueError as error:
        raise ValueError(f"layers0 do not chain: {error}") from None
    if (layers0[-1].shape[1], layers0[0].shape[2]) != M.shape or not np.all(np.isfinite(M)):
        raise ValueError(f"M must be a finite {layers0[-1].shape[1]}×{layers0[0].shape[2]} matrix, got shape {M.shape}")
    runs = layers0[0].shape[0]
    lam = checks.weights(lam, "lam", (runs,)).copy()
    checkpoints = _check_checkpoints(steps, checkpoints)
    schedule = _check_step_size(lr)
    device = torch.device(device)
    dtype = _dtype(device)
    tensor = lambda a: None if a is None else torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    M_t, lam_t, C_t = tensor(M), tensor(lam), tensor(S)
    layers = [tensor(W).clone().requires_grad_(True) for W in layers0]

    def step(t: int) -> None:
        gradients = torch.autograd.grad(deep.batched_objective(M_t, layers, lam_t, C_t).sum(), layers)
        with torch.no_grad():
            for W, G in zip(layers, gradients):
                W.sub_(schedule(t) * G)

    recorded = _train(layers, steps, checkpoints, step, metrics, False, progress, "deep gradient descent")
    return DeepTrajectory(steps=recorded[0], metrics=recorded[1], final_layers=[_to_numpy(W) for W in layers])
