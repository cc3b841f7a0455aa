"""The shallow linear network x ↦ U Vᵀ x with dropout on its r hidden units.

Notation: M ∈ ℝ^{d₁×d₂} the target map (y = Mx), U ∈ ℝ^{d₁×r} the output weights (columns uᵢ),
V ∈ ℝ^{d₂×r} the input weights (columns vᵢ), S = E[xxᵀ] the input second moment (I when omitted),
b a mask with mean μ and characteristic matrix C̄ (see :mod:`dropnb.masks`). The dropout
objective and its closed form are

    f(U, V) = E_{b,x} ‖Mx − U diag(b/μ) Vᵀ x‖²
            = tr((M − UVᵀ) S (M − UVᵀ)ᵀ) + ⟨C̄, UᵀU ⊙ VᵀSV⟩,

which for Bernoulli dropout (C̄ = λI, λ = (1 − θ)/θ) is ℓ(U, V) + λ Σᵢ ‖uᵢ‖² vᵢᵀ S vᵢ. The loss of
one sample is ‖y − ŷ‖² (no ½); unit i's incoming weights are column i of V, its outgoing weights
column i of U.

The numpy functions are exact float64; sampling-based estimates return per-sample values so that
callers can form means and standard errors. The torch functions (:func:`batched_objective`,
:func:`flat_objective`, :func:`column_rotation`) are differentiable.

Training, batched over independent runs on :mod:`dropnb.engine`: R runs advance together as one
tensor program, the weights carrying a leading run dimension (U: (R, d₁, r), V: (R, d₂, r)); every
step draws fresh inputs and masks for all runs at once, and nothing loops over runs in Python. The
program runs on the device of the torch generator (or ``device``), in float64 on the CPU and
float32 on a GPU (:func:`dropnb.checks.float_dtype`); metrics are evaluated at checkpoints in
float64. The steps are written out by hand (closed-form gradients, the printed algorithm line by
line, no autograd graph) and run in :func:`dropnb.engine.descend`.

* :func:`algorithm1` is dropout SGD on fresh samples (Algorithm 1 of Mianjy et al. 2018), with
  minibatches and a step-size schedule as options; :func:`input_sampler` draws its inputs.
* :func:`expected_gradient_descent` follows the expected direction of Algorithm 1, ½∇f·diag(μ),
  without noise: the deterministic reference for the same step sizes.
* :func:`objective_metrics` gives f, ℓ and the unit scores of every run at a checkpoint.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from . import checks
from .engine import Metrics, Run, Schedule, State, descend
from .masks import MaskDistribution, PerRun
from .stats import StreamingMean, chunk_sizes, streaming_mean

_CHUNK = 65536


def check_factors(U, V, S=None):
    """Validate the factors and the input second moment; return float64 (U, V, S), S = I if omitted."""
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same number of columns (width r), got {U.shape} and {V.shape}")
    d2 = V.shape[0]
    S = np.eye(d2) if S is None else checks.matrix(S, "S")
    if S.shape != (d2, d2):
        raise ValueError(f"S must be {d2}×{d2} to match V {V.shape}, got {S.shape}")
    if not np.allclose(S, S.T, rtol=0, atol=1e-12 * max(1.0, np.abs(S).max())):
        raise ValueError("S must be symmetric (it is a second-moment matrix E[xxᵀ])")
    return U, V, S


def check_network(M, U, V, S=None):
    """Validate shapes and values; return float64 arrays (M, U, V, S) with S = I if omitted."""
    M = checks.matrix(M, "M")
    U, V, S = check_factors(U, V, S)
    if U.shape[0] != M.shape[0]:
        raise ValueError(f"U must have {M.shape[0]} rows to match M {M.shape}, got {U.shape}")
    if V.shape[0] != M.shape[1]:
        raise ValueError(f"V must have {M.shape[1]} rows to match M {M.shape}, got {V.shape}")
    return M, U, V, S


def _check_mask(mask: MaskDistribution, width: int) -> MaskDistribution:
    if not isinstance(mask, MaskDistribution):
        raise ValueError(f"mask must be a MaskDistribution, got {type(mask).__name__}")
    if mask.width != width:
        raise ValueError(f"mask must have width {width} to match U and V, got {mask.width}")
    return mask


def expected_loss(M, U, V, S=None) -> float:
    """ℓ(U, V) = E_x ‖Mx − UVᵀx‖² = tr((M − UVᵀ) S (M − UVᵀ)ᵀ) (= ‖M − UVᵀ‖²_F when S = I)."""
    M, U, V, S = check_network(M, U, V, S)
    residual = M - U @ V.T
    return float(np.einsum("ij,jk,ik->", residual, S, residual))


def regularizer(U, V, mask: MaskDistribution, S=None) -> float:
    """R(U, V) = ⟨C̄, UᵀU ⊙ VᵀSV⟩ = Σᵢⱼ C̄ᵢⱼ (uᵢᵀuⱼ)(vᵢᵀSvⱼ), the general dropout regularizer."""
    U, V, S = check_factors(U, V, S)
    mask = _check_mask(mask, U.shape[1])
    return float(np.sum(mask.characteristic * (U.T @ U) * (V.T @ S @ V)))


def bernoulli_regularizer(U, V, retain: float, S=None) -> float:
    """λ Σᵢ ‖uᵢ‖² vᵢᵀ S vᵢ with λ = (1 − θ)/θ: the regularizer of Bernoulli dropout."""
    U, V, S = check_factors(U, V, S)
    lam = dropout_lambda(retain)
    return float(lam * np.sum(np.sum(U**2, axis=0) * np.einsum("ki,kl,li->i", V, S, V)))


def dropout_lambda(retain: float) -> float:
    """λ = (1 − θ)/θ for the retain probability θ ∈ (0, 1]."""
    theta = checks.probability(retain, "retain")
    return (1 - theta) / theta


def path_norm_squared(U, V) -> float:
    """ψ₂²(U, V) = Σ over paths k → i → j (input, hidden, output) of (uⱼᵢ vₖᵢ)², summed path by path."""
    U, V, _ = check_factors(U, V)
    paths = U[:, :, None] * V.T[None, :, :]  # paths[j, i, k] = u_ji v_ki
    return float(np.sum(paths**2))


def objective(M, U, V, mask: MaskDistribution, S=None) -> float:
    """The dropout objective in closed form: ℓ(U, V) + ⟨C̄, UᵀU ⊙ VᵀSV⟩."""
    return expected_loss(M, U, V, S) + regularizer(U, V, mask, S)


def enumerated_objective(M, U, V, mask: MaskDistribution, S=None) -> float:
    """E_b tr((M − U diag(b/μ) Vᵀ) S (·)ᵀ), summed exactly over every mask pattern."""
    M, U, V, S = check_network(M, U, V, S)
    mask = _check_mask(mask, U.shape[1])
    patterns, probs = mask.enumerate()
    step = max(1, _CHUNK // M.size)
    total = 0.0
    for start in range(0, len(probs), step):
        scaled = patterns[start:start + step] / mask.mean
        residuals = M - np.einsum("ji,pi,ki->pjk", U, scaled, V)
        losses = np.einsum("pij,jk,pik->p", residuals, S, residuals)
        total += float(probs[start:start + step] @ losses)
    return total


def sampled_losses(M, U, V, x, b, mean) -> np.ndarray:
    """Per-sample dropout losses ‖Mxₙ − U diag(bₙ/μ) Vᵀ xₙ‖², for inputs x (n, d₂) and masks b (n, r)."""
    M, U, V, _ = check_network(M, U, V)
    x, b = checks.matrix(x, "x"), checks.matrix(b, "b")
    mean = checks.vector(mean, "mean")
    if x.shape[1] != M.shape[1] or b.shape != (x.shape[0], U.shape[1]):
        raise ValueError(f"x must be (n, {M.shape[1]}) and b (n, {U.shape[1]}), got {x.shape} and {b.shape}")
    if mean.shape != (U.shape[1],) or np.any(mean == 0):
        raise ValueError(f"mean must be a non-zero vector of length {U.shape[1]}")
    losses = np.empty(len(x))
    for start in range(0, len(x), _CHUNK):
        xs, bs = x[start:start + _CHUNK], b[start:start + _CHUNK]
        residual = xs @ M.T - ((xs @ V) * (bs / mean)) @ U.T
        losses[start:start + len(xs)] = np.sum(residual**2, axis=1)
    return losses


def monte_carlo_objective(M, U, V, mask: MaskDistribution, draw_inputs: Callable[[int, np.random.Generator], np.ndarray],
                          samples: int, rng: np.random.Generator) -> StreamingMean:
    """Mean and standard error of ‖Mx − U diag(b/μ) Vᵀx‖² over ``samples`` joint draws of an input
    x = ``draw_inputs(n, rng)`` and an independent mask b, streamed in chunks."""
    M, U, V, _ = check_network(M, U, V)
    mask = _check_mask(mask, U.shape[1])
    draw_inputs, rng = checks.function(draw_inputs, "draw_inputs"), checks.generator(rng, "rng")
    samples = checks.integer(samples, "samples")
    return streaming_mean(
        sampled_losses(M, U, V, draw_inputs(n, rng), mask.sample(n, rng), mask.mean) for n in chunk_sizes(samples)
    )


def objective_gradient(M, U, V, mask: MaskDistribution, S=None) -> tuple[np.ndarray, np.ndarray]:
    """∇f in closed form: ∇_U f = −2(M − UVᵀ)SV + 2U(C̄ ⊙ VᵀSV), ∇_V f = −2S(M − UVᵀ)ᵀU + 2SV(C̄ ⊙ UᵀU)."""
    M, U, V, S = check_network(M, U, V, S)
    cbar = _check_mask(mask, U.shape[1]).characteristic
    residual = M - U @ V.T
    grad_u = -2 * residual @ S @ V + 2 * U @ (cbar * (V.T @ S @ V))
    grad_v = -2 * S @ residual.T @ U + 2 * S @ V @ (cbar * (U.T @ U))
    return grad_u, grad_v


def algorithm1_directions(U, V, x, y, b, mean) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample update directions of Algorithm 1 (what the step size η multiplies):

    with e = U diag(b/μ) Vᵀx − y and h = b ⊙ Vᵀx, the direction for U is e hᵀ and for V is
    x (b ⊙ Uᵀe)ᵀ. Shapes (n, d₁, r) and (n, d₂, r).
    """
    U, V, x, y, b = (checks.matrix(a, n) for a, n in ((U, "U"), (V, "V"), (x, "x"), (y, "y"), (b, "b")))
    mean = checks.vector(mean, "mean")
    if U.shape[1] != V.shape[1] or mean.shape != (U.shape[1],) or np.any(mean == 0):
        raise ValueError(f"U and V must have the same number of columns r and mean must be a non-zero vector of "
                         f"length r, got {U.shape}, {V.shape} and {mean.shape}")
    if x.shape[1] != V.shape[0] or y.shape != (x.shape[0], U.shape[0]) or b.shape != (x.shape[0], U.shape[1]):
        raise ValueError(f"x, y, b must be (n, {V.shape[0]}), (n, {U.shape[0]}), (n, {U.shape[1]}); "
                         f"got {x.shape}, {y.shape}, {b.shape}")
    hidden = b * (x @ V)
    error = (hidden / mean) @ U.T - y
    return error[:, :, None] * hidden[:, None, :], x[:, :, None] * (b * (error @ U))[:, None, :]


