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

MAX_ENUMERATION = 2**16


def check_width(width: int, name: str = "width") -> int:
    """A positive integer (a width, a block size) as an int; ValueError naming ``name`` otherwise."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
        raise ValueError(f"{name} must be a positive integer, got {width!r}")
    return int(width)


def check_retain(retain: float) -> float:
    """The retain probability θ as a float; ValueError unless θ ∈ (0, 1]."""
    if isinstance(retain, bool):
        raise ValueError(f"retain must be a probability in (0, 1], got {retain!r}")
    try:
        value = float(retain)
    except (TypeError, ValueError):
        raise ValueError(f"retain must be a probability in (0, 1], got {retain!r}") from None
    if not 0 < value <= 1:
        raise ValueError(f"retain must be a probability in (0, 1], got {retain!r}")
    return value


def _batch_shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise ValueError(f"shape must be non-negative integers, got {shape!r}")
    return tuple(int(n) for n in shape)


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
        self.width = check_width(width)
        self.retain = check_retain(retain)

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
        return (rng.random((*_batch_shape(shape), self.width)) < self.retain).astype(np.float64)

    def sample_torch(self, shape, generator, dtype=torch.float64):
        uniform = torch.rand((*_batch_shape(shape), self.width), generator=generator,
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
        self.width = check_width(width)
        self.block_size = check_width(block_size, "block_size")
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
        patterns = np.asarray(patterns, dtype=np.float64)
        probs = np.asarray(probs, dtype=np.float64)
        if patterns.ndim != 2 or patterns.shape[0] < 1 or patterns.shape[1] < 1:
            raise ValueError(f"patterns must be a non-empty (K, r) array, got shape {patterns.shape}")
        if probs.shape != (patterns.shape[0],):
            raise ValueError(f"probs must have shape ({patterns.shape[0]},) to match patterns, got {probs.shape}")
        if not (np.all(np.isfinite(patterns)) and np.all(np.isfinite(probs))):
            raise ValueError("patterns and probs must be finite")
        if np.any(probs < 0) or not math.isclose(probs.sum(), 1.0, rel_tol=0, abs_tol=1e-12):
            raise ValueError(f"probs must be non-negative and sum to 1, got sum {probs.sum()!r}")
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
        index = rng.choice(len(self.probs), size=_batch_shape(shape), p=self.probs)
        return self.patterns[index]

    def sample_torch(self, shape, generator, dtype=torch.float64):
        shape = _batch_shape(shape)
        probs = torch.as_tensor(self.probs, device=generator.device, dtype=torch.float64)
        index = torch.multinomial(probs, max(math.prod(shape), 1), replacement=True, generator=generator)
        patterns = torch.as_tensor(self.patterns, device=generator.device, dtype=dtype)
        return patterns[index[: math.prod(shape)]].reshape(*shape, self.width)

    def support_size(self):
        return len(self.probs)

    def _patterns(self):
        return self.patterns.copy(), self.probs.copy()
