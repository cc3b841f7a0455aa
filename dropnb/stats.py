"""Monte-Carlo estimates with standard errors, streamed in chunks, and simultaneous bounds.

The claims' statistics: means with standard errors over independent samples (the first axis, or
streamed chunks), z-scores against a family-wise level (Bonferroni over the claims of a family),
t statistics and one-sided confidence bounds for paired differences, sign tests, binomial upper
bounds, and Spearman rank correlations with their exact or bootstrap critical values."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist
from typing import Iterable

import numpy as np
from scipy.stats import beta, rankdata
from scipy.stats import t as student_t

from . import checks


class StreamingMean:
    """Entrywise mean and standard error of i.i.d. samples added in chunks (Chan's update).

    For samples s₁…sₙ: mean = Σsₖ/n, standard error = sd/√n with sd² = Σ(sₖ − mean)²/(n − 1).
    """

    def __init__(self) -> None:
        self.count = 0
        self._mean: np.ndarray | float = 0.0
        self._m2: np.ndarray | float = 0.0

    def add(self, samples) -> None:
        """Add a chunk of samples along axis 0."""
        self._add(samples, "samples")

    def _add(self, samples, name: str) -> None:
        samples = checks.real_array(samples, name)
        if samples.ndim == 0 or len(samples) == 0:
            raise ValueError(f"{name} must be a non-empty array along axis 0, got shape {samples.shape}")
        if not np.all(np.isfinite(samples)):
            raise ValueError(f"{name} must be finite")
        n, mean = len(samples), samples.mean(axis=0)
        m2 = ((samples - mean) ** 2).sum(axis=0)
        total = self.count + n
        delta = mean - self._mean
        self._mean = self._mean + delta * n / total
        self._m2 = self._m2 + m2 + delta**2 * self.count * n / total
        self.count = total

    @property
    def mean(self):
        if self.count == 0:
            raise ValueError("no samples added")
        return self._mean

    @property
    def standard_error(self):
        if self.count < 2:
            raise ValueError("a standard error needs at least two samples")
        return np.sqrt(self._m2 / (self.count - 1) / self.count)


def streaming_mean(chunks: Iterable) -> StreamingMean:
    """A :class:`StreamingMean` fed with every chunk."""
    estimate = StreamingMean()
    for index, chunk in enumerate(chunks):
        estimate._add(chunk, f"chunks[{index}]")
    return estimate


def chunk_sizes(total: int, chunk: int = 2**16) -> list[int]:
    """Split ``total`` samples into chunks of at most ``chunk``."""
    total, chunk = checks.integer(total, "total"), checks.integer(chunk, "chunk")
    return [min(chunk, total - start) for start in range(0, total, chunk)]


def simultaneous_z(count: int, level: float = 1e-6) -> float:
    """Two-sided normal critical value for ``count`` z-scores at family-wise error ``level``
    (Bonferroni): Φ⁻¹(1 − level/(2·count))."""
    count = checks.integer(count, "count")
    level = checks.number(level, "level", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    return NormalDist().inv_cdf(1 - level / (2 * count))


def binomial_upper(successes: int, trials: int, level: float) -> float:
    """One-sided Clopper–Pearson upper confidence bound on the probability p of a Binomial(n, p)
    count observed at k = ``successes`` of n = ``trials``: the p with P(Bin(n, p) ≤ k) = ``level``,
    the (1 − level) quantile of Beta(k + 1, n − k); 1 when k = n (for k = 0, 1 − level^{1/n})."""
    trials = checks.integer(trials, "trials", minimum=1)
    successes = checks.integer(successes, "successes", minimum=0)
    if successes > trials:
        raise ValueError(f"successes must be at most trials = {trials}, got {successes}")
    level = checks.number(level, "level", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    if successes == trials:
        return 1.0
    return float(beta.ppf(1 - level, successes + 1, trials - successes))


def self_normalized_z(differences, axis: int | None = None) -> np.ndarray | float:
    """Σₜ dₜ / (Σₜ dₜ²)^{1/2} over ``axis`` (all entries if None): approximately N(0, 1) when the
    dₜ are martingale differences, such as a minibatch loss minus the objective at the same
    weights along a training run (self-normalized central limit theorem)."""
    d = checks.real_array(differences, "differences")
    axis = None if axis is None else checks.integer(axis, "axis", minimum=-d.ndim, maximum=max(d.ndim - 1, 0))
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError("differences must be a non-empty array of finite numbers")
    scale = np.sqrt(np.sum(d**2, axis=axis))
    if np.any(scale == 0):
        raise ValueError("differences must not be all zero along the summed axis")
    z = np.sum(d, axis=axis) / scale
    return float(z) if np.ndim(z) == 0 else z


def loss_bias_z(run, name: str) -> float:
    """:func:`self_normalized_z` of the minibatch loss at every checkpoint step but the last (before
    that step's update) minus the metric ``name`` at the same weights, over checkpoints and runs of a
    :class:`dropnb.engine.Run`: approximately N(0, 1) when the loss is an unbiased estimate of the metric."""
    name = checks.text(name, "name")
    if not hasattr(run, "losses") or not hasattr(run, "metrics"):
        raise checks.error("run", "a dropnb.engine.Run", type(run).__name__)
    if run.losses is None or name not in run.metrics:
        raise ValueError(f"run must record losses and the metric {name!r}")
    return self_normalized_z(run.losses[:, run.steps[:-1]].T - run.metrics[name][:-1])


def sign_test_critical(count: int, level: float) -> int:
    """The smallest k with P(Bin(n, ½) ≥ k) = 2⁻ⁿ Σ_{j≥k} C(n, j) ≤ ``level``, n = ``count``: how many of n
    independent paired runs must go one way for a one-sided sign test at ``level`` (exact integer sums)."""
    count = checks.integer(count, "count")
    level = checks.number(level, "level", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    if level * 2**count < 1:
        raise ValueError(f"no count of {count} runs is significant at level {level:g}: 2^-{count} > level")
    return min(k for k in range(count + 1) if sum(math.comb(count, j) for j in range(k, count + 1)) <= level * 2**count)


def spearman_critical(count: int, level: float) -> float:
    """The smallest ρ_c with P(ρ ≥ ρ_c) ≤ ``level`` for Spearman's ρ = 1 − 6Σdᵢ²/(k(k² − 1)) of k = ``count``
    distinct paired values under independence (every ranking equally likely), by enumerating all k!
    rankings (k ≤ 9); 1 + 1e-12 (never reached) when even ρ = 1 is more likely than ``level``."""
    count = checks.integer(count, "count", minimum=3, maximum=9)
    level = checks.number(level, "level", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    base = np.arange(count)
    squares = np.array([np.sum((base - np.array(perm)) ** 2) for perm in itertools.permutations(base)])
    rho = np.sort(1 - 6 * squares / (count * (count**2 - 1)))[::-1]
    allowed = [value for value in np.unique(rho) if np.mean(rho >= value - 1e-12) <= level]
    return float(min(allowed)) if allowed else 1.0 + 1e-12



def t_statistic(differences, axis: int = -1) -> np.ndarray | float:
    """The one-sample t statistic d̄/(s/√n) of n ≥ 2 independent differences along ``axis``
    (s the sample standard deviation): Student-t with n − 1 degrees of freedom when the
    differences are normal with mean 0. A paired comparison of independent runs tests with it."""
    d = checks.real_array(differences, "differences")
    axis = checks.integer(axis, "axis", minimum=None)
    if not -d.ndim <= axis < d.ndim:
        raise ValueError(f"differences must have an axis {axis}, got shape {d.shape}")
    if d.shape[axis] < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"differences must hold at least two finite values along axis {axis}, got shape {d.shape}")
    spread = d.std(axis=axis, ddof=1)
    if np.any(spread == 0):
        raise ValueError("differences must not be all equal along the axis: the t statistic is undefined")
    t = d.mean(axis=axis) / (spread / np.sqrt(d.shape[axis]))
    return float(t) if np.ndim(t) == 0 else t


def t_critical(count: int, level: float) -> float:
    """The one-sided critical value of a t test on ``count`` independent differences at ``level``:
    the (1 − level) quantile of Student's t with count − 1 degrees of freedom."""
    count = checks.integer(count, "count", minimum=2)
    level = checks.number(level, "level", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    return float(student_t.ppf(1 - level, count - 1))


def mean_and_error(values) -> tuple[float, float]:
    """The sample mean v̄ = Σᵢvᵢ/n of n ≥ 2 independent ``values`` and its standard error s/√n, with
    s² = Σᵢ(vᵢ − v̄)²/(n − 1)."""
    v = checks.vector(values, "values")
    if v.size < 2:
        raise ValueError(f"values must hold at least two values, got {v.size}")
    return float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v)))


