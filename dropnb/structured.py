"""Structured dropout (DropBlock): the squared spectral s-support norm and its global optimum.

Width r hidden units form k = r/s blocks of s consecutive units; each block is kept with
probability θ, λ = (1 − θ)/θ (Pal et al. 2020, whose d, r, β, β̄ and Theorem 2.7 tail index λ are
the book's r, s, λ, λ̄ and ℓ). With Uⱼ, Vⱼ the columns of block j and S the input second moment,
the DropBlock regularizer is

    R(U, V) = λ Σⱼ αⱼ²,   αⱼ = ‖Uⱼ Vⱼᵀ S^{1/2}‖_F,

and for a fixed width r and fixed θ every network is bounded below by

    F* = min_A ‖Y − A‖²_F + λ̄ ‖A‖²_(s),   Y = M S^{1/2},  λ̄ = (s/r) λ,

where ‖A‖²_(s) is the squared spectral s-support norm of A (a function of its singular values).
For a ≥ 0 sorted non-increasingly (zero-padded to length s), Tᵨ = Σ_{i ≥ ρ} aᵢ and a₀ = +∞,

    ‖a‖²_(s) = Σ_{i < ρ*} aᵢ² + T_{ρ*}²/(s − ρ* + 1),
    ρ* = the unique ρ ∈ {1..s} with a_{ρ−1} > Tᵨ/(s − ρ + 1) ≥ aᵨ
       = the largest ρ with the left inequality

(Argyriou, Foygel, Srebro 2012, Prop. 2.1), and ‖a‖²_(s) = inf{Σ aᵢ²/tᵢ : 0 < tᵢ ≤ 1, Σ tᵢ ≤ s}.
It is ‖a‖₁² for s = 1 and ‖a‖₂² once s ≥ the number of non-zero aᵢ. (The paper's rule "ρ* maximises
formula (11)" is wrong; :func:`ksupport_candidates` lists (11) for every ρ with its feasibility.)

The vector problem min_a ‖m − a‖² + λ̄‖a‖²_(s) (m the spectrum of Y) is solved twice: by
water-filling on the variational form (:func:`prox`), and by Theorem 2.7's candidates a_{ρ,ℓ}
(ridge head mᵢ/(1 + λ̄), soft-thresholded tail) scored with the true objective
(:func:`closed_form`). :func:`duplicate` and :func:`balanced_replication` are the constructions of
Lemma 2.2 (no capacity control at fixed θ) and Theorem 2.5 (balanced blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import checks
from .linear import check_factors, dropout_lambda
from .masks import MaskDistribution


def _check_vector(values, name: str, descending: bool = False) -> np.ndarray:
    """A non-empty, finite, non-negative float64 vector (non-increasing if ``descending``)."""
    v = checks.matrix(values, name, ndim=1)
    if v.size == 0:
        raise ValueError(f"{name} must have at least one entry")
    if np.any(v < 0):
        raise ValueError(f"{name} must be non-negative")
    if descending and np.any(np.diff(v) > 0):
        raise ValueError(f"{name} must be sorted non-increasingly")
    return v


def _check_blocks(width: int, block_size: int) -> int:
    """The block size s as an int; ValueError unless it is a positive integer dividing the width r."""
    s = checks.integer(block_size, "block_size")
    if width % s:
        raise ValueError(f"block_size must divide the width, got width {width} and block_size {block_size}")
    return s


def _root(S, size: int) -> np.ndarray:
    """S^{1/2}, the symmetric square root of a positive semidefinite size×size S (I when S is None).

    Eigenvalues below n·ε·λ_max(S) (ε = 2⁻⁵², rounding level) count as zero: their square roots
    (≈ 1e-8 λ_max^{1/2}) would otherwise give a singular S a spurious full-rank root."""
    if S is None:
        return np.eye(size)
    S = checks.matrix(S, "S")
    if S.shape != (size, size):
        raise ValueError(f"S must be {size}×{size} to match M (or V), got {S.shape}")
    scale = max(1.0, np.abs(S).max())
    if not np.allclose(S, S.T, rtol=0, atol=1e-12 * scale):
        raise ValueError("S must be symmetric (it is a second-moment matrix E[xxᵀ])")
    values, vectors = np.linalg.eigh((S + S.T) / 2)
    if values[0] < -1e-12 * scale:
        raise ValueError(f"S must be positive semidefinite (smallest eigenvalue {values[0]:.3g})")
    values[values < size * np.finfo(float).eps * values[-1]] = 0.0
    return (vectors * np.sqrt(values)) @ vectors.T


def _bisect(lo: float, hi: float, above) -> tuple[float, float]:
    """The final bracket (lo, hi) of a bisection that keeps ``above(lo)`` false and ``above(hi)``
    true, run until the midpoint equals an end, i.e. until lo and hi are adjacent doubles."""
    while lo < (mid := 0.5 * (lo + hi)) < hi:
        if above(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def ksupport_candidates(a, s: int) -> tuple[np.ndarray, np.ndarray]:
    """For ρ = 1..s: the value Σ_{i<ρ} aᵢ² + Tᵨ²/(s − ρ + 1) of the paper's formula (11) and
    whether ρ is feasible, a_{ρ−1} > Tᵨ/(s − ρ + 1) (a sorted non-increasingly, zero-padded to
    length s, Tᵨ = Σ_{i≥ρ} aᵢ, a₀ = +∞; ρ = 1 is always feasible)."""
    a, s = _check_vector(a, "a"), checks.integer(s, "s")
    a = np.concatenate([np.sort(a)[::-1], np.zeros(max(0, s - len(a)))])
    tails = np.cumsum(a[::-1])[::-1][:s]
    heads = np.concatenate([[0.0], np.cumsum(a[: s - 1] ** 2)])
    share = tails / (s - np.arange(s))
    feasible = np.concatenate([[True], a[: s - 1] > share[1:]])
    return heads + tails * share, feasible


def support_index(a, s: int) -> int:
    """ρ* of ‖a‖²_(s): the largest ρ ∈ {1..s} with a_{ρ−1} > Tᵨ/(s − ρ + 1), which is also the
    unique ρ with a_{ρ−1} > Tᵨ/(s − ρ + 1) ≥ aᵨ (Argyriou et al. 2012, Prop. 2.1)."""
    _, feasible = ksupport_candidates(a, s)
    return int(np.flatnonzero(feasible)[-1]) + 1


def ksupport_squared(a, s: int) -> float:
    """‖a‖²_(s) = Σ_{i<ρ*} aᵢ² + T_{ρ*}²/(s − ρ* + 1), the candidate of formula (11) at ρ*."""
    values, feasible = ksupport_candidates(a, s)
    return float(values[np.flatnonzero(feasible)[-1]])


def spectral_ksupport_squared(A, s: int) -> float:
    """‖A‖²_(s) = ‖σ(A)‖²_(s) on the singular values σ(A) of a matrix A."""
    A = checks.matrix(A, "A")
    if A.size == 0:
        raise ValueError(f"A must be non-empty, got shape {A.shape}")
    return ksupport_squared(np.linalg.svd(A, compute_uv=False), s)


def ksupport_variational(a, s: int) -> float:
    """‖a‖²_(s) = inf{Σ aᵢ²/tᵢ : 0 < tᵢ ≤ 1, Σ tᵢ ≤ s}, independently of ρ*.

    With at most s non-zero aᵢ the value is ‖a‖²₂ (tᵢ = 1 on the support, tᵢ → 0 off it).
    Otherwise tᵢ = min(1, aᵢ/τ) over the non-zero aᵢ, with τ ∈ [min aᵢ, ‖a‖₁/s] found by
    bisection on Σ tᵢ = s until τ's bracket is two adjacent doubles; τ is its upper end, where
    Σ tᵢ ≤ s.
    """
    a, s = _check_vector(a, "a"), checks.integer(s, "s")
    a = a[a > 0]
    if len(a) <= s:
        return float(np.sum(a**2))
    _, tau = _bisect(a.min(), a.sum() / s, lambda tau: np.sum(np.minimum(1.0, a / tau)) <= s)
    return float(np.sum(a**2 / np.minimum(1.0, a / tau)))


def convex_objective(m, a, s: int, lam_bar: float) -> float:
    """F(a) = ‖m − a‖² + λ̄ ‖a‖²_(s): the convex problem on spectra whose minimum is F*."""
    m, a = _check_vector(m, "m"), _check_vector(a, "a")
    if a.shape != m.shape:
        raise ValueError(f"a must have the shape of m {m.shape}, got {a.shape}")
    return float(np.sum((m - a) ** 2) + checks.nonnegative(lam_bar, "lam_bar") * ksupport_squared(a, s))


def prox(m, s: int, lam_bar: float) -> tuple[np.ndarray, float]:
    """The minimiser a and minimum of ‖m − a‖² + λ̄‖a‖²_(s) by water-filling (m ≥ 0, any order).

    Minimising Σ (mᵢ − aᵢ)² + λ̄ aᵢ²/tᵢ over a gives aᵢ = mᵢtᵢ/(tᵢ + λ̄) and the value
    Σ mᵢ² λ̄/(tᵢ + λ̄); minimising that over 0 ≤ tᵢ ≤ 1, Σ tᵢ ≤ s gives tᵢ = clip(mᵢu − λ̄, 0, 1)
    with u found by bisection on Σ tᵢ = s (bracket [λ̄/max m, (1 + λ̄)/min_{mᵢ>0} mᵢ], run until
    it is two adjacent doubles; u is its lower end, where Σ tᵢ ≤ s). With at most s non-zero mᵢ,
    t = 𝟙 (ridge: a = m/(1 + λ̄)); with λ̄ = 0, a = m and the value is 0.
    """
    m, s, lam_bar = _check_vector(m, "m"), checks.integer(s, "s"), checks.nonnegative(lam_bar, "lam_bar")
    if lam_bar == 0:
        return m.copy(), 0.0
    positive = m[m > 0]
    if len(positive) <= s:
        t = np.ones_like(m)
    else:
        u, _ = _bisect(lam_bar / positive.max(), (1 + lam_bar) / positive.min(),
                    lambda u: np.sum(np.clip(positive * u - lam_bar, 0.0, 1.0)) >= s)
        t = np.clip(m * u - lam_bar, 0.0, 1.0)
    return m * t / (t + lam_bar), float(np.sum(m**2 * lam_bar / (t + lam_bar)))


def closed_form_candidates(m, s: int, lam_bar: float) -> list[tuple[int, int, np.ndarray]]:
    """Theorem 2.7's candidates (ρ, ℓ, a_{ρ,ℓ}), ρ ∈ {1..s}, ℓ ∈ {1..n} (m non-increasing, n = len m):

    aᵢ = mᵢ/(1 + λ̄) for i < ρ and i ≤ ℓ (ridge head), aᵢ = (mᵢ − λ̄S/c)₊ for ρ ≤ i ≤ ℓ (soft-
    thresholded tail), aᵢ = 0 for i > ℓ, with S = Σ_{i=ρ}^{ℓ} mᵢ and c = (s − ρ + 1) + λ̄(ℓ − ρ + 1).
    """
    m, s, lam_bar = _check_vector(m, "m", descending=True), checks.integer(s, "s"), checks.nonnegative(lam_bar, "lam_bar")
    candidates = []
    for rho in range(1, s + 1):
        for ell in range(1, len(m) + 1):
            a = np.zeros_like(m)
            head = min(rho - 1, ell)
            a[:head] = m[:head] / (1 + lam_bar)
            tail = m[rho - 1:ell]
            c = (s - rho + 1) + lam_bar * len(tail)
            a[rho - 1:ell] = np.maximum(tail - lam_bar * tail.sum() / c, 0.0)
            candidates.append((rho, ell, a))
    return candidates


def closed_form(m, s: int, lam_bar: float) -> tuple[np.ndarray, float, int, int]:
    """(a, F*, ρ, ℓ): the candidate a_{ρ,ℓ} of Theorem 2.7 (ρ ∈ {1..s}, ℓ ∈ {1..n}) with the smallest
    true objective ‖m − a‖² + λ̄‖a‖²_(s), the first one in (ρ, ℓ) order on ties."""
    scored = [(convex_objective(m, a, s, lam_bar), rho, ell, a)
              for rho, ell, a in closed_form_candidates(m, s, lam_bar)]
    value, rho, ell, a = min(scored, key=lambda item: item[0])
    return a, value, rho, ell


@dataclass(frozen=True)
class DropBlockBound:
    """The lower bound F* = min_A ‖Y − A‖²_F + λ̄‖A‖²_(s), Y = M S^{1/2}, of a fixed-width DropBlock
    network: ``value`` F*, ``spectrum`` m (singular values of Y), ``singular_values`` a of the
    optimal A, the candidate indices ``rho`` and ``ell`` of Theorem 2.7, ``lam_bar`` λ̄ = (s/r)λ, and
    the optimal ``product`` A = U_Y diag(a) V_Yᵀ (the optimal W S^{1/2})."""

    value: float
    spectrum: np.ndarray
    singular_values: np.ndarray
    rho: int
    ell: int
    lam_bar: float
    product: np.ndarray


def dropblock_bound(M, S, width: int, block_size: int, retain: float) -> DropBlockBound:
    """F* = min_A ‖M S^{1/2} − A‖²_F + λ̄‖A‖²_(s) with λ̄ = (s/r)(1 − θ)/θ: every network of width r
    with DropBlock masks (block size s, retain θ) has tr((M − UVᵀ)S(M − UVᵀ)ᵀ) + λΣⱼαⱼ² ≥ F*.
    S (positive semidefinite, possibly singular; I when None) enters through its symmetric root.
    A finite data set X (d₂ × N), Y (d₁ × N) is S = XXᵀ, M = YX⁺ plus the constant ‖Y(I − P_X)‖²_F."""
    M = checks.matrix(M, "M")
    if M.size == 0:
        raise ValueError(f"M must be non-empty, got shape {M.shape}")
    root = _root(S, M.shape[1])
    r = checks.integer(width, "width")
    s = _check_blocks(r, block_size)
    lam_bar = s / r * dropout_lambda(retain)
    left, m, right_t = np.linalg.svd(M @ root, full_matrices=False)
    a, value, rho, ell = closed_form(m, s, lam_bar)
    return DropBlockBound(value=value, spectrum=m, singular_values=a, rho=rho, ell=ell, lam_bar=lam_bar,
                          product=(left * a) @ right_t)


def block_norms(U, V, S, block_size: int) -> np.ndarray:
    """αⱼ = ‖Uⱼ Vⱼᵀ S^{1/2}‖_F for the k = r/s blocks of s consecutive columns (S = I when None);
    the DropBlock regularizer is λ Σⱼ αⱼ²."""
    U, V, _ = check_factors(U, V)
    root = _root(S, V.shape[0])
    s = _check_blocks(U.shape[1], block_size)
    return np.array([np.linalg.norm(U[:, j:j + s] @ (V[:, j:j + s].T @ root))
                     for j in range(0, U.shape[1], s)])


def enumerated_penalty(U, V, S, mask: MaskDistribution) -> tuple[float, int]:
    """The dropout penalty summed over every pattern of ``mask``, and the number of patterns:
    Σ_b P(b) tr(W_b S W_bᵀ) − tr(W S Wᵀ), W_b = U diag(b/μ) Vᵀ, W = UVᵀ (S = I when None). For
    DropBlock masks it is λ Σⱼ αⱼ² (Lemma 2.1, :func:`block_norms`)."""
    U, V, S = check_factors(U, V, S)
    if not isinstance(mask, MaskDistribution) or mask.width != U.shape[1]:
        raise ValueError(f"mask must be a dropnb.masks distribution of width {U.shape[1]}, got {mask!r}")
    patterns, probs = mask.enumerate()
    maps = np.einsum("ai,ki,bi->kab", U, patterns / mask.mean, V)
    W = U @ V.T
    return probs @ np.einsum("kab,bc,kac->k", maps, S, maps) - np.trace(W @ S @ W.T), len(probs)


def duplicate(U, V) -> tuple[np.ndarray, np.ndarray]:
    """Lemma 2.2: (U, V) ↦ ([U U]/√2, [V V]/√2). Keeps UVᵀ; when s divides r, every block appears
    twice with norm αⱼ/2, so Σⱼαⱼ² halves."""
    U, V, _ = check_factors(U, V)
    return np.hstack([U, U]) / np.sqrt(2), np.hstack([V, V]) / np.sqrt(2)


def balanced_replication(U, V, S, block_size: int, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """Theorem 2.5's construction with d̂ = ``copies`` target block copies (S = I when None).

    Block j with αⱼ > 0 is normalised, (Ūⱼ, V̄ⱼ) = (Uⱼ, Vⱼ)/√αⱼ, and replaced by rⱼ = ⌊αⱼd̂/‖α‖₁⌋
    copies of c(Ūⱼ, V̄ⱼ), c = (‖α‖₁/d̂)^{1/2}, plus one copy scaled by (γⱼ‖α‖₁/d̂)^{1/2},
    γⱼ = αⱼd̂/‖α‖₁ − rⱼ; blocks with αⱼ = 0 are dropped. This keeps UVᵀS^{1/2} (and UVᵀ when no
    dropped block has Uⱼ Vⱼᵀ ≠ 0, e.g. for non-singular S), and with K = Σⱼ(rⱼ + 1) blocks of norms
    βᵢ: ‖α‖₁² ≤ K Σᵢβᵢ² ≤ (d̂ + k)/d̂ · ‖α‖₁² → ‖α‖₁² as d̂ grows.
    """
    U, V, _ = check_factors(U, V)
    alpha = block_norms(U, V, S, block_size)
    d_hat = checks.integer(copies, "copies")
    total = alpha.sum()
    if total == 0:
        raise ValueError("U and V must have a block with Uⱼ Vⱼᵀ S^{1/2} ≠ 0")
    s = int(block_size)
    new_U, new_V = [], []
    for j in np.flatnonzero(alpha):
        share = alpha[j] * d_hat / total
        full = int(np.floor(share))
        scales = np.sqrt(np.append(np.full(full, total / d_hat), (share - full) * total / d_hat) / alpha[j])
        new_U.append(np.kron(scales, U[:, j * s:(j + 1) * s]))
        new_V.append(np.kron(scales, V[:, j * s:(j + 1) * s]))
    return np.hstack(new_U), np.hstack(new_V)
