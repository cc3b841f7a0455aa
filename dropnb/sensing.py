"""Matrix sensing and matrix completion with dropout (Arora et al. 2021, Section 2; Mianjy 2021, Chapter 4).

A factorization UVᵀ of width r (U ∈ ℝ^{d₁×r}, V ∈ ℝ^{d₂×r}, columns uᵢ, vᵢ) is fitted to n
measurements yⱼ = ⟨M*, Aⱼ⟩. Dropout keeps unit i with probability θ (``retain``) and rescales it by 1/θ,
λ = (1 − θ)/θ. With the empirical average Ê over the measurements,

    L̂(U, V) = Ê (yⱼ − ⟨UVᵀ, Aⱼ⟩)²,        R̂(U, V) = Σᵢ Ê (uᵢᵀAⱼvᵢ)²,
    L̂_drop(U, V) = Ê E_b (yⱼ − ⟨U diag(b/θ) Vᵀ, Aⱼ⟩)² = L̂ + λ R̂           (Proposition 3).

Matrix completion measures Aⱼ = e_{aⱼ} e_{bⱼ}ᵀ with (aⱼ, bⱼ) drawn from a product law p ⊗ q; its
population regularizer is R(U, V) = Σᵢ ‖diag(√p)uᵢ‖²‖diag(√q)vᵢ‖², and the induced regularizer
Θ(M) = min_{UVᵀ = M} R(U, V) = ‖diag(√p) M diag(√q)‖²_* / r (Proposition 4, for rank M ≤ r);
Gaussian measurements give R = Σᵢ‖uᵢ‖²‖vᵢ‖² and Θ = ‖M‖²_*/r (p = q = 𝟙).
Completion problems are given by index vectors ``rows``, ``cols`` (never dense measurements).

Training: :func:`completion_descent` is preconditioned full-batch gradient descent on L̂ + λR̂,
batched over problems; :func:`completion_sgd` is dropout SGD on the observed entries for R runs at once
(factors (R, n_rows, d) and (R, n_cols, d), a leading run dimension, any mix of rates and widths) as
one tensor program on the generator's device (float64 on the CPU, float32 on a GPU), and
:func:`completion_metrics` gives its RMSEs and L̂ + λR̂ at checkpoints, in float64. The loss of one
entry is (y − ŷ)² (no ½).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from scipy.stats import norm

from . import checks
from .equalizer import equalized_factors
from .engine import FINITE_EVERY, Metrics, Run, Schedule, State, check_finite, descend


def _factors(U, V) -> tuple[np.ndarray, np.ndarray]:
    U, V = checks.matrix(U, "U"), checks.matrix(V, "V")
    if U.shape[1] != V.shape[1]:
        raise ValueError(f"U and V must have the same number of columns, got {U.shape} and {V.shape}")
    return U, V


def _measurements(A, U, V) -> np.ndarray:
    A = checks.matrix(A, "A", ndim=3)
    if A.shape[1:] != (U.shape[0], V.shape[0]):
        raise ValueError(f"A must have shape (n, {U.shape[0]}, {V.shape[0]}), got {A.shape}")
    return A


def _targets(y, n: int) -> np.ndarray:
    y = checks.vector(y, "y")
    if len(y) != n:
        raise ValueError(f"y must have {n} entries (one per measurement), got {len(y)}")
    return y


def dropout_objective(U, V, A, y, retain: float) -> dict[str, float]:
    """L̂ = Ê(yⱼ − ⟨UVᵀ, Aⱼ⟩)², R̂ = Σᵢ Ê(uᵢᵀAⱼvᵢ)² and L̂ + λR̂, λ = (1 − θ)/θ, for dense
    measurements A (n, d₁, d₂): keys ``loss``, ``regularizer``, ``objective``."""
    U, V = _factors(U, V)
    A = _measurements(A, U, V)
    y = _targets(y, len(A))
    retain = checks.number(retain, "retain", minimum=0, maximum=1, open_minimum=True)
    T = np.einsum("ai,jab,bi->ji", U, A, V)  # uᵢᵀAⱼvᵢ
    loss = float(np.mean((y - T.sum(1)) ** 2))
    reg = float(np.mean(np.sum(T**2, axis=1)))
    return dict(loss=loss, regularizer=reg, objective=loss + (1 - retain) / retain * reg)


def enumerated_dropout_loss(U, V, A, y, retain: float) -> float:
    """Ê E_b (yⱼ − ⟨U diag(b/θ) Vᵀ, Aⱼ⟩)² by summing over all 2ʳ masks b ∈ {0, 1}ʳ with weights
    θ^{|b|}(1 − θ)^{r − |b|}; each thinned product U diag(b/θ) Vᵀ is formed densely. r ≤ 16."""
    U, V = _factors(U, V)
    A = _measurements(A, U, V)
    y = _targets(y, len(A))
    retain = checks.number(retain, "retain", minimum=0, maximum=1, open_minimum=True)
    r = U.shape[1]
    if r > 16:
        raise ValueError(f"U must have at most 16 columns for enumeration, got {r}")
    total = 0.0
    for bits in itertools.product((0.0, 1.0), repeat=r):
        b = np.array(bits)
        weight = retain ** b.sum() * (1 - retain) ** (r - b.sum())
        if weight == 0:
            continue
        W = (U * (b / retain)) @ V.T
        total += weight * np.mean((y - np.einsum("ab,jab->j", W, A)) ** 2)
    return float(total)


def sampled_dropout_losses(U, V, A, y, retain: float, masks) -> np.ndarray:
    """Ê_j (yⱼ − ⟨U diag(b/θ) Vᵀ, Aⱼ⟩)² for each mask b (rows of ``masks``, shape (N, r), entries 0/1):
    N values whose mean is an unbiased estimate of L̂_drop."""
    U, V = _factors(U, V)
    A = _measurements(A, U, V)
    y = _targets(y, len(A))
    retain = checks.number(retain, "retain", minimum=0, maximum=1, open_minimum=True)
    masks = checks.matrix(masks, "masks")
    if masks.shape[1] != U.shape[1]:
        raise ValueError(f"masks must have {U.shape[1]} columns, got shape {masks.shape}")
    T = np.einsum("ai,jab,bi->ij", U, A, V)  # (r, n)
    return np.mean((y - (masks / retain) @ T) ** 2, axis=1)


def completion_measurements(rows, cols, shape: tuple[int, int]) -> np.ndarray:
    """Dense indicator measurements Aⱼ = e_{rowsⱼ} e_{colsⱼ}ᵀ, shape (n, d₁, d₂) (small problems only)."""
    rows, cols, (d1, d2) = _entries(rows, cols, shape)
    A = np.zeros((len(rows), d1, d2))
    A[np.arange(len(rows)), rows, cols] = 1.0
    return A


def _entries(rows, cols, shape) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    shape = checks.shape(shape, "shape", minimum=1)
    if len(shape) != 2:
        raise checks.error("shape", "a pair (d₁, d₂)", shape)
    rows, cols = checks.vector(rows, "rows"), checks.vector(cols, "cols")
    if len(rows) != len(cols):
        raise ValueError(f"rows and cols must have the same length, got {len(rows)} and {len(cols)}")
    for values, name, size in ((rows, "rows", shape[0]), (cols, "cols", shape[1])):
        if np.any(values != np.round(values)) or np.any(values < 0) or np.any(values >= size):
            raise checks.error(name, f"integer indices in [0, {size})", values)
    return rows.astype(np.int64), cols.astype(np.int64), shape


def _marginal(p, size: int, name: str) -> np.ndarray:
    if p is None:
        return np.ones(size)
    p = checks.vector(p, name)
    if len(p) != size or np.any(p < 0):
        raise checks.error(name, f"{size} non-negative weights (one per {'row' if name == 'p' else 'column'} of M)", p)
    return p


def population_regularizer(U, V, p=None, q=None) -> float:
    """R(U, V) = Σᵢ ‖diag(√p)uᵢ‖² ‖diag(√q)vᵢ‖² (matrix completion under p ⊗ q); with p = q = None
    the Gaussian-measurement case Σᵢ ‖uᵢ‖²‖vᵢ‖²."""
    U, V = _factors(U, V)
    p, q = _marginal(p, U.shape[0], "p"), _marginal(q, V.shape[0], "q")
    return float(np.sum((p @ U**2) * (q @ V**2)))


def weighted_nuclear_norm(M, p=None, q=None) -> float:
    """‖diag(√p) M diag(√q)‖_* (the weighted trace norm); ‖M‖_* when p = q = None."""
    M = checks.matrix(M, "M")
    p, q = _marginal(p, M.shape[0], "p"), _marginal(q, M.shape[1], "q")
    return float(np.linalg.svd(np.sqrt(p)[:, None] * M * np.sqrt(q)[None, :], compute_uv=False).sum())


def induced_regularizer(M, width: int, p=None, q=None) -> float:
    """Θ(M) = ‖diag(√p) M diag(√q)‖²_* / r (Proposition 4; Gaussian case ‖M‖²_*/r with p = q = None).
    Θ is a minimum over factorizations of width r, so rank M ≤ r is required (ValueError otherwise)."""
    M, width = checks.matrix(M, "M"), checks.integer(width, "width")
    s = np.linalg.svd(M, compute_uv=False)
    if len(s) > width and s[width] > max(M.shape) * np.finfo(float).eps * s[0]:
        raise ValueError(f"M has rank greater than width = {width}: no factorization of that width exists")
    return weighted_nuclear_norm(M, p, q) ** 2 / width


def equalized_sensing_factors(M, width: int, p=None, q=None) -> tuple[np.ndarray, np.ndarray]:
    """Factors with UVᵀ = M and R(U, V) = Θ(M): the equalized factors (Ū, V̄) of the weighted map
    diag(√p) M diag(√q) (:func:`dropnb.equalizer.equalized_factors`), unweighted as
    U = diag(1/√p) Ū, V = diag(1/√q) V̄. Needs p, q > 0 and rank M ≤ r."""
    M, width = checks.matrix(M, "M"), checks.integer(width, "width")
    p, q = _marginal(p, M.shape[0], "p"), _marginal(q, M.shape[1], "q")
    if np.any(p <= 0) or np.any(q <= 0):
        raise ValueError("p and q must be positive (the weights are inverted)")
    Ub, Vb = equalized_factors(np.sqrt(p)[:, None] * M * np.sqrt(q)[None, :], width)
    return Ub / np.sqrt(p)[:, None], Vb / np.sqrt(q)[:, None]


def zipf_marginal(size: int, exponent: float, rng, uniform_weight: float = 0.0) -> np.ndarray:
    """A permuted popularity law: (1 − w)·k^{−a}/Σk^{−a} + w/size over k = 1…size, a = ``exponent``,
    w = ``uniform_weight``, the entries shuffled by ``rng``."""
    size = checks.integer(size, "size")
    exponent = checks.nonnegative(exponent, "exponent")
    w = checks.number(uniform_weight, "uniform_weight", minimum=0, maximum=1)
    rng = checks.generator(rng)
    zipf = np.arange(1, size + 1, dtype=float) ** -exponent
    law = (1 - w) * zipf / zipf.sum() + w / size
    return rng.permutation(law)


def sample_entries(p, q, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """n independent entries (a, b) ~ p ⊗ q (with replacement): row and column index vectors."""
    p, q = checks.vector(p, "p"), checks.vector(q, "q")
    for law, name in ((p, "p"), (q, "q")):
        if np.any(law < 0) or abs(law.sum() - 1) > 1e-9:
            raise checks.error(name, "a probability vector", law)
    n, rng = checks.integer(n, "n"), checks.generator(rng)
    return rng.choice(len(p), size=n, p=p), rng.choice(len(q), size=n, p=q)


def nondegeneracy_ratio(p, q, n: int) -> float:
    """n √(d₁d₂) min pᵢqₖ / log d₁: Theorem 20's condition min pᵢqₖ ≥ log d₁ / (n√(d₁d₂)) holds iff ≥ 1."""
    p, q, n = checks.distribution(p, "p"), checks.distribution(q, "q"), checks.integer(n, "n")
    if len(p) < 2:
        raise checks.error("p", "at least two rows (log d₁ > 0)", p)
    return float(n * np.sqrt(len(p) * len(q)) * p.min() * q.min() / np.log(len(p)))


