"""DropConnect on the input weights of the shallow linear network x ↦ UVᵀx.

DropConnect (Section 4 of Pal et al.) drops *entries* of V instead of hidden units: a mask
Z ∈ {0,1}^{d₂×r} with independent Zⱼₖ ~ Bernoulli(θ) gives the network x ↦ U ((Z ⊙ V)/θ)ᵀ x.
With W = (Z ⊙ V)/θ (so E W = V) and δ = (W − V)ᵀx, the k-th hidden coordinate of the noise is
δₖ = Σⱼ (Zⱼₖ/θ − 1) Vⱼₖ xⱼ: mean zero, independent across k (different columns of Z) and

    Var δₖ = Σⱼ Var(Zⱼₖ/θ) Vⱼₖ² xⱼ² = λ Σⱼ Vⱼₖ² xⱼ²,   λ = (1 − θ)/θ,

because the Zⱼₖ are independent across j as well. Hence E_Z‖Mx − UWᵀx‖² = ‖(M − UVᵀ)x‖² +
Σₖ ‖uₖ‖² Var δₖ, and taking E_x with S = E[xxᵀ] gives the DropConnect objective

    f_DC(U, V) = tr((M − UVᵀ) S (M − UVᵀ)ᵀ) + λ Σₖ ‖uₖ‖² Σⱼ Vⱼₖ² Sⱼⱼ
               = ℓ(U, V) + λ Σₖ ‖uₖ‖² vₖᵀ Diag(S) vₖ.

Only the diagonal of S enters the penalty: it is dropout's λ Σₖ ‖uₖ‖² vₖᵀ S vₖ with S replaced
by Diag(S). For a finite data set (S = XXᵀ) Sⱼⱼ = ‖xʲ‖², the squared norm of the j-th input
row. The paper's Theorem 4.1 states the dropout penalty instead (its step (54)→(55) uses
Var(Σⱼ zⱼaⱼ) = θ(1 − θ)‖Σⱼ aⱼ‖² in place of θ(1 − θ)Σⱼ‖aⱼ‖²); the two agree for every U, V
exactly when S is diagonal.

Numpy functions are exact float64 with the validation of :mod:`dropnb.linear`; sampling-based
estimates return per-sample values so that callers can form means and standard errors.
:func:`dropconnect_sgd` trains R runs at once by DropConnect SGD, in the conventions of
:func:`dropnb.linear.algorithm1` (leading run dimension, the generator's device, float64 on the CPU
and float32 on a GPU, the loss of one sample ‖y − ŷ‖² with no ½).
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import torch

from . import checks, linear
from .engine import Metrics, Run, Schedule, descend
from .masks import MAX_ENUMERATION, Bernoulli
from .stats import StreamingMean, chunk_sizes, streaming_mean

_CHUNK = 65536


def regularizer(U, V, retain: float, S=None) -> float:
    """The exact DropConnect penalty λ Σₖ ‖uₖ‖² Σⱼ Vⱼₖ² Sⱼⱼ = λ Σₖ ‖uₖ‖² vₖᵀ Diag(S) vₖ, λ = (1 − θ)/θ.

    It equals dropout's λ Σₖ ‖uₖ‖² vₖᵀ S vₖ (:func:`printed_regularizer`) for every U, V exactly
    when S is diagonal; the paper's Theorem 4.1 claims that it always does.
    """
    U, V, S = linear.check_factors(U, V, S)
    lam = linear.dropout_lambda(retain)
    return float(lam * np.sum(np.sum(U**2, axis=0) * (np.diag(S) @ V**2)))


def printed_regularizer(U, V, retain: float, S=None) -> float:
    """The penalty printed in the paper's Theorem 4.1, λ Σₖ ‖uₖ‖² ‖S^{1/2} vₖ‖² = λ Σₖ ‖uₖ‖² vₖᵀ S vₖ:
    dropout's penalty (:func:`dropnb.linear.bernoulli_regularizer`), not DropConnect's unless S is diagonal."""
    return linear.bernoulli_regularizer(U, V, retain, S)


def objective(M, U, V, retain: float, S=None) -> float:
    """The DropConnect objective in closed form: tr((M − UVᵀ) S (M − UVᵀ)ᵀ) + λ Σₖ ‖uₖ‖² vₖᵀ Diag(S) vₖ."""
    return linear.expected_loss(M, U, V, S) + regularizer(U, V, retain, S)


def enumerated_objective(M, U, V, retain: float, S=None) -> float:
    """E_Z tr((M − U(Z ⊙ V)ᵀ/θ) S (M − U(Z ⊙ V)ᵀ/θ)ᵀ), summed exactly over all 2^{d₂r} masks Z
    with probabilities θ^{|Z|}(1 − θ)^{d₂r − |Z|}; only for d₂r ≤ log₂ MAX_ENUMERATION."""
    M, U, V, S = linear.check_network(M, U, V, S)
    theta = checks.probability(retain, "retain")
    entries = V.size
    if 2**entries > MAX_ENUMERATION:
        raise ValueError(f"V has {entries} entries, so there are 2^{entries} DropConnect masks; "
                         f"enumeration is limited to {MAX_ENUMERATION}")
    masks = np.array(list(itertools.product((0.0, 1.0), repeat=entries))).reshape(-1, *V.shape)
    kept = masks.sum(axis=(1, 2))
    probs = theta**kept * (1 - theta) ** (entries - kept)
    step = max(1, _CHUNK // M.size)
    total = 0.0
    for start in range(0, len(probs), step):
        weights = masks[start:start + step] * V / theta  # (p, d₂, r)
        residuals = M - np.einsum("ik,pjk->pij", U, weights)
        losses = np.einsum("pij,jk,pik->p", residuals, S, residuals)
        total += float(probs[start:start + step] @ losses)
    return total


def sample_masks(shape: int | tuple[int, ...], d2: int, width: int, retain: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Independent DropConnect masks Z, shape (*shape, d₂, r), float64, entries Bernoulli(θ).

    They are :class:`dropnb.masks.Bernoulli` masks of width d₂·r reshaped row-major, so
    ``Bernoulli(d2 * width, retain).sample_torch(shape, generator).reshape(*shape, d2, width)``
    draws them in torch."""
    d2, width = checks.integer(d2, "d2"), checks.integer(width, "width")
    shape, rng = checks.shape(shape, "shape"), checks.generator(rng, "rng")
    masks = Bernoulli(d2 * width, retain).sample(shape, rng)
    return masks.reshape(*masks.shape[:-1], d2, width)


