"""The self-normalized martingale z-score and the simultaneous normal bound."""

import numpy as np
import pytest

from dropnb import stats
from dropnb.stats import self_normalized_z, simultaneous_z


def test_self_normalized_z_of_known_differences():
    assert self_normalized_z([1.0, -1.0, 2.0]) == pytest.approx(2 / np.sqrt(6), rel=1e-15)
    np.testing.assert_allclose(self_normalized_z([[1.0, 3.0], [1.0, -1.0]], axis=0), [2 / np.sqrt(2), 2 / np.sqrt(10)])


def test_self_normalized_z_is_standard_normal_for_independent_noise():
    rng = np.random.default_rng(0)
    z = self_normalized_z(rng.standard_t(5, size=(2000, 400)), axis=0)  # heavy tails, finite variance
    assert abs(z.mean()) < 4 / np.sqrt(400) and abs(z.std() - 1) < 0.15


@pytest.mark.parametrize("bad", [[], [np.nan, 1.0], [0.0, 0.0]])
def test_self_normalized_z_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="differences"):
        self_normalized_z(bad)


def test_simultaneous_z_is_the_bonferroni_quantile():
    assert simultaneous_z(1, 0.05) == pytest.approx(1.959964, abs=1e-6)
    assert simultaneous_z(10, 1e-3) > simultaneous_z(1, 1e-3)


def test_loss_bias_z_of_an_unbiased_and_a_biased_loss():
    from types import SimpleNamespace

    rng = np.random.default_rng(4)
    metric = rng.uniform(1, 2, (11, 50))  # checkpoints 0, 10, …, 100 of 50 runs
    noise = rng.standard_normal((50, 100))
    steps = np.arange(0, 101, 10)
    losses = np.repeat(metric[:-1].T, 10, axis=1) + noise
    z = stats.loss_bias_z(SimpleNamespace(steps=steps, losses=losses, metrics={"f": metric}), "f")
    assert abs(z) < 5
    biased = SimpleNamespace(steps=steps, losses=losses + 1.0, metrics={"f": metric})
    assert stats.loss_bias_z(biased, "f") > 5
    with pytest.raises(ValueError, match="losses"):
        stats.loss_bias_z(SimpleNamespace(steps=steps, losses=None, metrics={"f": metric}), "f")


def test_binomial_upper_is_the_clopper_pearson_bound():
    from scipy.stats import binom

    assert stats.binomial_upper(0, 100, 1e-3) == pytest.approx(1 - 1e-3 ** (1 / 100), rel=1e-12)
    assert stats.binomial_upper(5, 5, 0.05) == 1.0
    for k, n in ((1, 10), (7, 40), (0, 3)):
        p = stats.binomial_upper(k, n, 0.01)
        assert binom.cdf(k, n, p) == pytest.approx(0.01, rel=1e-8)


def test_binomial_upper_rejects_bad_counts():
    with pytest.raises(ValueError, match="successes"):
        stats.binomial_upper(6, 5, 0.05)
    with pytest.raises(ValueError, match="level"):
        stats.binomial_upper(1, 5, 0.0)


