"""Dropout masks as random vectors b ∈ ℝʳ with known first and second moments.

A network with dropout on its hidden layer multiplies unit i by bᵢ/μᵢ, where μ = E[b] (inverted
scaling, so the rescaled mask has mean 1). Everything the expected squared loss needs from the
mask is in the *characteristic matrix*

    C̄ = E[(b/μ)(b/μ)ᵀ] − 𝟙𝟙ᵀ = Cov(b) ⊘ μμᵀ,

(⊘ entrywise division); for Bernoulli dropout with retain probability θ, C̄ = λI with
λ = (1 − θ)/θ. Every distribution here can be sampled (numpy or torch, any batch shape) and, when
its support is small, enumerated exactly with its probabilities.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod

import numpy as np
import torch

from . import checks

MAX_ENUMERATION = 2**16


def _batch_shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    return checks.shape(shape, "shape")


class MaskDistribution(ABC):
    """A distribution of masks b ∈ ℝʳ with every mean μᵢ ≠ 0."""

    width: int

    @property
    @abstractmethod
    def mean(self) -> np.ndarray:
        """μ = E[b], shape (r,)."""

    @property
    @abstractmethod
    def second_moment(self) -> np.ndarray:
        """E[b bᵀ], shape (r, r)."""

    @abstractmethod
    def sample(self, shape: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Independent masks, shape (*shape, r), float64."""

    @abstractmethod
    def sample_torch(self, shape: int | tuple[int, ...], generator: torch.Generator,
                     dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Independent masks on ``generator.device``, shape (*shape, r)."""

    @abstractmethod
    def support_size(self) -> int:
        """Number of patterns :meth:`enumerate` returns."""

    @abstractmethod
    def _patterns(self) -> tuple[np.ndarray, np.ndarray]:
        """All patterns (K, r) with their probabilities (K,)."""

    @property
    def covariance(self) -> np.ndarray:
        """C = E[b bᵀ] − μμᵀ."""
        mu = self.mean
        return self.second_moment - np.outer(mu, mu)

    @property
    def characteristic(self) -> np.ndarray:
        """C̄ = C ⊘ μμᵀ, the matrix of the dropout regularizer ⟨C̄, UᵀU ⊙ VᵀSV⟩."""
        mu = self.mean
        return self.covariance / np.outer(mu, mu)

    def enumerate(self) -> tuple[np.ndarray, np.ndarray]:
        """Every mask pattern (K, r) and its probability (K,); for small supports only."""
        if self.support_size() > MAX_ENUMERATION:
            raise ValueError(
                f"{type(self).__name__} of width {self.width} has {self.support_size()} patterns; "
                f"enumeration is limited to {MAX_ENUMERATION}"
            )
        return self._patterns()


class Bernoulli(MaskDistribution):
    """Independent bᵢ ~ Bernoulli(θ): μ = θ𝟙, E[bbᵀ] = θ²𝟙𝟙ᵀ + θ(1 − θ)I, C̄ = λI."""

    def __init__(self, width: int, retain: float):
        self.width = checks.integer(width, "width")
        self.retain = checks.probability(retain, "retain")

    def __repr__(self) -> str:
        return f"Bernoulli(width={self.width}, retain={self.retain})"

    @property
    def mean(self) -> np.ndarray:
        return np.full(self.width, self.retain)

    @property
    def second_moment(self) -> np.ndarray:
        theta = self.retain
        return theta**2 * np.ones((self.width, self.width)) + theta * (1 - theta) * np.eye(self.width)

    def sample(self, shape, rng):
        return (checks.generator(rng).random((*_batch_shape(shape), self.width)) < self.retain).astype(np.float64)

    def sample_torch(self, shape, generator, dtype=torch.float64):
        uniform = torch.rand((*_batch_shape(shape), self.width), generator=checks.torch_generator(generator),
                             device=generator.device, dtype=dtype)
        return (uniform < self.retain).to(dtype)

    def support_size(self):
        return 2**self.width

    def _patterns(self):
        patterns = np.array(list(itertools.product((0.0, 1.0), repeat=self.width)))
        kept = patterns.sum(axis=1)
        probs = self.retain**kept * (1 - self.retain) ** (self.width - kept)
        return patterns, probs


class Blocks(MaskDistribution):
    """DropBlock-style masks: r = k·s units in k contiguous blocks of size s, each kept with
    probability θ independently, so b = w ⊗ 𝟙ₛ with wⱼ ~ Bernoulli(θ) and C̄ = λ (Iₖ ⊗ 𝟙ₛ𝟙ₛᵀ)."""

    def __init__(self, width: int, block_size: int, retain: float):
        self.width = checks.integer(width, "width")
        self.block_size = checks.integer(block_size, "block_size")
        if self.width % self.block_size:
            raise ValueError(f"block_size must divide width, got width {width} and block_size {block_size}")
        self.blocks = Bernoulli(self.width // self.block_size, retain)
        self.retain = self.blocks.retain

    def __repr__(self) -> str:
        return f"Blocks(width={self.width}, block_size={self.block_size}, retain={self.retain})"

    def _expand(self, block_values):
        return np.kron(block_values, np.ones((self.block_size, self.block_size)))

    @property
    def mean(self):
        return np.full(self.width, self.retain)

    @property
    def second_moment(self):
        return self._expand(self.blocks.second_moment)

    def sample(self, shape, rng):
        return np.repeat(self.blocks.sample(shape, rng), self.block_size, axis=-1)

    def sample_torch(self, shape, generator, dtype=torch.float64):
        return torch.repeat_interleave(self.blocks.sample_torch(shape, generator, dtype), self.block_size, dim=-1)

    def support_size(self):
        return self.blocks.support_size()

    def _patterns(self):
        patterns, probs = self.blocks.enumerate()
        return np.repeat(patterns, self.block_size, axis=-1), probs


class Finite(MaskDistribution):
    """An arbitrary distribution on finitely many patterns (binary or not), given by probabilities."""

    def __init__(self, patterns, probs):
        patterns = checks.real_array(patterns, "patterns")
        probs = checks.real_array(probs, "probs")
        if patterns.ndim != 2 or patterns.shape[0] < 1 or patterns.shape[1] < 1:
            raise ValueError(f"patterns must be a non-empty (K, r) array, got shape {patterns.shape}")
        if probs.shape != (patterns.shape[0],):
            raise ValueError(f"probs must have shape ({patterns.shape[0]},) to match patterns, got {probs.shape}")
        if not np.all(np.isfinite(patterns)):
            raise ValueError("patterns must be finite")
        probs = checks.distribution(probs, "probs")
        self.patterns, self.probs = patterns, probs / probs.sum()
        self.width = patterns.shape[1]
        if np.any(self.mean == 0):
            raise ValueError("patterns must give every unit a non-zero mean (inverted scaling divides by it)")

    def __repr__(self) -> str:
        return f"Finite(width={self.width}, support={len(self.probs)})"

    @property
    def mean(self):
        return self.probs @ self.patterns

    @property
    def second_moment(self):
        return np.einsum("k,ki,kj->ij", self.probs, self.patterns, self.patterns)

    def sample(self, shape, rng):
        index = checks.generator(rng).choice(len(self.probs), size=_batch_shape(shape), p=self.probs)
        return self.patterns[index]

    def sample_torch(self, shape, generator, dtype=torch.float64):
        shape, generator = _batch_shape(shape), checks.torch_generator(generator)
        probs = torch.as_tensor(self.probs, device=generator.device, dtype=torch.float64)
        index = torch.multinomial(probs, max(math.prod(shape), 1), replacement=True, generator=generator)
        patterns = torch.as_tensor(self.patterns, device=generator.device, dtype=dtype)
        return patterns[index[: math.prod(shape)]].reshape(*shape, self.width)

    def support_size(self):
        return len(self.probs)

    def _patterns(self):
        return self.patterns.copy(), self.probs.copy()


EXPANSIONS = ("keep", "drop")


def _check_window(window: int) -> int:
    if checks.integer(window, "window") % 2 == 0:
        raise checks.error("window", "an odd positive integer", window)
    return int(window)


def _check_expansion(expansion: str) -> str:
    if not isinstance(expansion, str) or expansion not in EXPANSIONS:
        raise ValueError(f"expansion must be 'keep' or 'drop', got {expansion!r}")
    return expansion


def _check_seed_probability(seed_probability: float, expansion: str) -> float:
    # keep: a seed probability 0 keeps nothing; drop: 1 drops everything. Either makes μ = 0.
    keep = expansion == "keep"
    return checks.number(seed_probability, "seed_probability", minimum=0, maximum=1,
                         open_minimum=keep, open_maximum=not keep)


def sliding_window_retain(seed_probability: float, window: int, expansion: str) -> float:
    """The marginal retain probability P(bᵢ = 1) of a sliding-window mask with the given seeds.

    keep: seeds wⱼ ~ Bernoulli(θ'), θ' = ``seed_probability``, unit kept iff some seed of its
    window is 1: P(bᵢ = 1) = 1 − (1 − θ')ⁿ. drop: seeds sⱼ ~ Bernoulli(γ), γ = ``seed_probability``,
    unit dropped iff some seed of its window is 1: P(bᵢ = 1) = (1 − γ)ⁿ.

    The paper's "same θ" reading of Section 5.3 uses the DropBlock retain probability as θ'
    directly: ``1 - sliding_window_retain(0.5, 3, "keep")`` = 0.5³ = 0.125 and window 5 gives
    0.5⁵ ≈ 0.031, a *lower* effective drop rate than DropBlock's 0.5 (with Ghiasi's semantics,
    γ = 1 − θ = 0.5 gives 1 − 0.5ⁿ = 0.875 and ≈ 0.969 instead).
    """
    n, expansion = _check_window(window), _check_expansion(expansion)
    inactive = 1.0 - _check_seed_probability(seed_probability, expansion)
    return 1.0 - inactive**n if expansion == "keep" else inactive**n


def sliding_window_seed_probability(retain: float, window: int, expansion: str) -> float:
    """The seed probability that makes the marginal retain probability θ (inverse of
    :func:`sliding_window_retain`): θ' = 1 − (1 − θ)^{1/n} (keep), γ = 1 − θ^{1/n} (drop).
    E.g. θ = 0.5 gives θ' ≈ 0.2063 for n = 3 and ≈ 0.1294 for n = 5."""
    return 1.0 - _inactive_seed_probability(checks.probability(retain, "retain"), _check_window(window), _check_expansion(expansion))


def _inactive_seed_probability(retain: float, window: int, expansion: str) -> float:
    """t = P(seed is 0) with marginal retain θ: (1 − θ)^{1/n} (keep) or θ^{1/n} (drop)."""
    return (1.0 - retain) ** (1.0 / window) if expansion == "keep" else retain ** (1.0 / window)


class SlidingWindow(MaskDistribution):
    """Sliding-window masks on a line of r units ("DropBlockOriginal", Section 5.3 of Pal et al.):
    every unit i has a window Wᵢ of n (odd) consecutive seeds centred on it, and b is a function
    of the seeds in the windows.

    * ``expansion="keep"`` (the paper's stated semantics): seeds wⱼ ~ Bernoulli(θ'), unit i kept
      iff some seed of Wᵢ is 1, bᵢ = maxⱼ∈Wᵢ wⱼ; θ' = 1 − (1 − θ)^{1/n}.
    * ``expansion="drop"`` (Ghiasi et al.'s DropBlock): seeds sⱼ ~ Bernoulli(γ), unit i dropped
      iff some seed of Wᵢ is 1, bᵢ = 1 − maxⱼ∈Wᵢ sⱼ; γ = 1 − θ^{1/n}.

    Edges: the seeds live on an extended line of r + n − 1 positions (the unit line padded by
    (n − 1)/2 seeds on each side), seed j = 0, …, r + n − 2 sitting at unit position j − (n − 1)/2,
    and Wᵢ = {i, …, i + n − 1} in seed indices. Every window therefore holds exactly n seeds and
    every unit has the marginal P(bᵢ = 1) = θ exactly; units near the edges are not
    special. (Padding with inactive seeds instead would lower the edge marginals.)

    Moments, with t = P(seed is 0) (t = 1 − θ' for keep, t = 1 − γ for drop) and the overlap
    oᵢₗ = |Wᵢ ∩ Wₗ| = max(0, n − |i − l|), so |Wᵢ ∪ Wₗ| = 2n − oᵢₗ:

    * keep: μ = 1 − tⁿ = θ and, by inclusion–exclusion on {bᵢ = 0} = {all of Wᵢ is 0},
      E[bᵢbₗ] = 1 − 2tⁿ + t^{2n−oᵢₗ} = μ² + t^{2n−oᵢₗ}(1 − t^{oᵢₗ});
    * drop: μ = tⁿ = θ and E[bᵢbₗ] = P(all of Wᵢ ∪ Wₗ is 0) = t^{2n−oᵢₗ}.

    So Cov(bᵢ, bₗ) = t^{2n−o}(1 − t^{o}) (keep) or t^{2n−o} − t^{2n} (drop): banded, zero for
    |i − l| ≥ n; at θ = 1/2 both expansions have t = 2^{−1/n} and the same mean, covariance and
    C̄. Window 1 is Bernoulli(r, θ). :meth:`enumerate` lists one row per seed configuration
    (2^{r+n−1} rows; distinct seeds may give the same mask, so rows repeat).

    The paper's window {j : |i − j| ≤ k} is n = 2k + 1 here (its formula writes 2k − 1);
    :func:`sliding_window_retain` and :meth:`from_seed_probability` give its "same θ" reading.
    """

    def __init__(self, width: int, window: int, retain: float, expansion: str):
        self._set(width, window, expansion, checks.probability(retain, "retain"), None)

    @classmethod
    def from_seed_probability(cls, width: int, window: int, seed_probability: float,
                              expansion: str) -> "SlidingWindow":
        """The mask whose seeds are 1 with probability ``seed_probability`` (θ' for keep, γ for
        drop); its ``retain`` is :func:`sliding_window_retain`. E.g. the paper's same-θ reading
        ``from_seed_probability(r, 3, 0.5, "keep")`` has retain 0.875."""
        mask = cls.__new__(cls)
        n, expansion = _check_window(window), _check_expansion(expansion)
        inactive = 1.0 - _check_seed_probability(seed_probability, expansion)
        mask._set(width, n, expansion, 1.0 - inactive**n if expansion == "keep" else inactive**n, inactive)
        return mask

    def _set(self, width, window, expansion, retain, inactive):
        self.width = checks.integer(width, "width")
        self.window = _check_window(window)
        self.expansion = _check_expansion(expansion)
        self.retain = retain
        self._inactive = _inactive_seed_probability(retain, self.window, expansion) if inactive is None else inactive
        self.seed_probability = 1.0 - self._inactive
        self.seeds = self.width + self.window - 1

    def __repr__(self) -> str:
        return (f"SlidingWindow(width={self.width}, window={self.window}, retain={self.retain}, "
                f"expansion={self.expansion!r})")

    @property
    def mean(self):
        return np.full(self.width, self.retain)

    @property
    def second_moment(self):
        n, t = self.window, self._inactive
        index = np.arange(self.width)
        overlap = np.maximum(0, n - np.abs(index[:, None] - index[None, :]))
        union = t ** (2 * n - overlap)
        if self.expansion == "keep":
            second = self.retain**2 + union * (1.0 - t**overlap)
        else:
            second = union
        np.fill_diagonal(second, self.retain)  # E[bᵢ²] = E[bᵢ] for a binary mask
        return second

    def _expand(self, active):
        """Masks from seed indicators (…, r + n − 1) of either library: any active seed per window."""
        if isinstance(active, torch.Tensor):
            hit = active.unfold(-1, self.window, 1).any(-1)
        else:
            hit = np.lib.stride_tricks.sliding_window_view(active, self.window, axis=-1).any(-1)
        return hit if self.expansion == "keep" else ~hit

    def sample(self, shape, rng):
        active = checks.generator(rng).random((*_batch_shape(shape), self.seeds)) < self.seed_probability
        return self._expand(active).astype(np.float64)

    def sample_torch(self, shape, generator, dtype=torch.float64):
        uniform = torch.rand((*_batch_shape(shape), self.seeds), generator=checks.torch_generator(generator),
                             device=generator.device, dtype=dtype)
        return self._expand(uniform < self.seed_probability).to(dtype)

    def support_size(self):
        return 2**self.seeds

    def _patterns(self):
        active = np.array(list(itertools.product((False, True), repeat=self.seeds)), dtype=bool)
        count = active.sum(axis=1)
        probs = self.seed_probability**count * self._inactive ** (self.seeds - count)
        return self._expand(active).astype(np.float64), probs


class PerRun:
    """One mask distribution per run, all of the same width r, for training loops that advance R runs
    at once (several rates in one batch): ``mean`` (R, 1, r) and ``characteristic`` (R, r, r) are the
    runs' moments, shaped to broadcast over a batch (R, B, r) and over Gram matrices (R, r, r);
    ``sample_torch((R, B), …)`` draws run i's B masks from the i-th distribution."""

    def __init__(self, masks):
        masks = tuple(masks) if isinstance(masks, (list, tuple)) else None
        if not masks or not all(isinstance(m, MaskDistribution) for m in masks):
            raise ValueError("masks must be a non-empty list or tuple of MaskDistribution, one per run")
        if len({m.width for m in masks}) != 1:
            raise ValueError(f"masks must all have the same width, got widths {sorted({m.width for m in masks})}")
        self.masks, self.width, self.runs = masks, masks[0].width, len(masks)
        self._groups = {}  # each distinct distribution and the runs that use it
        for run, mask in enumerate(masks):
            self._groups.setdefault(id(mask), (mask, []))[1].append(run)
        self._indices: dict = {}  # index tensors of the groups whose runs are not consecutive, by device

    def __repr__(self) -> str:
        return f"PerRun({list(self.masks)!r})"

    @property
    def mean(self) -> np.ndarray:
        """μ of each run, shape (R, 1, r)."""
        return np.stack([m.mean for m in self.masks])[:, None, :]

    @property
    def characteristic(self) -> np.ndarray:
        """C̄ of each run, shape (R, r, r)."""
        return np.stack([m.characteristic for m in self.masks])

    def sample_torch(self, shape, generator, dtype=torch.float64) -> torch.Tensor:
        """Masks (R, B, r): for each distinct distribution, one draw for all the runs that use it."""
        shape = checks.shape(shape, "shape")
        if len(shape) != 2 or shape[0] != self.runs:
            raise ValueError(f"shape must be ({self.runs}, B): the runs, then the batch; got {shape!r}")
        runs, batch = shape
        generator = checks.torch_generator(generator)
        out = torch.empty((runs, batch, self.width), device=generator.device, dtype=dtype)
        for mask, members in self._groups.values():
            out[self._rows(members, generator.device)] = mask.sample_torch((len(members), batch), generator, dtype)
        return out

    def _rows(self, members: list[int], device) -> slice | torch.Tensor:
        """The rows of ``members``: a slice when they are consecutive, else an index tensor made once per
        device (a copy to the device at every step would make the host wait)."""
        if members == list(range(members[0], members[-1] + 1)):
            return slice(members[0], members[-1] + 1)
        key = (id(members), str(device))
        if key not in self._indices:
            self._indices[key] = torch.as_tensor(members, device=device)
        return self._indices[key]
