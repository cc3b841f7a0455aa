"""Dropout training of linear networks, batched over independent runs, on :mod:`dropnb.engine`.

R runs advance together as one tensor program: weights carry a leading run dimension
(U: (R, d₁, r), V: (R, d₂, r)), every step draws fresh inputs and masks for all runs at once,
and nothing loops over runs in Python. The program runs on the device of the torch generator
(float64 on the CPU, float32 on a GPU). Metrics such as :func:`objective_metrics` are evaluated
at checkpoints in float64. The shallow steps are written out by hand (closed-form gradients, the
printed algorithm line by line, no autograd graph), and run in :func:`dropnb.engine.descend`.

* :func:`algorithm1` is dropout SGD on fresh samples (Algorithm 1 of Mianjy et al. 2018), with
  minibatches and a step-size schedule as options.
* :func:`dropconnect_sgd` is the same with DropConnect masks on the input weights.
* :func:`gradient_descent` follows the expected direction of Algorithm 1, ½∇f·diag(μ), without
  noise: the deterministic reference for the same step sizes.
* :func:`deep_gradient_descent` does the same for deep linear networks with dropout on every
  hidden layer: gradient descent (:func:`dropnb.engine.train`) on the exact dropout objective of
  :mod:`dropnb.deep`, which is the expected direction of dropout SGD, with a dropout rate per run.
* :func:`relu_classifier_sgd` trains two-layer ReLU classifiers in the NTK scaling by dropout SGD
  on the cross-entropy and tracks the test accuracy of the full network and of its sub-networks.

Conventions: the loss of one sample is ‖y − ŷ‖² (no ½); unit i's incoming weights are column i
of V and its outgoing weights column i of U.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from . import checks, deep
from .engine import Metrics, Run, Schedule, State, descend, train
from .linear import _batched_objective
from .masks import MaskDistribution, PerRun


def objective_metrics(M: np.ndarray, mask: MaskDistribution | PerRun, S: np.ndarray | None = None) -> Metrics:
    """Metrics of the shallow network at a checkpoint, per run, in float64 on any device:
    ``objective`` f (closed form, :func:`dropnb.linear.batched_objective`, with each run's mask for
    a :class:`dropnb.masks.PerRun`), ``loss`` ℓ and ``scores`` αᵢ = ‖uᵢ‖ (vᵢᵀSvᵢ)^{1/2}. Validated
    here, once; not at each checkpoint."""
    M = checks.matrix(M, "M")
    mask = _check_mask(mask)
    S = None if S is None else _check_moment(S, M.shape[1])
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


def _check_moment(S, d2: int) -> np.ndarray:
    """The input second moment S: a symmetric d₂×d₂ matrix."""
    S = checks.symmetric(S, "S")
    if S.shape != (d2, d2):
        raise ValueError(f"S must be {d2}×{d2} to match M, got shape {S.shape}")
    return S


def _check_run(generator, progress, keep=False) -> None:
    checks.torch_generator(generator, "generator")
    checks.flag(progress, "progress")
    checks.flag(keep, "keep")


def _check_mask(mask) -> MaskDistribution | PerRun:
    if not isinstance(mask, (MaskDistribution, PerRun)):
        raise checks.error("mask", "a MaskDistribution, or a masks.PerRun with one per run", mask)
    return mask


def _check_problem(M, U0, V0, mask: MaskDistribution | PerRun | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    Each step t draws, for every run, B = ``batch_size`` inputs (see :func:`_input_sampler`:
    Gaussian x = Az, or columns of a finite input set ``data``), then B masks b, forms
    e = U diag(b/μ) Vᵀx − y (y = Mx) and h = b ⊙ Vᵀx, and updates, with the old weights,
    U ← U − (ηₜ/B) Σ e hᵀ and V ← V − (ηₜ/B) Σ x (b ⊙ Uᵀe)ᵀ. For B = 1 and Bernoulli masks
    (μ = θ𝟙) this is the printed algorithm; its expected direction is ½∇f·diag(μ) = (θ/2)∇f.
    ``lr`` and ``steps`` make a :class:`dropnb.engine.Schedule` (``Schedule.of``). The run's
    state is ``U``, ``V``; its ``losses`` are the minibatch losses ‖e‖² (mean over the batch). A
    :class:`dropnb.masks.PerRun` gives each run its own mask distribution (several rates in one batch).
    """
    _check_mask(mask)
    M, U0, V0 = _check_problem(M, U0, V0, mask)
    _check_run(generator, progress, keep)
    schedule = Schedule.of(lr, steps)
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs = U0.shape[0]
    draw = _input_sampler(M.shape[1], runs, batch_size, input_factor, data, generator, dtype)
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
    """DropConnect SGD for R runs at once, in the convention of :func:`algorithm1`.

    Each step draws B inputs (as in :func:`algorithm1`) and, per input, a mask Z ∈ {0,1}^{d₂×r}
    on the input weights with Z_jk ~ Bernoulli(θ); it forms h = (Z ⊙ V)ᵀx, e = Uh/θ − y (y = Mx)
    and updates U ← U − (ηₜ/B) Σ e hᵀ, V ← V − (ηₜ/B) Σ (x (Uᵀe)ᵀ) ⊙ Z: θ times the gradient of
    ½‖e‖², so that the expected direction is (θ/2)∇f, as for dropout in :func:`algorithm1`."""
    retain = checks.probability(retain, "retain")
    M, U0, V0 = _check_problem(M, U0, V0, None)
    _check_run(generator, progress, keep)
    schedule = Schedule.of(lr, steps)
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    runs, (d2, r) = U0.shape[0], V0.shape[1:]
    draw = _input_sampler(d2, runs, batch_size, input_factor, data, generator, dtype)
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


