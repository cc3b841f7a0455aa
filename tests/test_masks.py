"""Dropout masks: moments against brute force and closed forms, sampling, input checks."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb.rounding import roundoff_tolerance
from dropnb.masks import Bernoulli, Blocks, Finite, MaskDistribution
from helpers import random_finite

FAST = settings(max_examples=25, deadline=None, database=None)
retains = st.floats(min_value=0.01, max_value=1.0)
widths = st.integers(min_value=1, max_value=8)

FINITE_PATTERNS = [[1.0, 0.0, 2.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.5, 0.0, 1.0]]
FINITE_PROBS = [0.4, 0.3, 0.2, 0.1]

EXAMPLES = {
    "bernoulli": lambda: Bernoulli(6, 0.3),
    "bernoulli-keep-all": lambda: Bernoulli(4, 1.0),
    "blocks": lambda: Blocks(6, 3, 0.6),
    "blocks-singletons": lambda: Blocks(5, 1, 0.8),
    "finite": lambda: Finite(FINITE_PATTERNS, FINITE_PROBS),
}


def brute_force_moments(mask: MaskDistribution):
    """Mean, E[bbᵀ] and E[(b/μ)(b/μ)ᵀ] − 𝟙𝟙ᵀ by looping over the enumerated patterns."""
    patterns, probs = mask.enumerate()
    mean = np.zeros(mask.width)
    second = np.zeros((mask.width, mask.width))
    for pattern, prob in zip(patterns, probs):
        mean += prob * pattern
        second += prob * np.outer(pattern, pattern)
    scaled_second = np.zeros_like(second)
    for pattern, prob in zip(patterns, probs):
        scaled = pattern / mean
        scaled_second += prob * np.outer(scaled, scaled)
    return mean, second, scaled_second - 1.0


def assert_moments_match_enumeration(mask: MaskDistribution) -> None:
    patterns, probs = mask.enumerate()
    mean, second, characteristic = brute_force_moments(mask)
    # Every brute-force entry is a sum of K non-negative terms (patterns and probabilities are
    # non-negative), each a product of at most width + 4 rounded factors, so its relative error
    # is at most γ_{K + width + 4}; the library's own computation is bounded the same way. The
    # factor 2 covers both sides.
    gamma = 2 * roundoff_tolerance(len(probs) + mask.width + 4)
    np.testing.assert_allclose(mask.mean, mean, rtol=gamma, atol=0)
    np.testing.assert_allclose(mask.second_moment, second, rtol=gamma, atol=0)
    # Covariance and C̄ are differences, so their error is absolute: γ times the size of what is
    # subtracted (E[bbᵀ] and μμᵀ, resp. E[(b/μ)(b/μ)ᵀ] and 1; dividing by μμᵀ adds one rounding).
    np.testing.assert_allclose(mask.covariance, second - np.outer(mean, mean), rtol=0,
                               atol=gamma * 2 * second.max())
    np.testing.assert_allclose(mask.characteristic, characteristic, rtol=0,
                               atol=gamma * 2 * (characteristic.max() + 1))


# --- moments --------------------------------------------------------------------------------------


@FAST
@given(width=widths, retain=retains)
def test_bernoulli_moments_match_enumeration(width, retain):
    assert_moments_match_enumeration(Bernoulli(width, retain))


@FAST
@given(blocks=st.integers(1, 4), block_size=st.integers(1, 3), retain=retains)
def test_blocks_moments_match_enumeration(blocks, block_size, retain):
    assert_moments_match_enumeration(Blocks(blocks * block_size, block_size, retain))


@FAST
@given(seed=st.integers(0, 2**32 - 1), width=widths)
def test_finite_moments_match_enumeration(seed, width):
    assert_moments_match_enumeration(random_finite(seed, width))


@FAST
@given(width=widths, retain=retains)
def test_bernoulli_closed_forms(width, retain):
    mask = Bernoulli(width, retain)
    lam = (1 - retain) / retain
    # A handful of rounded operations per entry; C̄ = (E[b²] − θ²)/θ² is a difference of
    # numbers of size θ divided by θ², so its absolute error is at most γ₈/θ.
    gamma = roundoff_tolerance(8)
    np.testing.assert_allclose(mask.mean, np.full(width, retain), rtol=gamma)
    expected_second = np.full((width, width), retain * retain)
    np.fill_diagonal(expected_second, retain)
    np.testing.assert_allclose(mask.second_moment, expected_second, rtol=gamma)
    np.testing.assert_allclose(mask.characteristic, lam * np.eye(width), rtol=0, atol=gamma / retain)


@FAST
@given(blocks=st.integers(1, 4), block_size=st.integers(1, 3), retain=retains)
def test_blocks_closed_forms(blocks, block_size, retain):
    width = blocks * block_size
    mask = Blocks(width, block_size, retain)
    lam = (1 - retain) / retain
    same_block = np.array([[i // block_size == j // block_size for j in range(width)] for i in range(width)])
    gamma = roundoff_tolerance(8)  # as for Bernoulli: a few operations per entry, C̄ error ≤ γ/θ
    np.testing.assert_allclose(mask.mean, np.full(width, retain), rtol=gamma)
    np.testing.assert_allclose(mask.second_moment, np.where(same_block, retain, retain * retain), rtol=gamma)
    np.testing.assert_allclose(mask.characteristic, np.where(same_block, lam, 0.0), rtol=0, atol=gamma / retain)


@pytest.mark.parametrize("name", EXAMPLES)
def test_probabilities_sum_to_one(name):
    mask = EXAMPLES[name]()
    patterns, probs = mask.enumerate()
    assert patterns.shape == (mask.support_size(), mask.width)
    assert np.all(probs >= 0)
    # A sum of K ≤ 64 non-negative terms, each correct to a few roundings: error ≤ γ_{K+width+4}.
    assert math.isclose(probs.sum(), 1.0, rel_tol=roundoff_tolerance(len(probs) + mask.width + 4))


@pytest.mark.parametrize("name", EXAMPLES)
def test_enumerated_patterns_are_distinct(name):
    patterns, _ = EXAMPLES[name]().enumerate()
    assert len(np.unique(patterns, axis=0)) == len(patterns)


def test_blocks_patterns_expand_bernoulli_blocks():
    patterns, probs = Blocks(6, 2, 0.3).enumerate()
    block_patterns, block_probs = Bernoulli(3, 0.3).enumerate()
    np.testing.assert_array_equal(patterns[:, ::2], block_patterns)
    np.testing.assert_array_equal(patterns[:, 1::2], block_patterns)
    np.testing.assert_array_equal(probs, block_probs)


# --- sampling -------------------------------------------------------------------------------------


def sample_numpy(mask, shape, seed=0):
    return mask.sample(shape, np.random.default_rng(seed))


def sample_torch(mask, shape, seed=0, dtype=torch.float64):
    return mask.sample_torch(shape, torch.Generator().manual_seed(seed), dtype).numpy()


SAMPLERS = {"numpy": sample_numpy, "torch": sample_torch}


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("shape, expected", [(7, (7,)), ((3, 5), (3, 5)), ((), ()), (0, (0,))])
def test_sample_shape(sampler, name, shape, expected):
    mask = EXAMPLES[name]()
    samples = SAMPLERS[sampler](mask, shape)
    assert samples.shape == (*expected, mask.width)
    assert samples.dtype == np.float64


@pytest.mark.parametrize("name", EXAMPLES)
def test_sample_torch_honours_dtype(name):
    samples = EXAMPLES[name]().sample_torch((2, 3), torch.Generator().manual_seed(0), torch.float32)
    assert samples.dtype == torch.float32


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_sample_mean_within_five_standard_errors(sampler, name):
    mask = EXAMPLES[name]()
    n = 20_000
    samples = SAMPLERS[sampler](mask, n, seed=1)
    mean, second, _ = brute_force_moments(mask)
    # The sample mean of unit i has standard error sqrt(Var(bᵢ)/n) with Var(bᵢ) = E[bᵢ²] − μᵢ²;
    # 5 standard errors are exceeded with probability < 6e-7 per unit (normal approximation).
    standard_error = np.sqrt((np.diag(second) - mean**2).clip(min=0) / n)
    assert np.all(np.abs(samples.mean(axis=0) - mean) <= 5 * standard_error)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_sample_keeps_everything_when_retain_is_one(sampler):
    assert np.all(SAMPLERS[sampler](Bernoulli(5, 1.0), 100) == 1.0)


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", ["bernoulli", "blocks", "blocks-singletons"])
def test_binary_masks_sample_zeros_and_ones(sampler, name):
    samples = SAMPLERS[sampler](EXAMPLES[name](), 500)
    assert set(np.unique(samples)) <= {0.0, 1.0}


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("width, block_size", [(6, 3), (8, 2), (6, 6)])
def test_blocks_samples_are_constant_within_blocks(sampler, width, block_size):
    samples = SAMPLERS[sampler](Blocks(width, block_size, 0.5), (40, 3))
    blocks = samples.reshape(40, 3, width // block_size, block_size)
    assert np.all(blocks == blocks[..., :1])
    assert 0 < samples.mean() < 1  # both values occur, so constancy is not trivial


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_finite_samples_come_from_the_support(sampler):
    mask = Finite(FINITE_PATTERNS, FINITE_PROBS)
    samples = SAMPLERS[sampler](mask, (50, 4)).reshape(-1, mask.width)
    support = {tuple(p) for p in FINITE_PATTERNS}
    assert {tuple(s) for s in samples} <= support


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_finite_pattern_frequencies_within_five_standard_errors(sampler):
    mask = Finite(FINITE_PATTERNS, FINITE_PROBS)
    n = 20_000
    samples = SAMPLERS[sampler](mask, n, seed=2)
    counts = np.array([np.all(samples == p, axis=1).sum() for p in np.asarray(FINITE_PATTERNS)])
    probs = np.asarray(FINITE_PROBS)
    # Each count is Binomial(n, p): standard error of the frequency sqrt(p(1 − p)/n).
    assert np.all(np.abs(counts / n - probs) <= 5 * np.sqrt(probs * (1 - probs) / n))


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_sampling_is_reproducible(sampler, name):
    mask = EXAMPLES[name]()
    np.testing.assert_array_equal(SAMPLERS[sampler](mask, 50, seed=3), SAMPLERS[sampler](mask, 50, seed=3))


# --- bad input ------------------------------------------------------------------------------------

BAD_RETAIN = [0, -0.1, 1.5, float("nan"), "a", None]
BAD_WIDTH = [0, -3, 2.0, "4", True, None]


@pytest.mark.parametrize("retain", BAD_RETAIN)
@pytest.mark.parametrize("make", [lambda t: Bernoulli(4, t), lambda t: Blocks(4, 2, t)], ids=["bernoulli", "blocks"])
def test_bad_retain_raises(make, retain):
    with pytest.raises(ValueError, match="^retain must"):
        make(retain)


@pytest.mark.parametrize("width", BAD_WIDTH)
@pytest.mark.parametrize("make", [lambda w: Bernoulli(w, 0.5), lambda w: Blocks(w, 1, 0.5)], ids=["bernoulli", "blocks"])
def test_bad_width_raises(make, width):
    with pytest.raises(ValueError, match="^width must"):
        make(width)


@pytest.mark.parametrize("block_size", [0, -2, 1.0, True, 4, 7])
def test_bad_block_size_raises(block_size):
    with pytest.raises(ValueError, match="^block_size must"):
        Blocks(6, block_size, 0.5)


def test_numpy_integer_width_is_accepted():
    assert Bernoulli(np.int64(3), 0.5).width == 3


@pytest.mark.parametrize("probs", [[0.5, 0.4], [0.6, 0.6], [1.5, -0.5], [-0.1, 1.1], [0.5, float("nan")]])
def test_finite_bad_probs_raise(probs):
    with pytest.raises(ValueError, match="probs must"):
        Finite([[1.0, 0.0], [0.0, 1.0]], probs)


@pytest.mark.parametrize("probs", [[1.0], [0.2, 0.3, 0.5], [[0.5, 0.5]]])
def test_finite_probs_of_wrong_shape_raise(probs):
    with pytest.raises(ValueError, match="probs must"):
        Finite([[1.0, 0.0], [0.0, 1.0]], probs)


@pytest.mark.parametrize("patterns", [[1.0, 1.0], [[[1.0]], [[1.0]]], np.zeros((2, 0))])
def test_finite_patterns_of_wrong_shape_raise(patterns):
    with pytest.raises(ValueError, match="^patterns"):
        Finite(patterns, [0.5, 0.5])


@pytest.mark.parametrize("patterns", [[[1.0, 0.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, -1.0]]])
def test_finite_zero_mean_unit_raises(patterns):
    with pytest.raises(ValueError, match="^patterns"):
        Finite(patterns, [0.5, 0.5])


def test_finite_non_finite_patterns_raise():
    with pytest.raises(ValueError, match="^patterns"):
        Finite([[1.0, np.inf], [1.0, 1.0]], [0.5, 0.5])


@pytest.mark.parametrize("mask", [Bernoulli(20, 0.5), Blocks(40, 2, 0.5)], ids=repr)
def test_enumerating_a_too_wide_mask_raises(mask):
    with pytest.raises(ValueError, match="width"):
        mask.enumerate()


@pytest.mark.parametrize("shape", [-1, (2, -1), (2.0,), (True,)])
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_bad_sample_shape_raises(sampler, shape):
    with pytest.raises(ValueError, match="^shape must"):
        SAMPLERS[sampler](Bernoulli(3, 0.5), shape)


# --- sliding windows ------------------------------------------------------------------------------

from dropnb.masks import (  # noqa: E402  (appended section)
    SlidingWindow,
    sliding_window_retain,
    sliding_window_seed_probability,
)

EXPANSIONS = ["keep", "drop"]
SLIDING_EXAMPLES = {  # (width, window, retain, expansion)
    "keep-3": (6, 3, 0.3, "keep"),
    "drop-3": (6, 3, 0.3, "drop"),
    "keep-5": (7, 5, 0.8, "keep"),
    "drop-5": (7, 5, 0.8, "drop"),
    "keep-wide-window": (2, 7, 0.6, "keep"),
    "drop-window-1": (4, 1, 0.45, "drop"),
}


def sliding(name):
    return SlidingWindow(*SLIDING_EXAMPLES[name])


def appendix_a_second_moment(width, window, retain, expansion):
    """E[bᵢbₗ] by the formulas as printed in Appendix A, straight from θ (an independent computation):
    keep 1 − 2qⁿ + q^{2n−o}, q = 1 − θ' = (1 − θ)^{1/n}; drop p^{2n−o}, p = 1 − γ = θ^{1/n}."""
    n = window
    overlap = np.array([[max(0, n - abs(i - j)) for j in range(width)] for i in range(width)])
    if expansion == "keep":
        q = (1 - retain) ** (1 / n)
        return 1 - 2 * q**n + q ** (2 * n - overlap)
    p = retain ** (1 / n)
    return p ** (2 * n - overlap)


