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