def batched_objective(M: torch.Tensor, U: torch.Tensor, V: torch.Tensor, cbar: torch.Tensor,
                      S: torch.Tensor | None = None) -> torch.Tensor:
    """The closed-form objective in torch, over any leading batch dimensions of U (…, d₁, r) and
    V (…, d₂, r): tr((M − UVᵀ) S (M − UVᵀ)ᵀ) + ⟨C̄, UᵀU ⊙ VᵀSV⟩ (S = I when omitted).
    Differentiable; validated at entry (:func:`check_batched`); training loops and optimizers call
    the unvalidated core after validating once."""
    if cbar is None:
        raise ValueError("cbar must be the characteristic matrix C̄ of the mask, a (…, r, r) tensor, got None")
    return _batched_objective(*check_batched(M, U, V, cbar, S))


def check_batched(M, U, V, cbar=None, S=None):
    """Validate the torch arguments of :func:`batched_objective` (numpy arrays become float64
    tensors): M (…, d₁, d₂), U (…, d₁, r), V (…, d₂, r), C̄ (…, r, r) or None, S (…, d₂, d₂) or None,
    all of one dtype and device."""
    M, U, V = (checks.tensor(a, name, batched=True) for a, name in ((M, "M"), (U, "U"), (V, "V")))
    (d1, d2), r = M.shape[-2:], U.shape[-1]
    if U.shape[-2] != d1 or V.shape[-2:] != (d2, r):
        raise ValueError(f"U and V must be (…, {d1}, r) and (…, {d2}, r) to match M {tuple(M.shape)}, "
                         f"got {tuple(U.shape)} and {tuple(V.shape)}")
    if cbar is not None:
        cbar = checks.tensor(cbar, "cbar", batched=True)
    if cbar is not None and cbar.shape[-2:] != (r, r):
        raise ValueError(f"cbar must be (…, {r}, {r}) to match U and V, got {tuple(cbar.shape)}")
    if S is not None:
        S = checks.tensor(S, "S", batched=True)
        if S.shape[-2:] != (d2, d2):
            raise ValueError(f"S must be (…, {d2}, {d2}) to match M, got {tuple(S.shape)}")
    checks.same_dtype(dict(M=M, U=U, V=V, cbar=cbar, S=S))
    return M, U, V, cbar, S


