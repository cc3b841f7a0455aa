"""Run configuration: profiles, seeds and random streams, threads, the book's top folder."""

import os

import numpy as np
import pytest
import torch

from dropnb.book import config, threads
from dropnb.book.config import Config, configure_threads, resolve_profile, resolve_seed, stream_seed

CPU = torch.device("cpu")


@pytest.fixture
def no_profile_variable(monkeypatch):
    monkeypatch.delenv(config.PROFILE_VARIABLE, raising=False)


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# --- profiles -------------------------------------------------------------------------------------


def test_profile_defaults_to_book(no_profile_variable):
    assert resolve_profile() == "book"


def test_profile_from_environment(monkeypatch):
    monkeypatch.setenv(config.PROFILE_VARIABLE, "quick")
    assert resolve_profile() == "quick"


def test_argument_overrides_environment(monkeypatch):
    monkeypatch.setenv(config.PROFILE_VARIABLE, "quick")
    assert resolve_profile("full") == "full"


def test_empty_environment_variable_means_default(monkeypatch):
    monkeypatch.setenv(config.PROFILE_VARIABLE, "")
    assert resolve_profile() == "book"


@pytest.mark.parametrize("profile", ["quick", "book", "full"])
def test_every_profile_resolves_to_itself(no_profile_variable, profile):
    assert resolve_profile(profile) == profile


@pytest.mark.parametrize("profile", ["fast", "", "Book"])
def test_unknown_profile_argument_raises(no_profile_variable, profile):
    with pytest.raises(ValueError, match="^profile must"):
        resolve_profile(profile)


def test_unknown_profile_in_environment_raises(monkeypatch):
    monkeypatch.setenv(config.PROFILE_VARIABLE, "bogus")
    with pytest.raises(ValueError, match="^profile must"):
        resolve_profile()


@pytest.mark.parametrize("profile, expected", [("quick", 1), ("book", 2), ("full", 3)])
def test_pick_returns_the_value_of_the_profile(profile, expected):
    assert Config(profile=profile, seed=0, device=CPU).pick(quick=1, book=2, full=3) == expected


# --- seeds and streams ----------------------------------------------------------------------------


def test_config_rejects_unknown_profile():
    with pytest.raises(ValueError, match="^profile must"):
        Config(profile="fast", seed=0, device=CPU)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None])
def test_bad_seed_raises(seed):
    with pytest.raises(ValueError, match="^seed must"):
        Config(profile="book", seed=seed, device=CPU)


@pytest.fixture
def no_seed_variable(monkeypatch):
    monkeypatch.delenv(config.SEED_VARIABLE, raising=False)


def test_seed_defaults_to_the_chapter_seed(no_seed_variable):
    assert resolve_seed(None, 2018) == 2018


@pytest.mark.parametrize("value, expected", [("3", 3), ("", 2018)])
def test_seed_from_environment(monkeypatch, value, expected):
    monkeypatch.setenv(config.SEED_VARIABLE, value)
    assert resolve_seed(None, 2018) == expected


def test_seed_argument_overrides_environment(monkeypatch):
    monkeypatch.setenv(config.SEED_VARIABLE, "3")
    assert resolve_seed(5, 2018) == 5


@pytest.mark.parametrize("value", ["-1", "1.5", "seven"])
def test_bad_seed_in_environment_raises(monkeypatch, value):
    monkeypatch.setenv(config.SEED_VARIABLE, value)
    with pytest.raises(ValueError, match=config.SEED_VARIABLE):
        resolve_seed(None, 2018)


def test_bad_seed_argument_raises(no_seed_variable):
    with pytest.raises(ValueError, match="^seed must"):
        resolve_seed(-2, 2018)


def test_stream_seed_rejects_negative_seed():
    with pytest.raises(ValueError, match="^seed must"):
        stream_seed(-3, "data")


def test_rng_same_stream_same_numbers():
    first = Config(profile="quick", seed=5, device=CPU).rng("data").standard_normal(10)
    second = Config(profile="quick", seed=5, device=CPU).rng("data").standard_normal(10)
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("seed, stream", [(5, "masks"), (6, "data")])
def test_rng_different_stream_or_seed_different_numbers(seed, stream):
    reference = Config(profile="quick", seed=5, device=CPU).rng("data").standard_normal(10)
    other = Config(profile="quick", seed=seed, device=CPU).rng(stream).standard_normal(10)
    assert not np.any(reference == other)


def test_rng_does_not_depend_on_profile():
    quick = Config(profile="quick", seed=1, device=CPU).rng("data").random(5)
    full = Config(profile="full", seed=1, device=CPU).rng("data").random(5)
    np.testing.assert_array_equal(quick, full)


def test_torch_generator_reproducible():
    cfg = Config(profile="quick", seed=2, device=CPU)
    first = torch.randn(10, generator=cfg.torch_generator("init"))
    second = torch.randn(10, generator=cfg.torch_generator("init"))
    assert torch.equal(first, second)


def test_torch_generator_streams_differ():
    cfg = Config(profile="quick", seed=2, device=CPU)
    first = torch.randn(10, generator=cfg.torch_generator("init"))
    second = torch.randn(10, generator=cfg.torch_generator("train"))
    assert not torch.any(first == second)


def test_torch_generator_is_on_the_config_device():
    assert Config(profile="quick", seed=0, device=CPU).torch_generator("x").device == CPU


def test_describe_names_profile_and_seed():
    line = Config(profile="full", seed=17, device=CPU).describe()
    assert "profile full" in line and "seed 17" in line and "cpu" in line


# --- threads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["zero", "0", "-2", "1.5", ""])
def test_bad_threads_variable_raises(monkeypatch, value):
    monkeypatch.setenv(threads.THREADS_VARIABLE, value)
    with pytest.raises(ValueError, match=threads.THREADS_VARIABLE):
        configure_threads()


def test_threads_variable_sets_torch_threads(monkeypatch, restore_threads):
    monkeypatch.setenv(threads.THREADS_VARIABLE, "2")
    assert configure_threads() == 2
    assert torch.get_num_threads() == 2


def test_threads_default_to_one_in_every_loaded_library(monkeypatch, restore_threads):
    from threadpoolctl import threadpool_info

    monkeypatch.delenv(threads.THREADS_VARIABLE, raising=False)
    assert configure_threads() == 1
    assert torch.get_num_threads() == 1
    assert {pool["num_threads"] for pool in threadpool_info()} == {1}


def test_thread_environment_names_every_library():
    env = threads.thread_environment(3)
    assert env[threads.THREADS_VARIABLE] == env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "3"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.parametrize("count", [0, -1, 1.5, True, "2"])
def test_thread_environment_rejects_bad_counts(count):
    with pytest.raises(ValueError, match="^threads must"):
        threads.thread_environment(count)


def test_thread_defaults_keep_settings_already_made(monkeypatch):
    monkeypatch.setenv(threads.THREADS_VARIABLE, "2")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    threads.set_defaults()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4" and os.environ["OMP_NUM_THREADS"] == "2"
