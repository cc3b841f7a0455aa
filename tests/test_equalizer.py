"""Equalizers (Algorithm 2, the Hadamard construction) and equalized factorizations (Theorem 3.3)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dropnb import equalizer
from dropnb.rounding import roundoff_tolerance


def assert_equalizes(U, Q):
    r = U.shape[1]
    tolerance = roundoff_tolerance(10 * r * r + U.shape[0])
    np.testing.assert_allclose(Q.T @ Q, np.eye(r), rtol=0, atol=tolerance)
    norms = np.sum((U @ Q) ** 2, axis=0)
    scale = max(np.linalg.norm(U, 2) ** 2, 1e-300)
    assert np.abs(norms - np.sum(U**2) / r).max() <= tolerance * scale


@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 9), r=st.integers(1, 9), seed=st.integers(0, 2**32 - 1), spread=st.floats(0, 4),
       centered=st.booleans())
def test_equalizer_equalizes_any_matrix(d, r, seed, spread, centered):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((d, r)) * np.exp(spread * rng.standard_normal(r))
    assert_equalizes(U, equalizer.equalizer(U, centered=centered))


@pytest.mark.parametrize("U", [np.zeros((3, 4)), np.ones((2, 5)), np.eye(4)[:, :3] * [3.0, 3.0, 1.0],
                               np.outer(np.arange(1.0, 6.0), np.ones(4))])
def test_equalizer_on_degenerate_inputs(U):
    assert_equalizes(U, equalizer.equalizer(U))


def test_equalizer_of_single_column_is_identity():
    np.testing.assert_array_equal(equalizer.equalizer(np.ones((3, 1))), np.eye(1))


def test_equalizer_keeps_the_map():
    rng = np.random.default_rng(1)
    U = rng.standard_normal((6, 4))
    Q = equalizer.equalizer(U)
    np.testing.assert_allclose((U @ Q) @ (U @ Q).T, U @ U.T, atol=1e-13)


@pytest.mark.parametrize("order", [1, 2, 4, 8, 32])
def test_hadamard_is_a_hadamard_matrix(order):
    H = equalizer.hadamard(order)
    assert set(np.unique(H)) <= {-1.0, 1.0}
    np.testing.assert_array_equal(H @ H.T, order * np.eye(order))


@pytest.mark.parametrize("order", [0, 3, 6, -4, 2.0, True])
def test_hadamard_rejects_orders_that_are_not_powers_of_two(order):
    with pytest.raises(ValueError, match="order"):
        equalizer.hadamard(order)


@pytest.mark.parametrize("d, r", [(5, 4), (2, 8), (16, 16), (3, 1)])
def test_universal_equalizer(d, r):
    U = np.random.default_rng(d * r).standard_normal((d, r))
    assert_equalizes(U, equalizer.universal_equalizer(U))


def test_universal_equalizer_needs_power_of_two_width():
    with pytest.raises(ValueError, match="power-of-two"):
        equalizer.universal_equalizer(np.ones((3, 3)))


def test_importance_scores_batched():
    rng = np.random.default_rng(2)
    U, V = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 6, 5))
    scores = equalizer.importance_scores(U, V)
    assert scores.shape == (3, 5)
    assert scores[1, 2] == pytest.approx(np.linalg.norm(U[1, :, 2]) * np.linalg.norm(V[1, :, 2]))


def test_importance_scores_shape_mismatch():
    with pytest.raises(ValueError, match="U and V"):
        equalizer.importance_scores(np.ones((4, 3)), np.ones((4, 2)))


@settings(max_examples=40, deadline=None)
@given(d1=st.integers(1, 7), d2=st.integers(1, 7), rank=st.integers(0, 4), extra=st.integers(0, 4),
       seed=st.integers(0, 2**32 - 1))
def test_equalized_factors(d1, d2, rank, extra, seed):
    rng = np.random.default_rng(seed)
    rank = min(rank, d1, d2)
    P = rng.standard_normal((d1, rank)) @ rng.standard_normal((rank, d2))
    width = max(rank, 1) + extra
    U, V = equalizer.equalized_factors(P, width)
    assert U.shape == (d1, width) and V.shape == (d2, width)
    scale = max(1.0, np.abs(P).max())
    np.testing.assert_allclose(U @ V.T, P, rtol=0, atol=1e-12 * scale * width)
    nuclear = np.linalg.svd(P, compute_uv=False).sum()
    for factor in (U, V):
        np.testing.assert_allclose(np.sum(factor**2, axis=0), nuclear / width, rtol=0, atol=1e-12 * scale * width)


def test_equalized_factors_reject_rank_above_width():
    with pytest.raises(ValueError, match="rank"):
        equalizer.equalized_factors(np.eye(3), 2)


@pytest.mark.parametrize("width", [0, -1, 1.5, True])
def test_equalized_factors_reject_bad_width(width):
    with pytest.raises(ValueError, match="width"):
        equalizer.equalized_factors(np.eye(2), width)


def test_equalize_network_keeps_map_and_lowers_regularizer():
    rng = np.random.default_rng(3)
    U, V = rng.standard_normal((5, 4)) * [3, 1, 0.2, 1], rng.standard_normal((6, 4))
    U_eq, V_eq = equalizer.equalize_network(U, V)
    np.testing.assert_allclose(U_eq @ V_eq.T, U @ V.T, atol=1e-12)
    assert np.sum(equalizer.importance_scores(U_eq, V_eq) ** 2) <= np.sum(equalizer.importance_scores(U, V) ** 2)


@pytest.mark.parametrize("bad", [np.ones(3), np.ones((2, 2, 2)), np.array([[np.nan, 1.0]])])
def test_equalizer_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="U"):
        equalizer.equalizer(bad)