def _batched_objective(M, U, V, cbar, S=None):
    """:func:`batched_objective` without validation."""
    residual = M - U @ V.transpose(-1, -2)
    SV = V if S is None else S @ V
    loss = (residual**2).sum((-2, -1)) if S is None else ((residual @ S) * residual).sum((-2, -1))
    return loss + (cbar * (U.transpose(-1, -2) @ U) * (V.transpose(-1, -2) @ SV)).sum((-2, -1))


def flat_objective(M, width: int, lam: float, tied: bool = False, mask: MaskDistribution | None = None, S=None):
    """f as a torch function of one flat vector, for optimizers: x = (vec U, vec V) ↦
    ‖M − UVᵀ‖²_F + λ Σᵢ‖uᵢ‖²‖vᵢ‖², or x = vec U ↦ ‖M − UUᵀ‖²_F + λ Σᵢ‖uᵢ‖⁴ when ``tied``.
    Given a ``mask`` (then ``lam`` is ignored and may be None) and an input second moment ``S``,
    it is the general objective tr((M − UVᵀ)S(M − UVᵀ)ᵀ) + ⟨C̄, UᵀU ⊙ VᵀSV⟩ instead.
    Returns (objective, unpack) where unpack(x) gives the numpy factors (U, V) (V = U if tied)."""
    M, tied = checks.matrix(M, "M"), checks.flag(tied, "tied")
    if tied and M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be square for the tied problem, got shape {M.shape}")
    if tied and (mask is not None or S is not None):
        raise ValueError("the tied problem takes neither a mask nor S")
    (d1, d2), r = M.shape, checks.integer(width, "width")
    if lam is not None:
        checks.nonnegative(lam, "lam")
    cbar = checks.nonnegative(lam, "lam") * np.eye(r) if mask is None else _check_mask(mask, r).characteristic
    if S is not None:
        S = checks.matrix(S, "S")
        if S.shape != (d2, d2):
            raise ValueError(f"S must be ({d2}, {d2}) to match M, got {S.shape}")
    M_t, cbar_t = torch.tensor(M), torch.tensor(cbar)
    S_t = None if S is None else torch.tensor(S)
    split = d1 * r

    def objective(x: torch.Tensor) -> torch.Tensor:
        U = x[:split].reshape(d1, r)
        return _batched_objective(M_t, U, U if tied else x[split:].reshape(d2, r), cbar_t, S_t)

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        U = np.asarray(x[:split]).reshape(d1, r)
        return U, U if tied else np.asarray(x[split:]).reshape(d2, r)

    return objective, unpack