def assert_sliding_moments_match_enumeration(mask: SlidingWindow) -> None:
    patterns, probs = mask.enumerate()
    assert patterns.shape == (2 ** (mask.width + mask.window - 1), mask.width)
    assert math.isclose(probs.sum(), 1.0, rel_tol=1e-12)
    mean = probs @ patterns
    second = np.einsum("k,ki,kj->ij", probs, patterns, patterns)
    np.testing.assert_allclose(mask.mean, mean, rtol=1e-12, atol=0)
    np.testing.assert_allclose(mask.second_moment, second, rtol=1e-12, atol=0)
    characteristic = second / np.outer(mean, mean) - 1
    np.testing.assert_allclose(mask.characteristic, characteristic, rtol=0,
                               atol=1e-12 * (1 + np.abs(characteristic).max()))


@FAST
@given(width=st.integers(1, 6), window=st.sampled_from([1, 3, 5, 7]), retain=st.floats(0.05, 1.0),
       expansion=st.sampled_from(EXPANSIONS))
def test_sliding_window_moments_match_enumeration(width, window, retain, expansion):
    assert_sliding_moments_match_enumeration(SlidingWindow(width, window, retain, expansion))


@pytest.mark.parametrize("name", SLIDING_EXAMPLES)
def test_sliding_window_examples_match_enumeration(name):
    assert_sliding_moments_match_enumeration(sliding(name))