def gradient_descent(
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
    _check_mask(mask)
    M, U0, V0 = _check_problem(M, U0, V0, mask)
    S = None if S is None else _check_moment(S, M.shape[1])
    checks.flag(progress, "progress")
    checks.flag(keep, "keep")
    schedule = Schedule.of(lr, steps)
    device = torch.device(device)
    dtype = _dtype(device)
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


def deep_metrics(M: np.ndarray, lam, S: np.ndarray | None = None) -> Metrics:
    """Metrics of R deep networks (state ``layers``: W₁, …), per run, in float64 on any device:
    ``objective`` (the exact dropout objective, λ a number or one per run), ``sub_regularizers``
    (R₁, …, R_k) and ``singular_values`` of WS^{1/2}, W the network map. Validated here, once."""
    M = checks.matrix(M, "M")
    checks.weights(lam, "lam")
    S = None if S is None else _check_moment(S, M.shape[1])
    constants = {}

    def metrics(state: State) -> dict[str, torch.Tensor]:
        layers = [W.double() for W in _layers(state)]
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


def _layers(state: State) -> list:
    """The layers W₁, W₂, … of a deep network's state (named ``W1``, ``W2``, …)."""
    return [state[f"W{i + 1}"] for i in range(len(state))]


def _check_deep_start(M, layers0) -> tuple[np.ndarray, list[np.ndarray]]:
    """M and the R runs' initial layers (R, dᵢ, dᵢ₋₁), checked to be finite, real and to chain."""
    M = checks.matrix(M, "M")
    if not isinstance(layers0, (list, tuple)):
        raise ValueError(f"layers0 must be a list of arrays of shape (R, dᵢ, dᵢ₋₁), got a {type(layers0).__name__}")
    layers0 = [checks.matrix(W, f"layers0[{i}]", ndim=3) for i, W in enumerate(layers0)]
    if len(layers0) < 2 or any(W.shape[0] != layers0[0].shape[0] for W in layers0):
        raise ValueError("layers0 must hold at least two arrays of shape (R, dᵢ, dᵢ₋₁) with a common R")
    try:
        deep.check_layers([W[0] for W in layers0])
    except ValueError as error:
        raise ValueError(f"layers0 do not chain: {error}") from None
    if (layers0[-1].shape[1], layers0[0].shape[2]) != M.shape:
        raise ValueError(f"M must be a {layers0[-1].shape[1]}×{layers0[0].shape[2]} matrix, got shape {M.shape}")
    return M, layers0


def deep_gradient_descent(
    M: np.ndarray,
    layers0: list[np.ndarray],
    lam,
    lr,
    steps: int | None,
    S: np.ndarray | None = None,
    device: torch.device | str = "cpu",
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    progress: bool = True,
) -> Run:
    """Gradient descent Wᵢ ← Wᵢ − ηₜ ∇_{Wᵢ} f for R deep linear networks at once, f the exact dropout
    objective tr((M − W)S(M − W)ᵀ) + Σ_l λ^l R_l (gradients by autograd). ``layers0``: the initial
    layers, each (R, dᵢ, dᵢ₋₁); ``lam``: λ = (1 − θ)/θ, one number or one per run. The run's state
    is ``W1``, ``W2``, …"""
    M, layers0 = _check_deep_start(M, layers0)
    runs = layers0[0].shape[0]
    lam = checks.weights(lam, "lam", (runs,)).copy()
    S = None if S is None else _check_moment(S, M.shape[1])
    checks.flag(progress, "progress")
    device = torch.device(device)
    dtype = _dtype(device)
    tensor = lambda a: None if a is None else torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    M_t, lam_t, C_t = tensor(M), tensor(lam), tensor(S)
    layers = {f"W{i + 1}": tensor(W) for i, W in enumerate(layers0)}
    return train(layers, lambda state, _: deep._batched_objective(M_t, _layers(state), lam_t, C_t),
                 Schedule.of(lr, steps), checkpoints=checkpoints, metrics=metrics, progress=progress,
                 description="deep gradient descent")


def deep_dropout_sgd(
    M: np.ndarray,
    layers0: list[np.ndarray],
    lam,
    lr,
    steps: int | None,
    generator: torch.Generator,
    batch_size: int = 1,
    input_factor: np.ndarray | None = None,
    checkpoints: np.ndarray | None = None,
    metrics: Metrics | None = None,
    progress: bool = True,
) -> Run:
    """Dropout SGD on R deep linear networks at once, with dropout on every hidden layer.

    Each step draws, for every run, B = ``batch_size`` inputs x = Az (z ~ N(0, I), A =
    ``input_factor``, I if omitted) and, per input and hidden unit, a mask bᵢ ~ Bernoulli(θ) with
    θ = 1/(1 + λ) of its run; it forms the thinned output ŷ = W_{k+1}D_kW_k⋯D₁W₁x, Dᵢ = diag(bᵢ)/θ,
    the minibatch loss (1/B) Σ ‖Mx − ŷ‖² and updates Wᵢ ← Wᵢ − ηₜ∇_{Wᵢ} of that loss
    (:func:`dropnb.engine.train`). The minibatch loss and its gradient are unbiased for the exact
    objective tr((M − W)S(M − W)ᵀ) + R of :func:`deep_gradient_descent` (S = AAᵀ) and its gradient,
    so the expected step is the step of :func:`deep_gradient_descent`. ``layers0``: (R, dᵢ, dᵢ₋₁)
    each; ``lam``: one number or one per run. Runs on the generator's device (float32 on a GPU).
    """
    M, layers0 = _check_deep_start(M, layers0)
    generator = checks.torch_generator(generator)
    runs = layers0[0].shape[0]
    lam = checks.weights(lam, "lam", (runs,)).copy()
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    batch_size = checks.integer(batch_size, "batch_size")
    A_T = None if input_factor is None else tensor(checks.matrix(input_factor, "input_factor").T)
    if A_T is not None and A_T.shape[1] != M.shape[1]:
        raise ValueError(f"input_factor must have {M.shape[1]} rows, got shape {tuple(A_T.T.shape)}")
    Mt_T, retain = tensor(M.T), tensor(1 / (1 + lam))[:, None, None]
    widths = [W.shape[1] for W in layers0[:-1]]
    d0 = M.shape[1] if A_T is None else A_T.shape[0]

    def batch(t: int) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        # Random numbers are drawn in float32 (half the cost of float64 draws on a CPU) and cast.
        z = torch.randn((runs, batch_size, d0), generator=generator, device=device, dtype=torch.float32).to(dtype)
        uniform = torch.rand((runs, batch_size, sum(widths)), generator=generator, device=device, dtype=torch.float32)
        masks = (uniform.to(dtype) < retain) / retain
        return (z if A_T is None else z @ A_T), masks.split(widths, dim=2)

    def loss(state: State, drawn) -> torch.Tensor:
        x, masks = drawn
        layers = _layers(state)
        h = x
        for W, mask in zip(layers[:-1], masks):
            h = torch.bmm(h, W.transpose(1, 2)) * mask
        error = torch.bmm(h, layers[-1].transpose(1, 2)) - x @ Mt_T
        return (error**2).sum(dim=2).mean(dim=1)

    parameters = {f"W{i + 1}": tensor(W) for i, W in enumerate(layers0)}
    return train(parameters, loss, Schedule.of(lr, steps), data=batch, checkpoints=checkpoints, metrics=metrics,
                 progress=progress, description="deep dropout SGD")


def _check_widths(widths, runs: int, largest: int) -> np.ndarray:
    widths = checks.per_run(widths, "widths", runs, checks.whole)
    if np.any(widths > largest):
        raise ValueError(f"widths must be at most the {largest} columns of the factors, got {widths.max():g}")
    return widths.astype(np.int64)


def _check_ratings(rows, cols, values, n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Aligned observed entries: integer indices in range and finite values."""
    rows, cols = checks.matrix(rows, "rows", ndim=1), checks.matrix(cols, "cols", ndim=1)
    values = checks.matrix(values, "values", ndim=1)
    if not rows.shape == cols.shape == values.shape:
        raise ValueError(f"rows, cols and values must have one entry per rating, got shapes {rows.shape}, "
                         f"{cols.shape} and {values.shape}")
    for name, index, size in (("rows", rows, n_rows), ("cols", cols, n_cols)):
        if np.any(index != np.round(index)) or index.min() < 0 or index.max() >= size:
            raise ValueError(f"{name} must be integer indices in [0, {size}), got values from {index.min():g} "
                             f"to {index.max():g}")
    return rows.astype(np.int64), cols.astype(np.int64), values


def _check_factors(U0, V0) -> tuple[np.ndarray, np.ndarray]:
    U0, V0 = checks.matrix(U0, "U0", ndim=3), checks.matrix(V0, "V0", ndim=3)
    if U0.shape[0] != V0.shape[0] or U0.shape[2] != V0.shape[2]:
        raise ValueError(f"U0 and V0 must be (R, rows, d) and (R, cols, d), got {U0.shape} and {V0.shape}")
    return U0, V0


def completion_metrics(sets: dict, retain, objective: str | None = None, chunk: int = 2**22) -> Metrics:
    """Metrics of R factorizations UVᵀ (state ``U`` (R, n_rows, d), ``V`` (R, n_cols, d)) on sets
    of observed entries, per run, in float64 on any device: for each ``name`` in ``sets`` (a
    mapping of names to ``(rows, cols, values)``), ``<name>_rmse`` = (Ê (y − (UVᵀ)_{ac})²)^{1/2};
    for the set named ``objective`` also ``<name>_objective`` = L̂ + λR̂, the closed form of the
    dropout objective (Arora et al. 2021, eq. 4.2) with R̂ = Ê Σₖ U_{ak}²V_{ck}² and λ = (1 − θ)/θ
    of each run (``retain``: one θ or one per run).
    Entries are processed in chunks of about ``chunk`` numbers."""
    if not isinstance(sets, dict) or not sets:
        raise checks.error("sets", "a non-empty mapping of names to (rows, cols, values)", sets)
    checked = {}
    for name, entries in sets.items():
        checks.text(name, "sets")
        if not isinstance(entries, (tuple, list)) or len(entries) != 3:
            raise checks.error("sets", "a mapping of names to (rows, cols, values) triples", entries)
        rows, cols, values = (checks.matrix(a, "sets", ndim=1) for a in entries)
        checked[name] = _check_ratings(rows, cols, values, int(rows.max()) + 1, int(cols.max()) + 1)
    retain_array = checks.real_array(retain, "retain")
    for value in retain_array.reshape(-1):
        checks.probability(value, "retain")
    if retain_array.ndim > 1 or retain_array.size == 0:
        raise checks.error("retain", "one retain probability or one per run", retain)
    chunk = checks.integer(chunk, "chunk")
    if objective is not None and objective not in checked:
        raise checks.error("objective", f"None or one of the sets {sorted(checked)}", objective)
    constants = {}

    def metrics(state: State) -> dict[str, torch.Tensor]:
        U, V = state["U"], state["V"]
        runs, n_rows, width = U.shape
        device = U.device
        if not constants:
            for name, (rows, cols, values) in checked.items():
                constants[name] = tuple(torch.as_tensor(a, device=device) for a in (rows, cols, values))
            theta = torch.as_tensor(retain_array, device=device, dtype=torch.float64)
            constants["lam"] = (1 - theta) / theta
        out = {}
        offsets_u = (torch.arange(runs, device=device) * n_rows)[:, None]
        offsets_v = (torch.arange(runs, device=device) * V.shape[1])[:, None]
        U_flat, V_flat = U.reshape(-1, width), V.reshape(-1, width)
        step = max(1, chunk // (runs * width))
        for name in checked:
            rows, cols, values = constants[name]
            squared = torch.zeros(runs, dtype=torch.float64, device=device)
            penalty = torch.zeros(runs, dtype=torch.float64, device=device)
            for start in range(0, len(values), step):
                a = (offsets_u + rows[start:start + step]).reshape(-1)
                c = (offsets_v + cols[start:start + step]).reshape(-1)
                uv = (U_flat.index_select(0, a).double() * V_flat.index_select(0, c).double()).view(runs, -1, width)
                squared += (uv.sum(-1) - values[start:start + step]).square().sum(-1)
                if name == objective:
                    penalty += uv.square().sum((-1, -2))
            n = len(values)
            out[f"{name}_rmse"] = (squared / n).sqrt()
            if name == objective:
                out[f"{name}_objective"] = squared / n + constants["lam"] * penalty / n
        return out

    return metrics


_CPU_BLOCK = 2**16  # numbers in a block of runs of completion_sgd's step on a CPU (cache-sized)


def completion_sgd(
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    U0: np.ndarray,
    V0: np.ndarray,
    retain,
    widths,
    lr,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    metrics: Metrics | None = None,
    progress: bool = True,
) -> Run:
    """Dropout SGD for matrix completion, R runs (any mix of dropout rates and widths) as one
    tensor program on the generator's device (float64 on the CPU, float32 on a GPU).

    The model predicts entry (a, c) by (UVᵀ)_{ac} = Σₖ U_{ak}V_{ck}; run ρ uses the first
    ``widths[ρ]`` of the d columns of U0 (R, n_rows, d) and V0 (R, n_cols, d) (the others are
    never used or changed) and keeps each of them with probability θ = ``retain[ρ]``. Each step
    draws for every run its own minibatch of B = ``batch_size`` of the n observed entries
    (``rows``, ``cols``, ``values``), uniformly with replacement (an epoch is ⌈n/B⌉ steps), masks bₖ ~ Bernoulli(θ) per entry and unit, forms the thinned error
    e = Σₖ U_{ak}(bₖ/θ)V_{ck} − y and takes a step on the minibatch loss (1/B) Σ e²:
    U_{a·} ← U_{a·} − ηₜ(2/B) Σ e (b/θ) ⊙ V_{c·}, V_{c·} likewise with the old U (scattered with
    ``scatter_add_``). Given the weights, every minibatch loss is unbiased for the dropout objective L̂ + λR̂ of :func:`completion_metrics` (Arora et al. 2021, eq. 4.2).
    ``lr``: a constant step size or a :class:`dropnb.engine.Schedule` of epochs × steps per
    epoch steps. Checkpoints: the start and every epoch's end. State ``U``, ``V``.
    """
    U0, V0 = _check_factors(U0, V0)
    rows, cols, values = _check_ratings(rows, cols, values, U0.shape[1], V0.shape[1])
    runs, n_rows, width = U0.shape
    n_cols = V0.shape[1]
    retain = checks.per_run(retain, "retain", runs, checks.probability)
    widths = _check_widths(widths, runs, width)
    epochs, batch_size = checks.integer(epochs, "epochs"), checks.integer(batch_size, "batch_size")
    generator = checks.torch_generator(generator)
    checks.flag(progress, "progress")
    if not (np.all(np.isfinite(U0)) and np.all(np.isfinite(V0))):
        raise ValueError("U0 and V0 must be finite")
    n = len(values)
    per_epoch = -(-n // batch_size)
    schedule = Schedule.of(lr, epochs * per_epoch)
    device = generator.device
    dtype = _dtype(device)
    tensor = lambda a, kind=dtype: torch.as_tensor(a, device=device, dtype=kind)  # noqa: E731
    U, V = tensor(U0).clone(), tensor(V0).clone()
    rows_t, cols_t, values_t = tensor(rows, torch.int64), tensor(cols, torch.int64), tensor(values)
    theta = torch.as_tensor(retain, device=device, dtype=torch.float32)[:, None, None]
    in_use = torch.arange(width, device=device)[None, :] < tensor(widths, torch.int64)[:, None]
    rescale = (in_use.to(dtype) / tensor(retain)[:, None])[:, None, :]  # 𝟙[k < width]/θ
    offsets_u = (torch.arange(runs, device=device) * n_rows)[:, None]
    offsets_v = (torch.arange(runs, device=device) * n_cols)[:, None]

    # On a CPU, the runs go through a step in blocks of consecutive runs of one width whose (runs, B,
    # width) intermediates fit in the cache (about 2¹⁶ numbers), each block on its own columns only (no
    # zero-padding): runs touch disjoint rows of the stacked factors, and the masks of the blocks are
    # consecutive draws of one stream, so any such blocking computes the same; on a GPU, one block.
    U_flat, V_flat = U.view(-1, width), V.view(-1, width)
    if device.type == "cpu":
        blocks, start = [], 0
        for r in range(1, runs + 1):
            if r == runs or widths[r] != widths[start] or (r + 1 - start) * batch_size * widths[start] > _CPU_BLOCK:
                blocks.append((start, r, int(widths[start])))
                start = r
    else:
        blocks = [(0, runs, width)]

    def step(t: int, eta: float) -> torch.Tensor:
        picked = torch.randint(n, (runs, batch_size), generator=generator, device=device)
        a_all, c_all = offsets_u + rows_t[picked], offsets_v + cols_t[picked]
        targets, losses = values_t[picked], []
        for first, last, used in blocks:
            a, c = a_all[first:last].reshape(-1), c_all[first:last].reshape(-1)
            U_used, V_used = U_flat[:, :used], V_flat[:, :used]
            # index_select and scatter_add_ rather than advanced indexing and index_add_: the same
            # sums in the same order, at a third of the cost on a CPU (index_add_ goes row by row).
            u = U_used.index_select(0, a).view(-1, batch_size, used)
            v = V_used.index_select(0, c).view(-1, batch_size, used)
            # Uniforms in float32 (half the cost of float64 draws on a CPU), compared with θ in float32.
            b = (torch.rand(u.shape, generator=generator, device=device, dtype=torch.float32) < theta[first:last]
                 ) * rescale[first:last, :, :used]
            bv = b * v
            error = (u * bv).sum(-1) - targets[first:last]
            step_error = (error * (-2 * eta / batch_size))[..., None]
            U_used.scatter_add_(0, a[:, None].expand(-1, used), (step_error * bv).view(-1, used))
            V_used.scatter_add_(0, c[:, None].expand(-1, used), (step_error * (b * u)).view(-1, used))
            losses.append(error.square().mean(-1))
        return losses[0] if len(losses) == 1 else torch.cat(losses)

    return descend(dict(U=U, V=V), step, schedule, checkpoints=per_epoch * np.arange(epochs + 1), metrics=metrics,
                   progress=progress, description="completion SGD")


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
    widths = _check_widths(widths, runs, width)
    epochs, batch_size = checks.integer(epochs, "epochs"), checks.integer(batch_size, "batch_size")
    generator = checks.torch_generator(generator)
    optimizer = checks.choice(optimizer, "optimizer", ("adam", "sgd"))
    checks.flag(progress, "progress")
    n = X.shape[1]
    per_epoch = -(-n // batch_size)
    device = generator.device
    dtype = _dtype(device)
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
    dtype = _dtype(device)
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