def sampled_losses(M, U, V, x, Z, retain: float) -> np.ndarray:
    """Per-sample DropConnect losses ‖Mxₙ − U((Zₙ ⊙ V)/θ)ᵀ xₙ‖², for inputs x (n, d₂) and masks Z (n, d₂, r)."""
    M, U, V, _ = linear.check_network(M, U, V)
    x, Z = checks.matrix(x, "x"), checks.matrix(Z, "Z", ndim=3)
    theta = checks.probability(retain, "retain")
    if x.shape[1] != M.shape[1] or Z.shape != (x.shape[0], *V.shape):
        raise ValueError(f"x must be (n, {M.shape[1]}) and Z (n, {V.shape[0]}, {V.shape[1]}), "
                         f"got {x.shape} and {Z.shape}")
    losses = np.empty(len(x))
    for start in range(0, len(x), _CHUNK):
        xs, Zs = x[start:start + _CHUNK], Z[start:start + _CHUNK]
        hidden = np.einsum("nj,njk,jk->nk", xs, Zs, V) / theta
        residual = xs @ M.T - hidden @ U.T
        losses[start:start + len(xs)] = np.sum(residual**2, axis=1)
    return losses


def monte_carlo_objective(M, U, V, retain: float, draw_inputs: Callable[[int, np.random.Generator], np.ndarray],
                          samples: int, rng: np.random.Generator) -> StreamingMean:
    """Mean and standard error of ‖Mx − U((Z ⊙ V)/θ)ᵀx‖² over ``samples`` joint draws of an input
    x = ``draw_inputs(n, rng)`` and an independent mask Z, streamed in chunks."""
    M, U, V, _ = linear.check_network(M, U, V)
    theta = checks.probability(retain, "retain")
    draw_inputs, rng = checks.function(draw_inputs, "draw_inputs"), checks.generator(rng, "rng")
    samples = checks.integer(samples, "samples")
    return streaming_mean(
        sampled_losses(M, U, V, draw_inputs(n, rng), sample_masks(n, *V.shape, theta, rng), theta)
        for n in chunk_sizes(samples)
    )