def test_streaming_mean_equals_the_one_pass_mean_and_standard_error():
    """Chan's chunked update against numpy on all samples at once, for uneven chunks."""
    rng = np.random.default_rng(11)
    samples = rng.standard_normal((1000, 3)) * [1.0, 5.0, 0.1] + [2.0, -1.0, 0.0]
    estimate = stats.streaming_mean(np.split(samples, [1, 7, 300, 301, 999]))
    assert estimate.count == 1000
    np.testing.assert_allclose(estimate.mean, samples.mean(axis=0), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(estimate.standard_error, samples.std(axis=0, ddof=1) / np.sqrt(1000), rtol=1e-12)


def test_t_statistic_and_critical_value_match_scipy():
    from scipy import stats as sps

    d = np.random.default_rng(3).normal(0.3, 1.0, size=(4, 9))
    np.testing.assert_allclose(stats.t_statistic(d, axis=1), sps.ttest_1samp(d, 0.0, axis=1).statistic, rtol=1e-12)
    assert stats.t_critical(9, 0.01) == pytest.approx(sps.t.ppf(0.99, 8), rel=1e-12)
    with pytest.raises(ValueError, match="differences"):
        stats.t_statistic([1.0, 1.0])


def test_mean_and_error_of_known_values():
    # mean 2, squared deviations 1 + 0 + 1 + 4 + 4 = 10 over n − 1 = 4, so s = √(5/2) and s/√n = 1/√2
    mean, error = stats.mean_and_error([1.0, 2.0, 3.0, 0.0, 4.0])
    assert mean == pytest.approx(2.0, rel=1e-15) and error == pytest.approx(1 / np.sqrt(2), rel=1e-14)


def test_mean_and_error_against_a_sum():
    v = np.random.default_rng(3).standard_normal(50)
    mean = sum(v) / len(v)
    error = np.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1) / len(v))
    assert stats.mean_and_error(v) == pytest.approx((mean, error), rel=1e-12)


@pytest.mark.parametrize("bad", [[], [1.0], [np.nan, 1.0], [[1.0, 2.0]]])
def test_mean_and_error_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="values"):
        stats.mean_and_error(bad)


def test_mean_confidence_bound_is_the_t_interval():
    from scipy import stats as sps

    v = np.random.default_rng(4).normal(0.5, 2.0, size=7)
    low, high = sps.t.interval(0.98, 6, loc=v.mean(), scale=sps.sem(v))
    assert stats.mean_confidence_bound(v, 0.01) == pytest.approx(low, rel=1e-12)
    assert stats.mean_confidence_bound(v, 0.01, side="upper") == pytest.approx(high, rel=1e-12)
    assert (stats.mean_confidence_bound(v, 0.01) > 0) == (stats.t_statistic(v) > stats.t_critical(7, 0.01))
    assert stats.mean_confidence_bound([2.0, 2.0, 2.0], 0.01) == 2.0  # finite where the t statistic is not
    with pytest.raises(ValueError, match="values"):
        stats.mean_confidence_bound([1.0], 0.01)
    with pytest.raises(ValueError, match="side"):
        stats.mean_confidence_bound(v, 0.01, side="both")


def test_rank_correlation_is_spearman():
    from scipy import stats as sps

    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(12), rng.standard_normal(12)
    y[3] = y[5]  # a tie
    assert stats.rank_correlation(x, y) == pytest.approx(sps.spearmanr(x, y).statistic, rel=1e-12)
    assert stats.rank_correlation(x, 2 * x + 1) == pytest.approx(1.0)


def test_bootstrap_rank_correlation_brackets_a_clear_trend():
    rng = np.random.default_rng(5)
    trend = np.arange(8.0)[:, None]
    x, y = trend + 0.1 * rng.standard_normal((8, 5)), trend + 0.1 * rng.standard_normal((8, 5))
    rho, lower, upper = stats.bootstrap_rank_correlation(x, y, 500, np.random.default_rng(0), 0.05)
    assert lower <= rho <= upper and lower > 0.9


@pytest.mark.parametrize("count, level", [(1, 0.5), (10, 0.05), (25, 1e-6), (31, 1e-6)])
def test_sign_test_critical_is_the_smallest_significant_count(count, level):
    from scipy.stats import binom

    k = stats.sign_test_critical(count, level)
    assert binom.sf(k - 1, count, 0.5) <= level * (1 + 1e-12)  # P(Bin ≥ k) within the level
    assert k == 0 or binom.sf(k - 2, count, 0.5) > level  # and not for k − 1


def test_sign_test_critical_rejects_unreachable_levels():
    with pytest.raises(ValueError):
        stats.sign_test_critical(5, 1e-3)  # 2⁻⁵ > 10⁻³: even five of five is not significant