@FAST
@given(width=st.integers(1, 9), window=st.sampled_from([1, 3, 5, 9]), retain=st.floats(0.05, 1.0),
       expansion=st.sampled_from(EXPANSIONS))
def test_sliding_window_matches_appendix_a(width, window, retain, expansion):
    mask = SlidingWindow(width, window, retain, expansion)
    # The library uses the cancellation-free form μ² + t^{2n−o}(1 − t^o) for keep; the printed
    # 1 − 2qⁿ + q^{2n−o} loses up to ~4u absolutely, i.e. ≤ 4u/θ² relative for an entry ≥ θ².
    np.testing.assert_allclose(mask.second_moment, appendix_a_second_moment(width, window, retain, expansion),
                               rtol=1e-12 / retain**2, atol=0)


@FAST
@given(width=st.integers(1, 9), window=st.sampled_from([1, 3, 5, 9]), retain=st.floats(0.01, 1.0),
       expansion=st.sampled_from(EXPANSIONS))
def test_sliding_window_marginals_are_retain(width, window, retain, expansion):
    mask = SlidingWindow(width, window, retain, expansion)
    assert np.all(mask.mean == retain)
    assert np.all(np.diag(mask.second_moment) == retain)
    # The seed probability reproduces θ through the window: a power and a subtraction, each with
    # relative error ~u, amplified by at most n·(1 − θ)/θ when 1 − tⁿ cancels.
    assert math.isclose(sliding_window_retain(mask.seed_probability, window, expansion), retain,
                        rel_tol=1e-13 * window / retain)


