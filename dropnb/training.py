"""Dropout training of the shallow linear network, batched over independent runs (torch).

R runs advance together as one tensor program: weights carry a leading run dimension
(U: (R, d₁, r), V: (R, d₂, r)) and every step draws fresh inputs and masks for all runs at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from .masks import MaskDistribution


@dataclass
class Trajectory:
    """What :func:`algorithm1` records.

    ``losses[n, t]``: the single-sample dropout loss of run n at step t (before its update);
    ``steps``: the checkpoint steps, sorted and without repeats; ``U[c]``, ``V[c]``: the weights at checkpoint c (numpy float64).
    """

    losses: np.ndarray
    steps: np.ndarray
    U: np.ndarray
    V: np.ndarray


def log_checkpoints(steps: int, count: int) -> np.ndarray:
    """About ``count`` distinct integers from 0 to ``steps``, log-spaced (0 and ``steps`` included)."""
    if steps < 1 or count < 2:
        raise ValueError(f"steps must be ≥ 1 and count ≥ 2, got {steps} and {count}")
    return np.unique(np.concatenate([[0], np.geomspace(1, steps, count - 1).round().astype(int)]))


def algorithm1(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    mask: MaskDistribution,
    lr: float,
    steps: int,
    generator: torch.Generator,
    input_factor: np.ndarray | None = None,
    checkpoints: np.ndarray | None = None,
    progress: bool = True,
) -> Trajectory:
    """Algorithm 1 (dropout with SGD, one fresh sample a step) for R runs at once.

    Each step draws x = A z with z ~ N(0, I) (A = ``input_factor``, so E[xxᵀ] = AAᵀ; A = I if
    omitted), y = Mx and a mask b, forms e = U diag(b/μ) Vᵀx − y, h = b ⊙ Vᵀx, and updates
    U ← U − η e hᵀ, V ← V − η x (b ⊙ Uᵀe)ᵀ (both with the old weights). For Bernoulli masks
    (μ = θ𝟙) this is the printed algorithm; its expected direction is (θ/2)∇f.
    """
    M = np.asarray(M, dtype=np.float64)
    U0, V0 = np.asarray(U0, dtype=np.float64), np.asarray(V0, dtype=np.float64)
    if U0.ndim != 3 or V0.ndim != 3 or U0.shape[0] != V0.shape[0] or U0.shape[2] != V0.shape[2]:
        raise ValueError(f"U0 and V0 must be (R, d1, r) and (R, d2, r), got {U0.shape} and {V0.shape}")
    if U0.shape[1:2] + V0.shape[1:2] != M.shape:
        raise ValueError(f"U0 and V0 must have {M.shape[0]} and {M.shape[1]} rows to match M, "
                         f"got {U0.shape} and {V0.shape}")
    if mask.width != U0.shape[2]:
        raise ValueError(f"mask must have width {U0.shape[2]}, got {mask.width}")
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    checkpoints = log_checkpoints(steps, 40) if checkpoints is None else np.unique(np.asarray(checkpoints, dtype=int))
    if checkpoints.size == 0 or checkpoints.min() < 0 or checkpoints.max() > steps:
        raise ValueError(f"checkpoints must be a non-empty set of steps in [0, {steps}]")

    device, dtype = generator.device, torch.float64 if generator.device.type == "cpu" else torch.float32
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs, d2 = U0.shape[0], M.shape[1]
    M_t, U, V = tensor(M), tensor(U0).clone(), tensor(V0).clone()
    A = tensor(np.eye(d2) if input_factor is None else input_factor)
    inverse_mean = tensor(1 / mask.mean)
    losses = torch.empty((runs, steps), device=device, dtype=dtype)
    snapshots_u, snapshots_v, wanted = [], [], set(checkpoints.tolist())

    for t in tqdm(range(steps + 1), disable=not progress, desc="Algorithm 1", mininterval=1.0):
        if t in wanted:
            snapshots_u.append(U.cpu().numpy().astype(np.float64))
            snapshots_v.append(V.cpu().numpy().astype(np.float64))
        if t == steps:
            break
        x = torch.randn((runs, d2), generator=generator, device=device, dtype=dtype) @ A.T
        y = x @ M_t.T
        b = mask.sample_torch(runs, generator, dtype)
        hidden = b * torch.einsum("nki,nk->ni", V, x)
        error = torch.einsum("nji,ni->nj", U, hidden * inverse_mean) - y
        losses[:, t] = (error**2).sum(dim=1)
        back = b * torch.einsum("nji,nj->ni", U, error)
        U -= lr * error[:, :, None] * hidden[:, None, :]
        V -= lr * x[:, :, None] * back[:, None, :]

    return Trajectory(losses=losses.cpu().numpy().astype(np.float64), steps=checkpoints,
                      U=np.stack(snapshots_u), V=np.stack(snapshots_v))
