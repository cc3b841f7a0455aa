"""Synthetic data: Haar matrices and targets with a prescribed spectrum."""

import numpy as np
import pytest

from dropnb import data


def test_haar_orthogonal_is_orthogonal_and_seeded():
    Q = data.haar_orthogonal(7, np.random.default_rng(0))
    np.testing.assert_allclose(Q.T @ Q, np.eye(7), atol=1e-14)
    np.testing.assert_array_equal(Q, data.haar_orthogonal(7, np.random.default_rng(0)))


def test_haar_orthogonal_first_entry_is_symmetric():
    """Under Haar measure Q₁₁ is symmetric about 0 (the sign fix matters: without it QR biases it)."""
    rng = np.random.default_rng(1)
    entries = np.array([data.haar_orthogonal(3, rng)[0, 0] for _ in range(4000)])
    assert abs(entries.mean()) < 5 * entries.std() / np.sqrt(len(entries))


def test_matrix_with_spectrum():
    s = np.array([3.0, 2.0, 0.5])
    M = data.matrix_with_spectrum(s, (5, 4), np.random.default_rng(2))
    assert M.shape == (5, 4)
    np.testing.assert_allclose(np.linalg.svd(M, compute_uv=False), [3.0, 2.0, 0.5, 0.0], atol=1e-14)


@pytest.mark.parametrize("spectrum, shape, match", [([1.0, 2.0, 3.0], (2, 4), "spectrum"), ([-1.0], (2, 2), "spectrum"),
                                                    ([np.nan], (2, 2), "spectrum")])
def test_matrix_with_spectrum_bad_input(spectrum, shape, match):
    with pytest.raises(ValueError, match=match):
        data.matrix_with_spectrum(spectrum, shape, np.random.default_rng(0))


@pytest.mark.parametrize("n", [0, -2, 1.5, True])
def test_haar_orthogonal_bad_size(n):
    with pytest.raises(ValueError, match="n"):
        data.haar_orthogonal(n, np.random.default_rng(0))


@pytest.mark.parametrize("d2, n", [(3, 8), (6, 4)])  # full row rank, and more inputs than samples
def test_population_form_reproduces_the_data_loss(d2, n):
    rng = np.random.default_rng(d2)
    X, Y = rng.standard_normal((d2, n)), rng.standard_normal((2, n))
    M, S, constant = data.population_form(X, Y)
    for _ in range(3):
        W = rng.standard_normal((2, d2))
        loss = np.sum((Y - W @ X) ** 2)
        assert np.trace((M - W) @ S @ (M - W).T) + constant == pytest.approx(loss, rel=1e-12)
    assert (constant > 1e-6) == (d2 < n)  # only a full-column-rank X fits every target


@pytest.mark.parametrize("X, Y, match", [(np.ones((2, 3)), np.ones((2, 4)), "same N"),
                                         (np.ones(3), np.ones((2, 3)), "same N"),
                                         (np.full((2, 3), np.nan), np.ones((2, 3)), "finite")])
def test_population_form_bad_input(X, Y, match):
    with pytest.raises(ValueError, match=match):
        data.population_form(X, Y)


def test_haar_orthogonal_moves_the_signs_of_r_into_q():
    """Q is the QR factor of the generator's first Gaussian draw G whose triangle Qᵀ G has a positive
    diagonal (the documented construction; the other sign gives −Q, Haar as well, another instance)."""
    G = np.random.default_rng(5).standard_normal((6, 6))
    R = data.haar_orthogonal(6, np.random.default_rng(5)).T @ G
    np.testing.assert_allclose(np.tril(R, -1), 0.0, atol=1e-12)
    assert np.all(np.diag(R) > 0)