def mean_confidence_bound(values, level: float, side: str = "lower") -> float:
    """The one-sided Student-t confidence bound on the mean of n ≥ 2 independent ``values``,
    v̄ − t_{1−level, n−1}·s/√n (``side="lower"``) or v̄ + t_{1−level, n−1}·s/√n (``"upper"``): it lies
    below (above) the true mean with probability at least 1 − ``level`` when the values are normal.
    "The lower bound exceeds 0" is the one-sided t test at ``level``, and unlike the t statistic
    the bound stays finite when every value is the same."""
    v = checks.vector(values, "values")
    if v.size < 2:
        raise ValueError(f"values must hold at least two values, got {v.size}")
    side = checks.choice(side, "side", ("lower", "upper"))
    half = t_critical(v.size, level) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean() - half if side == "lower" else v.mean() + half)


def rank_correlation(x, y) -> np.ndarray | float:
    """Spearman's ρ of x and y along the last axis (batched over leading axes): the Pearson
    correlation of their ranks (average ranks for ties)."""
    x, y = checks.real_array(x, "x"), checks.real_array(y, "y")
    if x.shape != y.shape or x.ndim == 0 or x.shape[-1] < 3:
        raise ValueError(f"x and y must have the same shape with at least 3 values along the last axis, "
                         f"got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite")
    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    scale = np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))
    if np.any(scale == 0):
        raise ValueError("x and y must not be constant: the rank correlation is undefined")
    rho = (rx * ry).sum(-1) / scale
    return float(rho) if np.ndim(rho) == 0 else rho


