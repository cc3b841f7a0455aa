"""The offline data sets: pinned files, counts, the licence notice, and clear errors when absent."""

import hashlib

import numpy as np
import pytest

from dropnb import datasets


def test_movielens_is_ml_100k_with_its_terms_printed(capsys):
    ratings = datasets.movielens_100k()
    assert (len(ratings.values), ratings.n_rows, ratings.n_cols) == (100_000, 943, 1682)
    assert np.bincount(ratings.values.astype(int))[1:].tolist() == [6110, 11370, 27145, 34174, 21201]
    assert ratings.rows.min() == 0 and ratings.cols.max() == 1681
    printed = capsys.readouterr().out
    assert "Harper" in printed and "no redistribution" in printed


def test_mnist_5k_has_500_images_per_digit(capsys):
    pixels, labels = datasets.mnist_5k(verbose=False)
    assert pixels.shape == (5000, 784) and np.bincount(labels).tolist() == [500] * 10
    assert pixels.min() == 0 and pixels.max() == 255
    assert capsys.readouterr().out == ""


def test_a_missing_package_names_itself_and_the_install_step():
    with pytest.raises(datasets.DataUnavailable, match="no_such_data_wheel.*requirements-data.txt"):
        datasets.package_file("no_such_data_wheel", "data.csv", "0" * 64)


def test_a_file_that_differs_from_its_pin_is_refused():
    path = datasets.package_file("dropnb", "datasets.py", hashlib.sha256(open(datasets.__file__, "rb").read()).hexdigest())
    assert path.name == "datasets.py"
    with pytest.raises(datasets.DataUnavailable, match="SHA-256"):
        datasets.package_file("dropnb", "datasets.py", "0" * 64)
    with pytest.raises(datasets.DataUnavailable, match="no file"):
        datasets.package_file("dropnb", "no_such_file.csv", "0" * 64)


def test_random_split_is_a_partition_of_the_stated_sizes():
    parts = datasets.random_split(1000, (0.8, 0.1, 0.1), np.random.default_rng(0))
    assert [len(p) for p in parts] == [800, 100, 100]
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(1000))
    parts = datasets.random_split(10, (0.3,), np.random.default_rng(0))
    assert [len(p) for p in parts] == [3, 7]
    with pytest.raises(ValueError, match="fractions"):
        datasets.random_split(10, (0.8, 0.3), np.random.default_rng(0))