def batched_objective(M: torch.Tensor, U: torch.Tensor, V: torch.Tensor, lam: float | torch.Tensor,
                      S: torch.Tensor | None = None) -> torch.Tensor:
    """The DropConnect objective in torch, over any leading batch dimensions of U (…, d₁, r) and
    V (…, d₂, r): tr((M − UVᵀ) S (M − UVᵀ)ᵀ) + λ Σₖ ‖uₖ‖² Σⱼ Vⱼₖ² Sⱼⱼ (S = I when omitted).
    Differentiable; validated at entry (the counterpart of :func:`dropnb.linear.batched_objective`)."""
    M, U, V, _, S = linear.check_batched(M, U, V, None, S)
    return _batched_objective(M, U, V, checks.tensor_weights(lam, "lam"), S)


def _batched_objective(M, U, V, lam, S=None):
    """:func:`batched_objective` without validation."""
    residual = M - U @ V.transpose(-1, -2)
    if S is None:
        loss = (residual**2).sum((-2, -1))
        weighted = (V**2).sum(-2)
    else:
        loss = ((residual @ S) * residual).sum((-2, -1))
        weighted = (torch.diagonal(S, dim1=-2, dim2=-1).unsqueeze(-1) * V**2).sum(-2)
    return loss + lam * ((U**2).sum(-2) * weighted).sum(-1)


def dropconnect_sgd(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    retain: float,
    lr,
    steps: int | None,
    generator: torch.Generator,
    input_factor: np.ndarray | None = None,
    batch_size: int = 1,
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    keep: bool = False,
    progress: bool = True,
    data: np.ndarray | None = None,
) -> Run:
    """DropConnect SGD for R runs at once, in the convention of :func:`dropnb.linear.algorithm1`.

    Each step draws B inputs (as in :func:`dropnb.linear.algorithm1`) and, per input, a mask Z ∈ {0,1}^{d₂×r}
    on the input weights with Z_jk ~ Bernoulli(θ); it forms h = (Z ⊙ V)ᵀx, e = Uh/θ − y (y = Mx)
    and updates U ← U − (ηₜ/B) Σ e hᵀ, V ← V − (ηₜ/B) Σ (x (Uᵀe)ᵀ) ⊙ Z: θ times the gradient of
    ½‖e‖², so that the expected direction is (θ/2)∇f, as for dropout in :func:`dropnb.linear.algorithm1`."""
    retain = checks.probability(retain, "retain")
    M, U0, V0 = linear.check_start(M, U0, V0, None)
    linear.check_run(generator, progress, keep)
    schedule = Schedule.of(lr, steps)
    device = generator.device
    dtype = checks.float_dtype(None, device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs, (d2, r) = U0.shape[0], V0.shape[1:]
    draw = linear.input_sampler(d2, runs, batch_size, input_factor, data, generator, dtype)
    Mt_T, U, V = tensor(M.T), tensor(U0).clone(), tensor(V0).clone()

    def step(t: int, eta: float) -> torch.Tensor:
        x = draw()
        Z = (torch.rand((runs, batch_size, d2, r), generator=generator, device=device, dtype=dtype) < retain).to(dtype)
        hidden = torch.einsum("nbj,nbjk,njk->nbk", x, Z, V)
        error = torch.bmm(hidden / retain, U.transpose(1, 2)) - x @ Mt_T
        loss = (error**2).sum(dim=2).mean(dim=1)
        back = torch.bmm(error, U)
        scale = eta / batch_size
        U.baddbmm_(error.transpose(1, 2), hidden, alpha=-scale)
        V.sub_(scale * torch.einsum("nbj,nbk,nbjk->njk", x, back, Z))
        return loss

    return descend(dict(U=U, V=V), step, schedule, checkpoints=checkpoints, metrics=metrics, keep=keep,
                   progress=progress, description="DropConnect SGD")