def bootstrap_rank_correlation(x, y, draws: int, rng: np.random.Generator,
                               level: float) -> tuple[float, float, float]:
    """Spearman's ρ between the cell means of x and y (cells, runs), and a two-sided percentile
    bootstrap interval at ``level``: each of ``draws`` resamples draws the runs of every cell
    with replacement (the same draw for x and y, which are measured on the same runs) and
    recomputes ρ of the resampled means. Returns (ρ, lower, upper)."""
    x, y = checks.matrix(x, "x"), checks.matrix(y, "y")
    if x.shape != y.shape or x.shape[0] < 3 or x.shape[1] < 2:
        raise ValueError(f"x and y must be (cells ≥ 3, runs ≥ 2) arrays of the same shape, got {x.shape} and {y.shape}")
    draws, rng = checks.integer(draws, "draws"), checks.generator(rng, "rng")
    level = checks.number(level, "level", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    cells, runs = x.shape
    picks = rng.integers(runs, size=(draws, cells, runs))
    rows = np.arange(cells)[None, :, None]
    rho = rank_correlation(x[rows, picks].mean(-1), y[rows, picks].mean(-1))
    lower, upper = np.quantile(rho, [level / 2, 1 - level / 2])
    return rank_correlation(x.mean(-1), y.mean(-1)), float(lower), float(upper)