def rademacher_spectral_norms(rows, cols, p, q, signs) -> np.ndarray:
    """‖diag(p)^{−1/2} Z_ζ diag(q)^{−1/2}‖ (spectral norm), Z_ζ = Σⱼ ζⱼ e_{rowsⱼ} e_{colsⱼ}ᵀ, one value per
    sign vector ζ (rows of ``signs``, shape (N, n)). By nuclear–spectral duality the empirical
    Rademacher complexity of the weighted-trace-norm ball {‖diag(√p) M diag(√q)‖²_* ≤ α} is
    √α/n times their mean."""
    p, q = checks.vector(p, "p"), checks.vector(q, "q")
    rows, cols, _ = _entries(rows, cols, (len(p), len(q)))
    signs = checks.matrix(signs, "signs")
    if signs.shape[1] != len(rows):
        raise ValueError(f"signs must have {len(rows)} columns (one per entry), got shape {signs.shape}")
    if np.any(p <= 0) or np.any(q <= 0):
        raise ValueError("p and q must be positive")
    d1, d2 = len(p), len(q)
    flat = rows * d2 + cols
    weight = 1 / np.sqrt(p)[:, None] / np.sqrt(q)[None, :]
    out = np.empty(len(signs))
    for k, zeta in enumerate(signs):
        Z = np.bincount(flat, weights=zeta, minlength=d1 * d2).reshape(d1, d2)
        out[k] = np.linalg.norm(Z * weight, 2)
    return out