@FAST
@given(width=st.integers(1, 8), window=st.sampled_from([3, 5, 7]), retain=st.floats(0.05, 1.0),
       expansion=st.sampled_from(EXPANSIONS))
def test_sliding_window_is_banded(width, window, retain, expansion):
    mask = SlidingWindow(width, window, retain, expansion)
    far = np.abs(np.subtract.outer(np.arange(width), np.arange(width))) >= window
    # Units whose windows do not overlap are independent: C̄ = 0 (exactly for keep, where the
    # second moment is θ² by construction; up to rounding of t^{2n} = θ² for drop).
    np.testing.assert_allclose(mask.characteristic[far], 0.0, rtol=0, atol=1e-13 / retain**2)
    near = ~far
    assert np.all(mask.characteristic[near] >= -1e-13 / retain**2)


@FAST
@given(width=st.integers(1, 8), retain=retains, expansion=st.sampled_from(EXPANSIONS))
def test_sliding_window_of_one_is_bernoulli(width, retain, expansion):
    mask, bernoulli = SlidingWindow(width, 1, retain, expansion), Bernoulli(width, retain)
    np.testing.assert_array_equal(mask.mean, bernoulli.mean)
    # Off-diagonal entries come from t = 1 − θ or θ (one rounding) squared: relative error ≤ 4u/θ.
    np.testing.assert_allclose(mask.second_moment, bernoulli.second_moment, rtol=1e-14 / retain, atol=0)
    np.testing.assert_allclose(mask.characteristic, bernoulli.characteristic, rtol=0, atol=1e-14 / retain**2)
    if width <= 6:
        patterns, probs = mask.enumerate()
        expected_patterns, expected_probs = bernoulli.enumerate()
        if expansion == "drop":  # a seed of 1 drops its unit: the seed configurations run in reverse
            expected_patterns, expected_probs = expected_patterns[::-1], expected_probs[::-1]
        np.testing.assert_array_equal(patterns, expected_patterns)
        # Each probability is a product of ≤ 8 factors θ or 1 − θ, each within ~2u/θ of Bernoulli's.
        np.testing.assert_allclose(probs, expected_probs, rtol=1e-13 / retain)


