"""Deep linear networks with Bernoulli dropout on every hidden layer.

A network of depth k + 1 is a list of layers W₁ ∈ ℝ^{d₁×d₀}, …, W_{k+1} ∈ ℝ^{d_{k+1}×d_k}; its map
is W = W_{k+1}⋯W₁. Dropout multiplies hidden layer i by D_i = diag(bᵢ)/θ with bᵢ ~ Bernoulli(θ)
independently, so the thinned map is W̄ = W_{k+1}D_kW_k⋯D₁W₁ and E[W̄] = W. For inputs with second
moment C = E[xxᵀ] and targets y = Mx the dropout objective splits as

    E‖y − W̄x‖² = tr((M − W)C(M − W)ᵀ) + R,   R = E_b tr((W̄ − W)C(W̄ − W)ᵀ),

and this module computes R three ways: exactly over every mask (small networks), by propagating
second moments layer by layer (E[DAD] = A + λ Diag(A), λ = (1 − θ)/θ), and as the sum over pivot
sets of the explicit regularizer of Mianjy, Arora and Vidal (2019).
"""

from __future__ import annotations

import itertools

import numpy as np

from .linear import check_matrix, check_rate, dropout_lambda
from .masks import MAX_ENUMERATION


def check_layers(layers, C=None) -> tuple[list[np.ndarray], np.ndarray]:
    """Validate W₁, …, W_{k+1} (consecutive shapes must chain) and C (d₀×d₀, symmetric; I if
    omitted); return float64 copies. At least two layers (one hidden layer) are required."""
    layers = [check_matrix(W, f"layers[{i}]") for i, W in enumerate(layers)]
    if len(layers) < 2:
        raise ValueError(f"layers must hold at least two matrices (one hidden layer), got {len(layers)}")
    for i in range(1, len(layers)):
        if layers[i].shape[1] != layers[i - 1].shape[0]:
            raise ValueError(f"layers[{i}] must have {layers[i - 1].shape[0]} columns to follow layers[{i - 1}] "
                             f"{layers[i - 1].shape}, got {layers[i].shape}")
    d0 = layers[0].shape[1]
    C = np.eye(d0) if C is None else check_matrix(C, "C")
    if C.shape != (d0, d0) or not np.allclose(C, C.T, rtol=0, atol=1e-12 * max(1.0, np.abs(C).max())):
        raise ValueError(f"C must be a symmetric {d0}×{d0} matrix, got shape {C.shape}")
    return layers, C


def network_map(layers) -> np.ndarray:
    """W_{k+1→1} = W_{k+1}⋯W₁."""
    layers, _ = check_layers(layers)
    return _product(layers)


def _product(layers) -> np.ndarray:
    out = layers[0]
    for W in layers[1:]:
        out = W @ out
    return out


def effective_rate(hidden_widths, lam: float) -> float:
    """ν = Σ over non-empty sets J of hidden layers of λ^{|J|}/∏_{j∈J} d_j = ∏ᵢ(1 + λ/dᵢ) − 1."""
    widths = np.asarray(hidden_widths)
    if widths.ndim != 1 or widths.size == 0 or np.any(widths < 1) or not np.all(widths == np.round(widths)):
        raise ValueError(f"hidden_widths must be a non-empty list of positive integers, got {hidden_widths!r}")
    return float(np.prod(1 + check_rate(lam) / widths.astype(float)) - 1)


def moment_regularizer(layers, retain: float, C=None) -> float:
    """R by second-moment propagation: S₀ = C, Sᵢ = WᵢSᵢ₋₁Wᵢᵀ + λ Diag(WᵢSᵢ₋₁Wᵢᵀ) for the hidden
    layers i = 1…k, then R = tr(W_{k+1}S_kW_{k+1}ᵀ) − tr(WCWᵀ). Cost O(k d³)."""
    layers, C = check_layers(layers, C)
    lam = dropout_lambda(retain)
    S = C
    for W in layers[:-1]:
        S = W @ S @ W.T
        S = S + lam * np.diag(np.diag(S))
    W_out, W = layers[-1], _product(layers)
    return float(np.trace(W_out @ S @ W_out.T) - np.trace(W @ C @ W.T))


def pivot_regularizer(layers, retain: float, C=None) -> float:
    """R = Σ_J λ^{|J|} R_J over non-empty pivot sets J = (j₁ < … < j_l) of hidden layers, with
    R_J = (γ²)ᵀ B_{l−1}^{∘2} ⋯ B₁^{∘2} α²: α² = diag(W_{j₁→1} C W_{j₁→1}ᵀ) (head), B_p = W_{j_{p+1}→j_p+1}
    (middle, squared entrywise), γ² the squared column norms of W_{k+1→j_l+1} (tail)."""
    layers, C = check_layers(layers, C)
    lam = dropout_lambda(retain)
    k = len(layers) - 1
    total = 0.0
    for size in range(1, k + 1):
        for pivots in itertools.combinations(range(1, k + 1), size):
            head = _product(layers[:pivots[0]])
            weights = np.diag(head @ C @ head.T)
            for before, after in zip(pivots, pivots[1:]):
                weights = _product(layers[before:after]) ** 2 @ weights
            tail = _product(layers[pivots[-1]:])
            total += lam**size * float(np.sum(tail**2, axis=0) @ weights)
    return total


def enumerated_regularizer(layers, retain: float, C=None) -> float:
    """R = Σ_b P(b) tr((W̄_b − W)C(W̄_b − W)ᵀ), summed exactly over all masks of all hidden units."""
    layers, C = check_layers(layers, C)
    lam = dropout_lambda(retain)
    theta = 1 / (1 + lam)
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
        total += probability * float(np.trace(difference @ C @ difference.T))
    return total


def objective(M, layers, retain: float, C=None) -> float:
    """The dropout objective E‖Mx − W̄x‖² = tr((M − W)C(M − W)ᵀ) + R (R by moment propagation)."""
    layers, C = check_layers(layers, C)
    M = check_matrix(M, "M")
    W = _product(layers)
    if M.shape != W.shape:
        raise ValueError(f"M must have the shape {W.shape} of the network map, got {M.shape}")
    residual = M - W
    return float(np.trace(residual @ C @ residual.T)) + moment_regularizer(layers, retain, C)
