"""Two-layer ReLU networks x ↦ uᵀσ(Vᵀx) (no biases): the quantities dropout's regularizer and
capacity bounds are written in (Arora et al. 2021, Section 4).

For hidden unit j with incoming weights vⱼ (column j of V) the activation scale on a sample
X = [x₁ … x_n] is âⱼ = (Ê σ(vⱼᵀxᵢ)²)^{1/2}; its outgoing weight uⱼ carries the *flow*
ψⱼ = |uⱼ| âⱼ. The dropout regularizer is λ Σⱼ uⱼ² âⱼ² = λ‖ψ‖₂², the capacity α = ‖ψ‖₁, and the
co-adaptation measure φ = ‖ψ‖₁ / (√d₁ ‖ψ‖₂) ∈ [1/√d₁, 1] says how evenly the units share the
flow (1: all equal; 1/√d₁: one unit carries it all). Functions are batched over leading
dimensions (runs, rates, widths).
"""

from __future__ import annotations

import numpy as np

from . import checks


def activation_scales(V, X) -> np.ndarray:
    """âⱼ = (1/n Σᵢ σ(vⱼᵀxᵢ)²)^{1/2} for V (…, d₀, d₁) and X (d₀, n): shape (…, d₁)."""
    V, X = checks.matrix(V, "V", batched=True), checks.matrix(X, "X")
    if V.shape[-2] != X.shape[0]:
        raise ValueError(f"V must have {X.shape[0]} rows (the input dimension of X), got shape {V.shape}")
    pre = np.swapaxes(V, -1, -2) @ X
    return np.sqrt(np.mean(np.maximum(pre, 0.0) ** 2, axis=-1))


def coadaptation(u, scales) -> np.ndarray | float:
    """φ = ‖ψ‖₁ / (√d₁ ‖ψ‖₂) with ψⱼ = |uⱼ| âⱼ, for u and ``scales`` (…, d₁) of the same shape;
    a float for one network. Undefined (ValueError) where every flow is zero."""
    u, scales = checks.matrix(u, "u", ndim=1, batched=True), checks.matrix(scales, "scales", ndim=1, batched=True)
    if u.shape != scales.shape:
        raise ValueError(f"scales must have the shape of u {u.shape}, got {scales.shape}")
    if np.any(scales < 0):
        raise checks.error("scales", "non-negative (root mean squares)", scales)
    flow = np.abs(u) * scales
    two = np.linalg.norm(flow, axis=-1)
    if np.any(two == 0):
        raise ValueError("u and scales give a zero flow ψ = |u|·â for some network: φ is undefined")
    phi = flow.sum(-1) / (np.sqrt(flow.shape[-1]) * two)
    return float(phi) if phi.ndim == 0 else phi


def outputs(u, V, X) -> np.ndarray:
    """f(x) = Σⱼ uⱼ σ(vⱼᵀx) for every column x of X (d₀, n), u (…, d₁), V (…, d₀, d₁): shape (…, n)."""
    u, V, X = checks.matrix(u, "u", ndim=1, batched=True), checks.matrix(V, "V", batched=True), checks.matrix(X, "X")
    if V.shape[-2] != X.shape[0] or V.shape[:-2] + V.shape[-1:] != u.shape:
        raise ValueError(f"V must be (…, {X.shape[0]}, d1) with u (…, d1), got shapes {V.shape} and {u.shape}")
    hidden = np.maximum(np.swapaxes(V, -1, -2) @ X, 0.0)
    return np.einsum("...j,...jn->...n", u, hidden)


def clipped_squared_loss(u, V, X, y) -> np.ndarray | float:
    """Ê (yᵢ − g(xᵢ))² with g = Π_[−1,1] ∘ f the clipped network (Arora et al. 2021, Section 4):
    the squared loss the generalization bounds are stated for; X (d₀, n), y (n,); shape (…)."""
    y = checks.matrix(y, "y", ndim=1)
    f = outputs(u, V, X)
    if f.shape[-1] != y.shape[0]:
        raise ValueError(f"y must have one target per column of X ({f.shape[-1]}), got shape {y.shape}")
    loss = np.mean((y - np.clip(f, -1.0, 1.0)) ** 2, axis=-1)
    return float(loss) if loss.ndim == 0 else loss


def symmetrized(X, rng: np.random.Generator) -> np.ndarray:
    """The symmetrized sample: column i of X (d₀, n) multiplied by an independent Rademacher
    sign ζᵢ, drawn once (Arora et al. 2021, Section 4: the data of Theorem 12)."""
    X, rng = checks.matrix(X, "X"), checks.generator(rng, "rng")
    return X * rng.choice((-1.0, 1.0), size=X.shape[1])