def test_sliding_window_of_one_samples_like_bernoulli_in_distribution():
    samples = SlidingWindow(5, 1, 0.3, "keep").sample(20_000, np.random.default_rng(4))
    # Independent units: products of distinct units average θ² (within 5 standard errors).
    products = samples[:, 0] * samples[:, 1]
    assert abs(products.mean() - 0.09) <= 5 * np.sqrt(0.09 * 0.91 / len(samples))


def test_sliding_window_seed_probabilities_of_section_5_3():
    # θ = 0.5: θ' = 1 − 0.5^{1/3} ≈ 0.2063 and 1 − 0.5^{1/5} ≈ 0.1294; for θ = 1/2 the
    # drop-expansion rate γ = 1 − 0.5^{1/n} is the same number.
    for expansion in EXPANSIONS:
        assert round(sliding_window_seed_probability(0.5, 3, expansion), 4) == 0.2063
        assert round(sliding_window_seed_probability(0.5, 5, expansion), 4) == 0.1294
    assert math.isclose(sliding_window_seed_probability(0.3, 1, "keep"), 0.3, rel_tol=1e-15)  # window 1: θ


def test_sliding_window_same_theta_reading_of_section_5_3():
    # The paper's semantics (keep) with the DropBlock θ = 0.5 used as the seed probability: the
    # drop rate is 0.5ⁿ, *lower* than 0.5; Ghiasi's semantics with γ = 1 − θ give 1 − 0.5ⁿ.
    assert 1 - sliding_window_retain(0.5, 3, "keep") == 0.125
    assert 1 - sliding_window_retain(0.5, 5, "keep") == 0.03125
    assert 1 - sliding_window_retain(0.5, 3, "drop") == 0.875
    assert 1 - sliding_window_retain(0.5, 5, "drop") == 0.96875
    mask = SlidingWindow.from_seed_probability(10, 5, 0.5, "keep")
    assert mask.seed_probability == 0.5 and mask.retain == 1 - 0.03125
    assert_sliding_moments_match_enumeration(SlidingWindow.from_seed_probability(4, 3, 0.5, "keep"))
    assert_sliding_moments_match_enumeration(SlidingWindow.from_seed_probability(4, 3, 0.25, "drop"))