def theorem11_bound(train_loss: float, alpha: float, n: int, d1: int, delta: float) -> float:
    """Right side of Theorem 11: L̂ + 8 √((2α d₁ log d₁ + ¼ log(2/δ)) / n)."""
    train_loss, alpha = checks.nonnegative(train_loss, "train_loss"), checks.nonnegative(alpha, "alpha")
    n, d1 = checks.integer(n, "n"), checks.integer(d1, "d1", minimum=2)
    delta = checks.number(delta, "delta", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    return train_loss + 8 * np.sqrt((2 * alpha * d1 * np.log(d1) + 0.25 * np.log(2 / delta)) / n)


def clipped_gaussian_moments(mean, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """E y and E y² for y = clip(m + sd·ε, −1, 1), ε ~ N(0, 1), in closed form: with
    a = (−1 − m)/sd, b = (1 − m)/sd, E y = Φ(a)·(−1) + (1 − Φ(b)) + m(Φ(b) − Φ(a)) + sd(φ(a) − φ(b)),
    E y² = Φ(a) + 1 − Φ(b) + m²(Φ(b) − Φ(a)) + 2m·sd(φ(a) − φ(b)) + sd²(Φ(b) − Φ(a) + aφ(a) − bφ(b))."""
    m = checks.matrix(mean, "mean", ndim=0, batched=True)
    sd = checks.positive(sd, "sd")
    a, b = (-1 - m) / sd, (1 - m) / sd
    Pa, Pb, fa, fb = norm.cdf(a), norm.cdf(b), norm.pdf(a), norm.pdf(b)
    first = -Pa + (1 - Pb) + m * (Pb - Pa) + sd * (fa - fb)
    second = Pa + (1 - Pb) + m**2 * (Pb - Pa) + 2 * m * sd * (fa - fb) + sd**2 * (Pb - Pa + a * fa - b * fb)
    return first, second


def _batched_factors(U, V, names=("U", "V")) -> tuple[torch.Tensor, torch.Tensor]:
    U, V = checks.tensor(U, names[0], ndim=3), checks.tensor(V, names[1], ndim=3)
    if U.shape[0] != V.shape[0] or U.shape[2] != V.shape[2]:
        raise ValueError(f"{names[0]} and {names[1]} must be (k, d₁, r) and (k, d₂, r) with the same k and r, "
                         f"got {tuple(U.shape)} and {tuple(V.shape)}")
    checks.same_dtype({names[0]: U, names[1]: V})
    return U, V


def _batched_weights(lam, k: int, like: torch.Tensor) -> torch.Tensor:
    """λ as a (k, 1, 1) tensor: one number for all, or one per batch entry."""
    lam = checks.weights(lam.detach().cpu().numpy() if isinstance(lam, torch.Tensor) else lam, "lam")
    if lam.ndim > 1 or lam.size not in (1, k):
        raise checks.error("lam", f"one number or {k} (one per batch entry)", lam)
    return torch.as_tensor(np.array(lam, dtype=float), dtype=like.dtype, device=like.device).reshape(-1, 1, 1)


def completion_objective(U, V, rows, cols, y, lam):
    """L̂ + λR̂ for matrix completion, in torch, batched: U (k, d₁, r), V (k, d₂, r), λ (k,):
    Ê(yⱼ − ⟨U_{aⱼ}, V_{bⱼ}⟩)² + λ Ê Σᵢ U_{aⱼi}² V_{bⱼi}², one value per batch entry (k,)."""
    U, V = _batched_factors(U, V)
    rows, cols, _ = _entries(rows, cols, (U.shape[1], V.shape[1]))
    y = _targets(y, len(rows))
    lam = _batched_weights(lam, U.shape[0], U).reshape(-1)
    rows, cols = torch.as_tensor(rows, device=U.device), torch.as_tensor(cols, device=U.device)
    Ua, Vb = U[:, rows, :], V[:, cols, :]
    terms = Ua * Vb
    loss = ((torch.as_tensor(y, dtype=U.dtype, device=U.device) - terms.sum(-1)) ** 2).mean(-1)
    return loss + lam * (terms**2).sum(-1).mean(-1)


def _entry_sums(rows, cols, y, shape, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Counts c_ab and sums s_ab of the targets of each entry, as dense (d₁, d₂) tensors."""
    d1, d2 = shape
    flat = np.asarray(rows, dtype=np.int64) * d2 + np.asarray(cols, dtype=np.int64)
    counts = np.bincount(flat, minlength=d1 * d2).reshape(d1, d2)
    sums = np.bincount(flat, weights=np.asarray(y, dtype=float), minlength=d1 * d2).reshape(d1, d2)
    return (torch.as_tensor(counts, dtype=like.dtype, device=like.device),
            torch.as_tensor(sums, dtype=like.dtype, device=like.device))


def _dense_gradient(U, V, counts, sums, n: int, lam) -> tuple[torch.Tensor, torch.Tensor]:
    E = (counts * (U @ V.transpose(1, 2)) - sums) * (2 / n)
    gU = E @ V + lam * (2 / n) * U * (counts @ V**2)
    gV = E.transpose(1, 2) @ U + lam * (2 / n) * V * (counts.T @ U**2)
    return gU, gV


def completion_gradient(U, V, rows, cols, y, lam) -> tuple[torch.Tensor, torch.Tensor]:
    """∇_U and ∇_V of :func:`completion_objective` in closed form, batched, through the dense entry
    counts C = (c_ab) and target sums S = (s_ab): with E = (2/n)(C ⊙ UVᵀ − S),
    ∇_U = E V + (2λ/n) U ⊙ (C (V ⊙ V)),   ∇_V = Eᵀ U + (2λ/n) V ⊙ (Cᵀ (U ⊙ U))."""
    U, V = _batched_factors(U, V)
    rows, cols, _ = _entries(rows, cols, (U.shape[1], V.shape[1]))
    y = _targets(y, len(rows))
    lam = _batched_weights(lam, U.shape[0], U)
    counts, sums = _entry_sums(rows, cols, y, (U.shape[1], V.shape[1]), U)
    return _dense_gradient(U, V, counts, sums, len(rows), lam)


def completion_descent(U0, V0, rows, cols, y, lam, steps: int, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-batch gradient descent on :func:`completion_objective`, batched over the leading dimension
    (one λ per batch entry), each row's step scaled by n / (its number of observed entries):
    U ← U − η (n/c_a) ∇_U, V ← V − η (n/c_b) ∇_V (a diagonal preconditioner). Each step costs a few
    batched products of dense (d₁ × d₂) matrices (:func:`completion_gradient`), whatever n is. A run
    that diverges stops with a FloatingPointError (checked every ``FINITE_EVERY`` steps and at the end)."""
    U, V = _batched_factors(U0, V0, ("U0", "V0"))
    U, V = U.detach().clone(), V.detach().clone()
    steps, lr = checks.integer(steps, "steps", minimum=0), checks.positive(lr, "lr")
    rows, cols, _ = _entries(rows, cols, (U.shape[1], V.shape[1]))
    y = _targets(y, len(rows))
    lam = _batched_weights(lam, U.shape[0], U)
    n = len(rows)
    counts, sums = _entry_sums(rows, cols, y, (U.shape[1], V.shape[1]), U)
    row_scale = (n / counts.sum(1).clamp(min=1))[None, :, None]
    col_scale = (n / counts.sum(0).clamp(min=1))[None, :, None]
    for t in range(steps):
        if t % FINITE_EVERY == 0:
            check_finite(dict(U=U, V=V), t, "completion descent")
        gU, gV = _dense_gradient(U, V, counts, sums, n, lam)
        U -= lr * row_scale * gU
        V -= lr * col_scale * gV
    check_finite(dict(U=U, V=V), steps, "completion descent")
    return U, V


def input_dropout_regularizer(M, A) -> float:
    """Non-factorized sensing with dropout on the entries of vec(A): R(M) = Σₑ Ĉₑₑ Mₑ², Ĉ = Ê vec(Aⱼ)vec(Aⱼ)ᵀ
    (a weighted ridge; the dropout objective is L̂(M) + λR(M))."""
    M = checks.matrix(M, "M")
    A = checks.matrix(A, "A", ndim=3)
    if A.shape[1:] != M.shape:
        raise ValueError(f"A must have shape (n, {M.shape[0]}, {M.shape[1]}) (that of M), got {A.shape}")
    return float(np.sum(np.mean(A**2, axis=0) * M**2))


def enumerated_input_dropout_loss(M, A, y, retain: float) -> float:
    """Ê E_B (yⱼ − ⟨M, Aⱼ ⊙ B/θ⟩)² for dropout on the d₁d₂ entries of each measurement (one mask B
    shared by the measurements of an average), summed over all 2^{d₁d₂} masks (d₁d₂ ≤ 16)."""
    M = checks.matrix(M, "M")
    A = checks.matrix(A, "A", ndim=3)
    if A.shape[1:] != M.shape:
        raise ValueError(f"A must have shape (n, {M.shape[0]}, {M.shape[1]}) (that of M), got {A.shape}")
    y = _targets(y, len(A))
    retain = checks.number(retain, "retain", minimum=0, maximum=1, open_minimum=True)
    size = M.size
    if size > 16:
        raise ValueError(f"M must have at most 16 entries for enumeration, got {size}")
    total = 0.0
    for bits in itertools.product((0.0, 1.0), repeat=size):
        B = np.array(bits).reshape(M.shape)
        weight = retain ** B.sum() * (1 - retain) ** (size - B.sum())
        if weight > 0:
            total += weight * np.mean((y - np.einsum("ab,jab->j", M, A * (B / retain))) ** 2)
    return float(total)


def rating_biases(rows, cols, values, shape: tuple[int, int], ridge: float) -> tuple[float, np.ndarray, np.ndarray]:
    """The row-and-column bias predictor μ + bₐ + c_k of observed entries (``rows``, ``cols``,
    ``values``) of a d₁ × d₂ matrix: μ the mean of the values and, with yⱼ − μ the centred values,
    (b, c) = argmin Σⱼ (yⱼ − μ − b_{aⱼ} − c_{kⱼ})² + ridge·(‖b‖² + ‖c‖²), solved exactly from the
    normal equations [[diag(nₐ) + ridge·I, N], [Nᵀ, diag(n_k) + ridge·I]] (b, c) = (row sums, column sums)
    of the centred values, N the d₁ × d₂ matrix of entry counts (ridge > 0 makes them definite).
    Returns (μ, b (d₁,), c (d₂,))."""
    rows, cols, (d1, d2) = _entries(rows, cols, shape)
    values = checks.vector(values, "values")
    if len(values) != len(rows) or len(values) == 0:
        raise ValueError(f"values must have one entry per observed entry ({len(rows)}, at least one), got {len(values)}")
    ridge = checks.positive(ridge, "ridge")
    mean = float(values.mean())
    centred = values - mean
    counts = np.bincount(rows * d2 + cols, minlength=d1 * d2).reshape(d1, d2).astype(float)
    system = np.block([[np.diag(counts.sum(1)), counts], [counts.T, np.diag(counts.sum(0))]]) + ridge * np.eye(d1 + d2)
    right = np.concatenate([np.bincount(rows, weights=centred, minlength=d1), np.bincount(cols, weights=centred, minlength=d2)])
    solution = np.linalg.solve(system, right)
    return mean, solution[:d1], solution[d1:]


def trace_norm_rate(d1: int, n: int, alpha: float = 1.0) -> float:
    """√(α d₁ log d₁ / n): the rate of Theorem 1 of Foygel et al. (2011) for the empirical Rademacher
    complexity of the weighted-trace-norm ball {‖diag(√p) M diag(√q)‖²_* ≤ α} of d₁ × d₂ matrices
    (d₁ ≥ d₂) from n observed entries, up to the theorem's unnamed constant (the proof of Theorem 11
    of Mianjy 2021 takes it to be 1)."""
    d1, n = checks.integer(d1, "d1", minimum=2), checks.integer(n, "n")
    alpha = checks.positive(alpha, "alpha")
    return float(np.sqrt(alpha * d1 * np.log(d1) / n))


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
    widths = checks.run_widths(widths, runs, width)
    epochs, batch_size = checks.integer(epochs, "epochs"), checks.integer(batch_size, "batch_size")
    generator = checks.torch_generator(generator)
    checks.flag(progress, "progress")
    if not (np.all(np.isfinite(U0)) and np.all(np.isfinite(V0))):
        raise ValueError("U0 and V0 must be finite")
    n = len(values)
    per_epoch = -(-n // batch_size)
    schedule = Schedule.of(lr, epochs * per_epoch)
    device = generator.device
    dtype = checks.float_dtype(None, device)
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
