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