def test_sliding_window_characteristic_row_of_r13():
    # Keep-expansion, n = 5, θ = 0.5: the C̄ row at lags 0..4 is 1, 0.741, 0.516, 0.320, 0.149, then 0.
    row = SlidingWindow(12, 5, 0.5, "keep").characteristic[5]
    np.testing.assert_array_equal(np.round(row[5:10], 3), [1.0, 0.741, 0.516, 0.320, 0.149])
    np.testing.assert_array_equal(row[10:], 0.0)
    np.testing.assert_allclose(row[:6], row[5:11][::-1], rtol=1e-15)  # symmetric in the lag


@pytest.mark.parametrize("window", [3, 5])
def test_sliding_window_expansions_coincide_at_one_half(window):
    keep, drop = SlidingWindow(8, window, 0.5, "keep"), SlidingWindow(8, window, 0.5, "drop")
    np.testing.assert_allclose(keep.covariance, drop.covariance, rtol=0, atol=1e-15)
    assert not np.allclose(SlidingWindow(8, window, 0.3, "keep").covariance,
                           SlidingWindow(8, window, 0.3, "drop").covariance, rtol=0, atol=1e-3)


def test_sliding_window_edges_have_full_windows():
    # Every unit, including the first and last, sees n seeds: the marginal is θ everywhere (the
    # enumeration checks it), and the seed line has r + n − 1 positions.
    mask = SlidingWindow(4, 5, 0.3, "keep")
    assert mask.seeds == 8 and mask.support_size() == 2**8
    patterns, probs = mask.enumerate()
    np.testing.assert_allclose(probs @ patterns, 0.3, rtol=1e-13)


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", SLIDING_EXAMPLES)
@pytest.mark.parametrize("shape, expected", [(7, (7,)), ((3, 5), (3, 5)), ((), ()), (0, (0,))])
def test_sliding_window_sample_shape(sampler, name, shape, expected):
    mask = sliding(name)
    samples = SAMPLERS[sampler](mask, shape)
    assert samples.shape == (*expected, mask.width)
    assert samples.dtype == np.float64
    assert set(np.unique(samples)) <= {0.0, 1.0}


