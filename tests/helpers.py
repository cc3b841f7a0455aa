"""Shared builders for the unit tests."""

import numpy as np

from dropnb.masks import Finite


def random_finite(seed: int, width: int) -> Finite:
    """A Finite mask on 1..8 non-negative patterns, every unit kept with positive probability."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 9))
    patterns = rng.choice([0.0, 0.5, 1.0, 2.0], size=(count, width))
    patterns[0] = 1.0
    probs = rng.random(count) + 0.05
    return Finite(patterns, probs / probs.sum())


def relu_decay_data(m=15, seed=7):
    """(X, Y) of the small regression of the two-layer ReLU tests: X = [x; 1] with m sorted uniform
    inputs on [-1, 1], Y = sin 3x + 0.1ξ, one row."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-1, 1, m))
    return np.vstack([x, np.ones(m)]), (np.sin(3 * x) + 0.1 * rng.standard_normal(m))[None, :]


SD1, SD2, SR = 2, 3, 4  # d₁, d₂ and r of the shallow network of the batched training tests


def shallow_runs(runs: int, seed: int = 0):
    """A target M (d₁ × d₂) and R = ``runs`` copies of one start, U0 (R, d₁, r) and V0 (R, d₂, r)."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((SD1, SD2))
    U0 = np.broadcast_to(rng.standard_normal((SD1, SR)), (runs, SD1, SR)).copy()
    V0 = np.broadcast_to(rng.standard_normal((SD2, SR)), (runs, SD2, SR)).copy()
    return M, U0, V0
