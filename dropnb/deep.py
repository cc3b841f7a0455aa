"""Deep linear networks with Bernoulli dropout on every hidden layer.

A network of depth k + 1 is a list of layers W₁ ∈ ℝ^{d₁×d₀}, …, W_{k+1} ∈ ℝ^{d_{k+1}×d_k}; its map
is W = W_{k+1}⋯W₁. Dropout multiplies hidden layer i by D_i = diag(bᵢ)/θ with bᵢ ~ Bernoulli(θ)
independently, so the thinned map is W̄ = W_{k+1}D_kW_k⋯D₁W₁ and E[W̄] = W. For inputs with second
moment S = E[xxᵀ] and targets y = Mx the dropout objective splits as

    E‖y − W̄x‖² = tr((M − W)S(M − W)ᵀ) + R,   R = E_b tr((W̄ − W)S(W̄ − W)ᵀ) = Σ_{l=1}^k λ^l R_l,

with λ = (1 − θ)/θ. This module computes R three ways: exactly over every mask (small networks),
by propagating second moments layer by layer (E[DAD] = A + λ Diag(A)), and as the sum over pivot
sets of Mianjy, Arora and Vidal (2019). It also gives the effective rate ν, the convex envelope
ν‖WS^{1/2}‖²_* of the induced regularizer, the equalization gaps, the equalized implementation of
a rank-one map and the global optimum under the eigengap condition.

Training, R networks at once (each layer (R, dᵢ, dᵢ₋₁), a leading run dimension; state ``W1``,
``W2``, …), through :func:`dropnb.engine.train` on any device (float64 on the CPU, float32 on a
GPU); the loss of one sample is ‖y − ŷ‖² (no ½):

* :func:`deep_gradient_descent` is gradient descent on the exact dropout objective above (the
  expected direction of dropout SGD), with a dropout rate per run;
* :func:`deep_dropout_sgd` is dropout SGD on fresh Gaussian inputs, with dropout on every hidden layer;
* :func:`deep_metrics` gives the objective, the R_l and the singular values at a checkpoint (float64).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from . import checks, linear
from .engine import Metrics, Run, Schedule, State, train
from .linear import dropout_lambda
from .masks import MAX_ENUMERATION
from .shrinkage import support, optimal_value


def check_layers(layers, S=None) -> tuple[list[np.ndarray], np.ndarray]:
    """Validate W₁, …, W_{k+1} (consecutive shapes must chain) and S (d₀×d₀, symmetric; I if
    omitted); return float64 copies. At least two layers (one hidden layer) are required."""
    layers = [checks.matrix(W, f"layers[{i}]") for i, W in enumerate(layers)]
    if len(layers) < 2:
        raise ValueError(f"layers must hold at least two matrices (one hidden layer), got {len(layers)}")
    for i in range(1, len(layers)):
        if layers[i].shape[1] != layers[i - 1].shape[0]:
            raise ValueError(f"layers[{i}] must have {layers[i - 1].shape[0]} columns to follow layers[{i - 1}] "
                             f"{layers[i - 1].shape}, got {layers[i].shape}")
    d0 = layers[0].shape[1]
    S = np.eye(d0) if S is None else checks.matrix(S, "S")
    if S.shape != (d0, d0) or not np.allclose(S, S.T, rtol=0, atol=1e-12 * max(1.0, np.abs(S).max())):
        raise ValueError(f"S must be a symmetric {d0}×{d0} matrix, got shape {S.shape}")
    return layers, S


def check_widths(widths, name: str = "hidden_widths") -> np.ndarray:
    """A non-empty 1-d array of positive integer widths."""
    array = np.asarray(widths) if not isinstance(widths, (str, bytes)) else np.asarray([])
    if array.dtype.kind not in "iuf" or array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)) \
            or not np.all(array == np.round(array)) or np.any(array < 1):
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {widths!r}")
    return array.astype(int)


def psd_sqrt(S) -> np.ndarray:
    """S^{1/2} of a symmetric positive semidefinite S (eigendecomposition, negative rounding clipped)."""
    S = checks.symmetric(S, "S")
    values, vectors = np.linalg.eigh(S)
    return (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T


def network_map(layers) -> np.ndarray:
    """W_{k+1→1} = W_{k+1}⋯W₁."""
    layers, _ = check_layers(layers)
    return _product(layers)


def _product(layers):
    out = layers[0]
    for W in layers[1:]:
        out = W @ out
    return out


def envelope_weights(hidden_widths) -> np.ndarray:
    """e_l = Σ_{|J| = l} 1/∏_{j∈J} d_j for l = 1…k: the coefficients of t^l in ∏ᵢ(1 + t/dᵢ).
    The lower bound of Lemma 7 is R_l ≥ e_l‖WS^{1/2}‖²_*, and ν = Σ_l λ^l e_l."""
    coefficients = np.ones(1)
    for d in check_widths(hidden_widths):
        coefficients = np.convolve(coefficients, [1.0, 1.0 / d])
    return coefficients[1:]


def effective_rate(hidden_widths, lam: float) -> float:
    """ν = Σ over non-empty sets J of hidden layers of λ^{|J|}/∏_{j∈J} d_j = ∏ᵢ(1 + λ/dᵢ) − 1."""
    widths = check_widths(hidden_widths).astype(float)
    return float(np.prod(1 + checks.nonnegative(lam, "lam") / widths) - 1)


def check_batched_layers(layers, S=None, name: str = "layers") -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """Validate torch layers W₁, …, W_{k+1} (each (…, dᵢ, dᵢ₋₁), finite, real; numpy arrays become
    float64 tensors; at least two, chaining) and S (…, d₀, d₀) or None; return them as tensors
    (floating tensors unchanged, autograd graphs kept; all of one dtype and device). One check per call: the batched functions
    below validate through it at entry; training loops call their unvalidated cores."""
    if not isinstance(layers, (list, tuple)) or len(layers) < 2:
        got = f"{len(layers)} of them" if isinstance(layers, (list, tuple)) else f"a {type(layers).__name__}"
        raise ValueError(f"{name} must be a list of at least two weight matrices (one hidden layer), got {got}")
    layers = [checks.tensor(W, f"{name}[{i}]", batched=True) for i, W in enumerate(layers)]
    for i in range(1, len(layers)):
        if layers[i].shape[-1] != layers[i - 1].shape[-2]:
            raise ValueError(f"{name}[{i}] must have {layers[i - 1].shape[-2]} columns to follow {name}[{i - 1}] "
                             f"{tuple(layers[i - 1].shape)}, got {tuple(layers[i].shape)}")
    d0 = layers[0].shape[-1]
    if S is not None:
        S = checks.tensor(S, "S", batched=True)
        if S.shape[-2:] != (d0, d0):
            raise ValueError(f"S must be {d0}×{d0} to match {name}[0], got shape {tuple(S.shape)}")
    checks.same_dtype({**{f"{name}[{i}]": W for i, W in enumerate(layers)}, "S": S})
    return layers, S


def batched_sub_regularizers(layers: list[torch.Tensor], S: torch.Tensor | None = None) -> torch.Tensor:
    """(R₁, …, R_k) along a new last axis, batched over leading dimensions of the layers; R_l is the
    coefficient of λ^l in R. Second moments are propagated as polynomials in λ: P = S, then for each
    hidden layer P ← WPWᵀ and P_l ← P_l + Diag(P_{l−1}); finally R_l = tr(W_{k+1}P_lW_{k+1}ᵀ), a
    sum of non-negative terms. Differentiable; validated at entry (:func:`check_batched_layers`).
    Cost O(k² d³) per network."""
    return _batched_sub_regularizers(*check_batched_layers(layers, S))


def _batched_sub_regularizers(layers, S=None):
    k = len(layers) - 1
    first = layers[0]
    d0 = first.shape[-1]
    start = torch.eye(d0, dtype=first.dtype, device=first.device) if S is None else S
    P = torch.zeros((k + 1, *first.shape[:-2], d0, d0), dtype=first.dtype, device=first.device)
    P[0] = start
    for W in layers[:-1]:
        P = W @ P @ W.transpose(-1, -2)
        shifted = torch.diag_embed(torch.diagonal(P[:-1], dim1=-2, dim2=-1))
        P = torch.cat([P[:1], P[1:] + shifted])
    out = layers[-1]
    terms = ((out @ P[1:]) * out).sum((-2, -1))
    return torch.movedim(terms, 0, -1)


def batched_regularizer(layers: list[torch.Tensor], lam: torch.Tensor | float,
                        S: torch.Tensor | None = None) -> torch.Tensor:
    """R = tr(W_{k+1}P_kW_{k+1}ᵀ) − tr(WSWᵀ) with P₀ = S and Pᵢ = T(WᵢPᵢ₋₁Wᵢᵀ), T(A) = A + λ Diag(A),
    over leading batch dimensions (λ a number or a tensor of the batch shape). The cheap form,
    O(k d³), for training; differentiable; validated at entry (:func:`check_batched_layers`)."""
    layers, S = check_batched_layers(layers, S)
    return _batched_regularizer(layers, checks.tensor_weights(lam, "lam"), S)


def _batched_regularizer(layers, lam, S=None):
    first = layers[0]
    d0 = first.shape[-1]
    P = torch.eye(d0, dtype=first.dtype, device=first.device) if S is None else S
    lam = torch.as_tensor(lam, dtype=first.dtype, device=first.device)[..., None]
    for W in layers[:-1]:
        P = W @ P @ W.transpose(-1, -2)
        P = P + torch.diag_embed(lam * torch.diagonal(P, dim1=-2, dim2=-1))
    out, product = layers[-1], _product(layers)
    SW = product.transpose(-1, -2) if S is None else S @ product.transpose(-1, -2)
    return ((out @ P) * out).sum((-2, -1)) - (product * SW.transpose(-1, -2)).sum((-2, -1))


def batched_objective(M: torch.Tensor, layers: list[torch.Tensor], lam: torch.Tensor | float,
                      S: torch.Tensor | None = None) -> torch.Tensor:
    """tr((M − W)S(M − W)ᵀ) + R over leading batch dimensions (:func:`batched_regularizer`);
    validated at entry (M: (…, d_{k+1}, d₀))."""
    layers, S = check_batched_layers(layers, S)
    M = checks.tensor(M, "M", batched=True)
    if M.shape[-2:] != (layers[-1].shape[-2], layers[0].shape[-1]):
        raise ValueError(f"M must be {layers[-1].shape[-2]}×{layers[0].shape[-1]} to match the layers, "
                         f"got shape {tuple(M.shape)}")
    checks.same_dtype({"layers[0]": layers[0], "M": M})
    return _batched_objective(M, layers, checks.tensor_weights(lam, "lam"), S)


def _batched_objective(M, layers, lam, S=None):
    """:func:`batched_objective` without validation, for training loops (validate once at entry)."""
    residual = M - _product(layers)
    loss = (residual**2).sum((-2, -1)) if S is None else ((residual @ S) * residual).sum((-2, -1))
    return loss + _batched_regularizer(layers, lam, S)


def _torch(layers, S):
    return [torch.as_tensor(W) for W in layers], torch.as_tensor(S)


def sub_regularizers(layers, S=None) -> np.ndarray:
    """(R₁, …, R_k) by second-moment propagation (:func:`batched_sub_regularizers`)."""
    layers, S = check_layers(layers, S)
    return batched_sub_regularizers(*_torch(layers, S)).numpy()


def moment_regularizer(layers, retain: float, S=None) -> float:
    """R = Σ_l λ^l R_l with the R_l from second-moment propagation. Cost O(k² d³)."""
    sub = sub_regularizers(layers, S)
    return float(np.polyval(np.append(sub[::-1], 0.0), dropout_lambda(retain)))


def pivot_sub_regularizers(layers, S=None) -> np.ndarray:
    """(R₁, …, R_k) of Proposition 8: R_l = Σ over pivot sets J = (j₁ < … < j_l) of hidden layers of
    R_J = (γ²)ᵀ B_{l−1}^{∘2} ⋯ B₁^{∘2} α², with α² = diag(W_{j₁→1} S W_{j₁→1}ᵀ) (head), B_p = W_{j_{p+1}→j_p+1}
    (middle, squared entrywise) and γ² the squared column norms of W_{k+1→j_l+1} (tail)."""
    layers, S = check_layers(layers, S)
    k = len(layers) - 1
    sub = np.zeros(k)
    for size in range(1, k + 1):
        for pivots in itertools.combinations(range(1, k + 1), size):
            head = _product(layers[:pivots[0]])
            weights = np.diag(head @ S @ head.T)
            for before, after in zip(pivots, pivots[1:]):
                weights = _product(layers[before:after]) ** 2 @ weights
            sub[size - 1] += float(np.sum(_product(layers[pivots[-1]:]) ** 2, axis=0) @ weights)
    return sub


def pivot_regularizer(layers, retain: float, S=None) -> float:
    """R = Σ_l λ^l R_l with the R_l of Proposition 8 (:func:`pivot_sub_regularizers`)."""
    sub = pivot_sub_regularizers(layers, S)
    return float(np.polyval(np.append(sub[::-1], 0.0), dropout_lambda(retain)))


def enumerated_regularizer(layers, retain: float, S=None) -> float:
    """R = Σ_b P(b) tr((W̄_b − W)S(W̄_b − W)ᵀ), summed exactly over all masks of all hidden units."""
    layers, S = check_layers(layers, S)
    theta = checks.probability(retain, "retain")
    widths = [W.shape[0] for W in layers[:-1]]
    if 2 ** sum(widths) > MAX_ENUMERATION:
        raise ValueError(f"too many hidden units to enumerate ({sum(widths)}); at most {int(np.log2(MAX_ENUMERATION))}")
    W = _product(layers)
    total = 0.0
    for mask in itertools.product((0.0, 1.0), repeat=sum(widths)):
        bits = np.split(np.array(mask), np.cumsum(widths)[:-1])
        thinned = layers[0]
        for b, layer in zip(bits, layers[1:]):
            thinned = layer @ (b[:, None] / theta * thinned)
        kept = sum(mask)
        probability = theta**kept * (1 - theta) ** (len(mask) - kept)
        difference = thinned - W
        total += probability * float(np.trace(difference @ S @ difference.T))
    return total


def sampled_regularizer(layers, retain: float, n: int, rng: np.random.Generator, input_factor=None) -> np.ndarray:
    """n independent samples of ‖(W̄ − W)x‖² with fresh masks and inputs x = Az, z ~ N(0, I)
    (A = ``input_factor``, so S = AAᵀ; A = I if omitted). Their mean estimates R."""
    layers, _ = check_layers(layers)
    theta = checks.probability(retain, "retain")
    n, rng = checks.integer(n, "n"), checks.generator(rng, "rng")
    d0 = layers[0].shape[1]
    if input_factor is None:
        x = rng.standard_normal((n, d0))
    else:
        A = checks.matrix(input_factor, "input_factor")
        if A.shape[0] != d0:
            raise ValueError(f"input_factor must have {d0} rows, got shape {A.shape}")
        x = rng.standard_normal((n, A.shape[1])) @ A.T
    thinned = x
    for W in layers[:-1]:
        thinned = (thinned @ W.T) * (rng.random((n, W.shape[0])) < theta) / theta
    difference = thinned @ layers[-1].T - x @ _product(layers).T
    return np.sum(difference**2, axis=1)


def objective(M, layers, retain: float, S=None) -> float:
    """The dropout objective E‖Mx − W̄x‖² = tr((M − W)S(M − W)ᵀ) + R (R by moment propagation)."""
    layers, S = check_layers(layers, S)
    M = checks.matrix(M, "M")
    W = _product(layers)
    if M.shape != W.shape:
        raise ValueError(f"M must have the shape {W.shape} of the network map, got {M.shape}")
    residual = M - W
    return float(np.trace(residual @ S @ residual.T)) + moment_regularizer(layers, retain, S)


def equalization_gaps(layers, S=None) -> np.ndarray:
    """r_l = R_l/(e_l‖WS^{1/2}‖²_*) − 1 for l = 1…k (Figure 3-3 of the thesis): each is ≥ 0 by
    Lemma 7, and all vanish exactly when the network is equalized. ∞ where the map is zero and R_l > 0."""
    layers, S = check_layers(layers, S)
    bound = envelope_weights([W.shape[0] for W in layers[:-1]]) * nuclear_norm(_product(layers), S) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return sub_regularizers(layers, S) / bound - 1


def nuclear_norm(W, S=None) -> float:
    """‖WS^{1/2}‖_*."""
    W = checks.matrix(W, "W")
    if S is not None and np.shape(checks.matrix(S, "S")) != (W.shape[1],) * 2:
        raise ValueError(f"S must be {W.shape[1]}×{W.shape[1]} to match W {W.shape}, got shape {np.shape(S)}")
    return float(np.linalg.svd(W if S is None else W @ psd_sqrt(S), compute_uv=False).sum())


def rank_one_implementation(u, v, hidden_widths) -> list[np.ndarray]:
    """The equalized implementation of uvᵀ of Proposition 1: W₁ = 𝟙vᵀ/√d₁,
    Wᵢ = 𝟙𝟙ᵀ/√(dᵢdᵢ₋₁) (2 ≤ i ≤ k), W_{k+1} = u𝟙ᵀ/√d_k. Its R equals ν‖uvᵀS^{1/2}‖²_* for every S."""
    u, v = checks.matrix(u, "u", ndim=1), checks.matrix(v, "v", ndim=1)
    widths = check_widths(hidden_widths)
    layers = [np.outer(np.ones(widths[0]), v) / np.sqrt(widths[0])]
    layers += [np.ones((b, a)) / np.sqrt(a * b) for a, b in zip(widths, widths[1:])]
    return layers + [np.outer(u, np.ones(widths[-1])) / np.sqrt(widths[-1])]


def balanced_implementation(W, hidden_widths) -> list[np.ndarray]:
    """Layers with every factor Σ^{1/(k+1)} of the SVD W = AΣBᵀ: W₁ = Σ^{1/(k+1)}Bᵀ, Wᵢ = Σ^{1/(k+1)},
    W_{k+1} = AΣ^{1/(k+1)}, zero-padded to the widths; needs rank W ≤ min dᵢ."""
    W, widths = checks.matrix(W, "W"), check_widths(hidden_widths)
    A, s, Bt = np.linalg.svd(W, full_matrices=False)
    rank = int(np.sum(s > s[0] * max(W.shape) * np.finfo(float).eps)) if s.size and s[0] > 0 else 0
    if rank > widths.min():
        raise ValueError(f"W has rank {rank}, more than the narrowest hidden width {widths.min()}")
    root = s[:rank] ** (1 / (len(widths) + 1))
    sizes = [W.shape[1], *widths, W.shape[0]]
    layers = [np.zeros((sizes[i + 1], sizes[i])) for i in range(len(sizes) - 1)]
    layers[0][:rank] = root[:, None] * Bt[:rank]
    for layer in layers[1:-1]:
        layer[:rank, :rank] = np.diag(root)
    layers[-1][:, :rank] = A[:, :rank] * root
    return layers


@dataclass(frozen=True)
class DeepOptimum:
    """The minimizer of the convex lower bound tr((M − W)S(M − W)ᵀ) + ν‖WS^{1/2}‖²_* over rank W ≤ r
    (Lemma 9): its ``rank`` ρ, ``threshold`` α_ρ = ν(σ₁ + … + σ_ρ)/(1 + ρν) on the singular values σ
    of M̃ = MS^{1/2}, minimum ``value``, map ``W`` = 𝒮_α(M̃)S^{−1/2} (top ρ pairs only), ``rate`` ν, and
    ``layers``: the equalized implementation (Proposition 1) when ρ ≤ 1, else None. When ρ ≤ 1 (the
    eigengap condition σ₁ − σ₂ ≥ σ₂/ν of Theorem 10) it is the global optimum of the deep network."""

    rank: int
    threshold: float
    value: float
    W: np.ndarray
    rate: float
    layers: list[np.ndarray] | None


def global_optimum(M, hidden_widths, lam: float, S=None) -> DeepOptimum:
    """Lemma 9 and Theorem 10 of Mianjy, Arora and Vidal (2019) for targets y = Mx, E[xxᵀ] = S ≻ 0.
    The envelope problem in W̃ = WS^{1/2} is the shallow problem of :mod:`dropnb.shrinkage` with
    width r = min dᵢ and weight νr, whose thresholds νr hⱼ/(r + νrj) = ν hⱼ/(1 + νj) are the α_j."""
    M, widths = checks.matrix(M, "M"), check_widths(hidden_widths)
    S = np.eye(M.shape[1]) if S is None else checks.matrix(S, "S")
    if S.shape != (M.shape[1],) * 2 or np.linalg.eigvalsh((S + S.T) / 2).min() <= 0:
        raise ValueError(f"S must be a positive definite {M.shape[1]}×{M.shape[1]} matrix to match M {M.shape}")
    nu = effective_rate(widths, lam)
    root = psd_sqrt(S)
    A, s, Bt = np.linalg.svd(M @ root, full_matrices=False)
    r = int(min(widths.min(), *M.shape))
    rho, alpha = support(s, r, nu * r)
    W = (A[:, :rho] * (s[:rho] - alpha)) @ Bt[:rho] @ np.linalg.inv(root)
    layers = None
    if rho <= 1:
        u = A[:, 0] * (s[0] - alpha) if rho else np.zeros(M.shape[0])
        layers = rank_one_implementation(u, np.linalg.solve(root, Bt[0]), widths)
    return DeepOptimum(rank=rho, threshold=alpha, value=optimal_value(s, r, nu * r), W=W, rate=nu, layers=layers)


def flat_objective(M, architecture, lam: float, S=None):
    """The dropout objective as a torch function of one flat vector of all layers, for optimizers.
    ``architecture`` = (d₀, d₁, …, d_{k+1}). Returns (objective, unpack), unpack(x) giving the layers."""
    M = checks.matrix(M, "M")
    sizes = check_widths(architecture, "architecture")
    if len(sizes) < 3 or (sizes[-1], sizes[0]) != M.shape:
        raise ValueError(f"architecture must be (d₀, d₁, …, d_{{k+1}}) with d_{{k+1}}×d₀ = {M.shape}, the shape of M, "
                         f"got {architecture!r}")
    lam = checks.nonnegative(lam, "lam")
    S = np.eye(M.shape[1]) if S is None else checks.matrix(S, "S")
    if S.shape != (M.shape[1],) * 2:
        raise ValueError(f"S must be {M.shape[1]}×{M.shape[1]} to match M {M.shape}, got shape {S.shape}")
    shapes = [(int(sizes[i + 1]), int(sizes[i])) for i in range(len(sizes) - 1)]
    ends = np.cumsum([a * b for a, b in shapes])
    M_t, C_t = torch.tensor(M), torch.tensor(S)

    def split(x):
        return [x[end - a * b:end].reshape(a, b) for end, (a, b) in zip(ends, shapes)]

    def objective(x: torch.Tensor) -> torch.Tensor:
        return _batched_objective(M_t, split(x), lam, C_t)

    return objective, lambda x: [np.asarray(W) for W in split(np.asarray(x))]


def deep_metrics(M: np.ndarray, lam, S: np.ndarray | None = None) -> Metrics:
    """Metrics of R deep networks (state ``layers``: W₁, …), per run, in float64 on any device:
    ``objective`` (the exact dropout objective, λ a number or one per run), ``sub_regularizers``
    (R₁, …, R_k) and ``singular_values`` of WS^{1/2}, W the network map. Validated here, once."""
    M = checks.matrix(M, "M")
    checks.weights(lam, "lam")
    S = None if S is None else linear.check_moment(S, M.shape[1])
    constants = {}

    def metrics(state: State) -> dict[str, torch.Tensor]:
        layers = [W.double() for W in _layers(state)]
        if not constants:
            tensor = lambda a: None if a is None else torch.as_tensor(a, device=layers[0].device, dtype=torch.float64)  # noqa: E731
            constants.update(M=tensor(M), lam=tensor(lam), S=tensor(S),
                             root=None if S is None else tensor(psd_sqrt(S)))
        c = constants
        product = layers[0]
        for W in layers[1:]:
            product = W @ product
        return dict(objective=batched_objective(c["M"], layers, c["lam"], c["S"]),
                    sub_regularizers=batched_sub_regularizers(layers, c["S"]),
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
        check_layers([W[0] for W in layers0])
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
    S = None if S is None else linear.check_moment(S, M.shape[1])
    checks.flag(progress, "progress")
    device = torch.device(device)
    dtype = checks.float_dtype(None, device)
    tensor = lambda a: None if a is None else torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731
    M_t, lam_t, C_t = tensor(M), tensor(lam), tensor(S)
    layers = {f"W{i + 1}": tensor(W) for i, W in enumerate(layers0)}
    return train(layers, lambda state, _: _batched_objective(M_t, _layers(state), lam_t, C_t),
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
    dtype = checks.float_dtype(None, device)
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