def column_rotation(U: torch.Tensor, i: int, j: int, t: torch.Tensor) -> torch.Tensor:
    """U with columns i and j turned by the angle arcsin t: uᵢ ← √(1−t²)uᵢ + t uⱼ,
    uⱼ ← √(1−t²)uⱼ − t uᵢ. UUᵀ is unchanged; differentiable in t (and U) for |t| < 1."""
    U, t = checks.tensor(U, "U", batched=True), checks.tensor(t, "t", ndim=0)
    i, j = checks.integer(i, "i", minimum=0), checks.integer(j, "j", minimum=0)
    r = U.shape[-1]
    if not (0 <= i < r and 0 <= j < r and i != j):
        raise ValueError(f"i and j must be two different column indices below {r}, got {i} and {j}")
    if not abs(float(t.detach())) < 1:
        raise ValueError(f"t must lie in (-1, 1), got {float(t.detach())!r}")
    c = torch.sqrt(1 - t**2)
    turned = U.clone()
    turned[..., i] = c * U[..., i] + t * U[..., j]
    turned[..., j] = c * U[..., j] - t * U[..., i]
    return turned


def objective_metrics(M: np.ndarray, mask: MaskDistribution | PerRun, S: np.ndarray | None = None) -> Metrics:
    """Metrics of the shallow network at a checkpoint, per run, in float64 on any device:
    ``objective`` f (closed form, :func:`dropnb.linear.batched_objective`, with each run's mask for
    a :class:`dropnb.masks.PerRun`), ``loss`` ℓ and ``scores`` αᵢ = ‖uᵢ‖ (vᵢᵀSvᵢ)^{1/2}. Validated
    here, once; not at each checkpoint."""
    M = checks.matrix(M, "M")
    mask = _check_run_mask(mask)
    S = None if S is None else check_moment(S, M.shape[1])
    constants = {}

    def metrics(state: State) -> dict[str, torch.Tensor]:
        U, V = state["U"].double(), state["V"].double()
        if isinstance(mask, PerRun) and U.shape[0] != mask.runs:
            raise ValueError(f"the state has {U.shape[0]} runs and the mask {mask.runs}")
        if not constants:
            tensor = lambda a: torch.as_tensor(a, device=U.device, dtype=torch.float64)  # noqa: E731
            constants.update(M=tensor(M), cbar=tensor(mask.characteristic), S=None if S is None else tensor(S))
        c = constants
        loss = _batched_objective(c["M"], U, V, torch.zeros_like(c["cbar"]), c["S"])
        SV = V if c["S"] is None else c["S"] @ V
        return dict(objective=_batched_objective(c["M"], U, V, c["cbar"], c["S"]), loss=loss,
                    scores=U.norm(dim=-2) * (V * SV).sum(dim=-2).clamp(min=0).sqrt())

    return metrics