@pytest.mark.parametrize("name", SLIDING_EXAMPLES)
def test_sliding_window_sample_torch_honours_dtype(name):
    samples = sliding(name).sample_torch((2, 3), torch.Generator().manual_seed(0), torch.float32)
    assert samples.dtype == torch.float32 and samples.shape == (2, 3, sliding(name).width)


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", SLIDING_EXAMPLES)
def test_sliding_window_samples_come_from_the_support(sampler, name):
    mask = sliding(name)
    patterns, probs = mask.enumerate()
    support = {tuple(p) for p, q in zip(patterns, probs) if q > 0}
    assert {tuple(s) for s in SAMPLERS[sampler](mask, 500, seed=5)} <= support


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("name", SLIDING_EXAMPLES)
def test_sliding_window_sample_moments_within_five_standard_errors(sampler, name):
    mask = sliding(name)
    n = 100_000
    samples = SAMPLERS[sampler](mask, n, seed=6)
    # Every product bᵢbₗ (i ≤ l; i = l gives the mean) is a Bernoulli variable with success
    # probability E[bᵢbₗ]: its sample mean has standard error sqrt(E(1 − E)/n); 5 standard errors
    # are exceeded with probability < 6e-7 per entry (normal approximation), ≤ 28 entries here.
    second = mask.second_moment
    empirical = samples.T @ samples / n
    standard_error = np.sqrt(second * (1 - second) / n)
    upper = np.triu_indices(mask.width)
    assert np.all(np.abs(empirical - second)[upper] <= 5 * standard_error[upper])


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_sliding_window_sampling_is_reproducible(sampler):
    mask = sliding("keep-3")
    np.testing.assert_array_equal(SAMPLERS[sampler](mask, 50, seed=3), SAMPLERS[sampler](mask, 50, seed=3))


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("expansion", EXPANSIONS)
def test_sliding_window_keeps_everything_when_retain_is_one(sampler, expansion):
    assert np.all(SAMPLERS[sampler](SlidingWindow(6, 3, 1.0, expansion), 100) == 1.0)


@pytest.mark.parametrize("window", [0, -1, 2, 4, 3.0, True, "3", None])
def test_sliding_window_bad_window_raises(window):
    with pytest.raises(ValueError, match="^window must"):
        SlidingWindow(5, window, 0.5, "keep")
    with pytest.raises(ValueError, match="^window must"):
        sliding_window_seed_probability(0.5, window, "keep")


@pytest.mark.parametrize("expansion", ["Keep", "expand", "", None, 1])
def test_sliding_window_bad_expansion_raises(expansion):
    with pytest.raises(ValueError, match="^expansion must"):
        SlidingWindow(5, 3, 0.5, expansion)
    with pytest.raises(ValueError, match="^expansion must"):
        sliding_window_retain(0.5, 3, expansion)


@pytest.mark.parametrize("retain", BAD_RETAIN)
def test_sliding_window_bad_retain_raises(retain):
    with pytest.raises(ValueError, match="^retain must"):
        SlidingWindow(5, 3, retain, "drop")
    with pytest.raises(ValueError, match="^retain must"):
        sliding_window_seed_probability(retain, 3, "keep")


@pytest.mark.parametrize("width", BAD_WIDTH)
def test_sliding_window_bad_width_raises(width):
    with pytest.raises(ValueError, match="^width must"):
        SlidingWindow(width, 3, 0.5, "keep")


@pytest.mark.parametrize("expansion, seed_probability", [
    ("keep", 0), ("keep", 1.5), ("keep", -0.1), ("drop", 1), ("drop", -0.1), ("drop", float("nan")),
    ("keep", "a"), ("drop", None), ("keep", True),
])
def test_sliding_window_bad_seed_probability_raises(expansion, seed_probability):
    with pytest.raises(ValueError, match="^seed_probability must"):
        SlidingWindow.from_seed_probability(5, 3, seed_probability, expansion)
    with pytest.raises(ValueError, match="^seed_probability must"):
        sliding_window_retain(seed_probability, 3, expansion)


def test_enumerating_a_too_long_seed_line_raises():
    with pytest.raises(ValueError, match="width"):
        SlidingWindow(14, 5, 0.5, "keep").enumerate()  # 2^18 seed configurations