def check_moment(S, d2: int) -> np.ndarray:
    """The input second moment S: a symmetric d₂×d₂ matrix."""
    d2 = checks.integer(d2, "d2")
    S = checks.symmetric(S, "S")
    if S.shape != (d2, d2):
        raise ValueError(f"S must be {d2}×{d2} to match M, got shape {S.shape}")
    return S


def check_run(generator, progress, keep=False) -> None:
    checks.torch_generator(generator, "generator")
    checks.flag(progress, "progress")
    checks.flag(keep, "keep")


def _check_run_mask(mask) -> MaskDistribution | PerRun:
    if not isinstance(mask, (MaskDistribution, PerRun)):
        raise checks.error("mask", "a MaskDistribution, or a masks.PerRun with one per run", mask)
    return mask


def check_start(M, U0, V0, mask: MaskDistribution | PerRun | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    M = checks.matrix(M, "M")
    U0, V0 = checks.matrix(U0, "U0", ndim=3), checks.matrix(V0, "V0", ndim=3)
    if U0.shape[0] != V0.shape[0] or U0.shape[2] != V0.shape[2]:
        raise ValueError(f"U0 and V0 must be (R, d1, r) and (R, d2, r), got {U0.shape} and {V0.shape}")
    if U0.shape[1:2] + V0.shape[1:2] != M.shape:
        raise ValueError(f"U0 and V0 must have {M.shape[0]} and {M.shape[1]} rows to match M, "
                         f"got {U0.shape} and {V0.shape}")
    if mask is not None and (not isinstance(mask, (MaskDistribution, PerRun)) or mask.width != U0.shape[2]
                             or isinstance(mask, PerRun) and mask.runs != U0.shape[0]):
        raise ValueError(f"mask must be a MaskDistribution of width {U0.shape[2]}, or a masks.PerRun of "
                         f"{U0.shape[0]} of them, got {mask!r}")
    return M, U0, V0


def input_sampler(d2: int, runs: int, batch_size: int, input_factor, data, generator: torch.Generator,
                   dtype: torch.dtype) -> Callable[[], torch.Tensor]:
    """A function drawing the inputs of one step, shape (R, B, d₂): x = Az with z ~ N(0, I)
    (A = ``input_factor``, so E[xxᵀ] = AAᵀ; A = I if omitted), or, given ``data`` X (d₂ × N),
    B columns of X drawn uniformly with replacement (so E[xxᵀ] = XXᵀ/N)."""
    d2, runs = checks.integer(d2, "d2"), checks.integer(runs, "runs")
    batch_size = checks.integer(batch_size, "batch_size")
    device = checks.torch_generator(generator, "generator").device
    dtype = checks.float_dtype(dtype, device)
    tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), device=device, dtype=dtype)  # noqa: E731
    if data is not None:
        if input_factor is not None:
            raise ValueError("give either input_factor (Gaussian inputs) or data (a finite input set), not both")
        X = checks.matrix(data, "data")
        if X.shape[0] != d2:
            raise ValueError(f"data must be a ({d2}, N) array of input columns, got shape {X.shape}")
        columns = tensor(X.T)
        return lambda: columns[torch.randint(X.shape[1], (runs, batch_size), generator=generator, device=device)]
    if input_factor is not None and checks.matrix(input_factor, "input_factor").shape != (d2, d2):
        raise ValueError(f"input_factor must be {d2}×{d2} to match M, got shape {np.shape(input_factor)}")
    A_T = None if input_factor is None else tensor(np.asarray(input_factor, dtype=np.float64).T)

    def gaussian() -> torch.Tensor:
        x = torch.randn((runs, batch_size, d2), generator=generator, device=device, dtype=dtype)
        return x if A_T is None else x @ A_T

    return gaussian


def algorithm1(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    mask: MaskDistribution | PerRun,
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
    """Algorithm 1 (dropout with SGD on fresh samples) for R runs at once.

    Each step t draws, for every run, B = ``batch_size`` inputs (see :func:`input_sampler`:
    Gaussian x = Az, or columns of a finite input set ``data``), then B masks b, forms
    e = U diag(b/μ) Vᵀx − y (y = Mx) and h = b ⊙ Vᵀx, and updates, with the old weights,
    U ← U − (ηₜ/B) Σ e hᵀ and V ← V − (ηₜ/B) Σ x (b ⊙ Uᵀe)ᵀ. For B = 1 and Bernoulli masks
    (μ = θ𝟙) this is the printed algorithm; its expected direction is ½∇f·diag(μ) = (θ/2)∇f.
    ``lr`` and ``steps`` make a :class:`dropnb.engine.Schedule` (``Schedule.of``). The run's
    state is ``U``, ``V``; its ``losses`` are the minibatch losses ‖e‖² (mean over the batch). A
    :class:`dropnb.masks.PerRun` gives each run its own mask distribution (several rates in one batch).
    """
    _check_run_mask(mask)
    M, U0, V0 = check_start(M, U0, V0, mask)
    check_run(generator, progress, keep)
    schedule = Schedule.of(lr, steps)
    device = generator.device
    dtype = checks.float_dtype(None, device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs = U0.shape[0]
    draw = input_sampler(M.shape[1], runs, batch_size, input_factor, data, generator, dtype)
    Mt_T, U, V = tensor(M.T), tensor(U0).clone(), tensor(V0).clone()
    inverse_mean = tensor(1 / mask.mean)

    def step(t: int, eta: float) -> torch.Tensor:
        x = draw()
        b = mask.sample_torch((runs, batch_size), generator, dtype)
        hidden = b * torch.bmm(x, V)
        error = torch.bmm(hidden * inverse_mean, U.transpose(1, 2)) - x @ Mt_T
        loss = (error**2).sum(dim=2).mean(dim=1)
        back = b * torch.bmm(error, U)
        scale = eta / batch_size
        U.baddbmm_(error.transpose(1, 2), hidden, alpha=-scale)
        V.baddbmm_(x.transpose(1, 2), back, alpha=-scale)
        return loss

    return descend(dict(U=U, V=V), step, schedule, checkpoints=checkpoints, metrics=metrics, keep=keep,
                   progress=progress, description="Algorithm 1")


def expected_gradient_descent(
    M: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    mask: MaskDistribution | PerRun,
    lr,
    steps: int | None,
    device: torch.device | str = "cpu",
    S: np.ndarray | None = None,
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    keep: bool = False,
    progress: bool = True,
) -> Run:
    """Full-batch gradient descent along the expected direction of Algorithm 1 for R runs at once:
    U ← U − ηₜ · ½∇_U f · diag(μ), V ← V − ηₜ · ½∇_V f · diag(μ), with the closed-form gradient
    ∇_U f = −2(M − UVᵀ)SV + 2U(C̄ ⊙ VᵀSV), ∇_V f = −2S(M − UVᵀ)ᵀU + 2SV(C̄ ⊙ UᵀU) (μ and C̄ of
    each run for a :class:`dropnb.masks.PerRun`)."""
    _check_run_mask(mask)
    M, U0, V0 = check_start(M, U0, V0, mask)
    S = None if S is None else check_moment(S, M.shape[1])
    checks.flag(progress, "progress")
    checks.flag(keep, "keep")
    schedule = Schedule.of(lr, steps)
    device = torch.device(device)
    dtype = checks.float_dtype(None, device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    M_t, U, V = tensor(M), tensor(U0).clone(), tensor(V0).clone()
    S_t = None if S is None else tensor(S)
    cbar, half_mean = tensor(mask.characteristic), tensor(mask.mean / 2)

    def step(t: int, eta: float) -> None:
        residual = M_t - U @ V.transpose(1, 2)
        SV = V if S_t is None else S_t @ V
        back = residual.transpose(1, 2) @ U
        grad_u = -2 * residual @ SV + 2 * U @ (cbar * (V.transpose(1, 2) @ SV))
        grad_v = -2 * (back if S_t is None else S_t @ back) + 2 * SV @ (cbar * (U.transpose(1, 2) @ U))
        U.sub_(eta * grad_u * half_mean)
        V.sub_(eta * grad_v * half_mean)

    return descend(dict(U=U, V=V), step, schedule, checkpoints=checkpoints, metrics=metrics, keep=keep,
                   progress=progress, description="gradient descent")
