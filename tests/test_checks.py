"""The shared validators: what they accept, what they return, and their one error format."""

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from dropnb import checks


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.int32(2), np.uint8(5)])
def test_integer_accepts_python_and_numpy_integers(value):
    result = checks.integer(value, "width")
    assert result == value and type(result) is int


@pytest.mark.parametrize("value", [0, -1, True, False, 2.0, 1.5, np.float64(3), "3", None, np.array(3), math.nan])
def test_integer_refuses_booleans_floats_and_values_below_the_minimum(value):
    with pytest.raises(ValueError, match=r"^width must be a positive integer, got "):
        checks.integer(value, "width")


def test_integer_error_has_the_one_format():
    with pytest.raises(ValueError) as error:
        checks.integer(0, "width")
    assert str(error.value) == "width must be a positive integer, got 0"


def test_integer_bounds_and_their_wording():
    assert checks.integer(0, "seed", minimum=0) == 0
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer, got -1$"):
        checks.integer(-1, "seed", minimum=0)
    with pytest.raises(ValueError, match=r"^count must be an integer ≥ 2, got 1$"):
        checks.integer(1, "count", minimum=2)
    assert checks.integer(3, "slot", minimum=0, maximum=3) == 3
    with pytest.raises(ValueError, match=r"^slot must be an integer in \[0, 3\], got 4$"):
        checks.integer(4, "slot", minimum=0, maximum=3)
    assert checks.integer(-10**20, "offset", minimum=None) == -10**20


@pytest.mark.parametrize("value", [0.5, 2, np.float32(0.25), np.int64(4), np.array(1.5), torch.tensor(3.0)])
def test_number_accepts_ints_floats_and_single_numbers(value):
    result = checks.positive(value, "lam")
    assert result == float(value) and type(result) is float


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, np.bool_(True), "1", None, [1.0],
                                   np.array([1.0]), np.ones((1, 1)), 1j])
def test_number_refuses_non_finite_values_booleans_strings_and_arrays(value):
    with pytest.raises(ValueError, match=r"^sigma must be a finite number, got "):
        checks.number(value, "sigma")


def test_positive_nonnegative_and_probability():
    assert checks.nonnegative(0, "lam") == 0.0
    with pytest.raises(ValueError, match=r"^lam must be a finite number ≥ 0, got -1e-12$"):
        checks.nonnegative(-1e-12, "lam")
    with pytest.raises(ValueError, match=r"^lam must be a finite number > 0, got 0$"):
        checks.positive(0, "lam")
    assert checks.probability(1, "retain") == 1.0
    for bad in (0, 0.0, 1.0000001, -0.5, math.nan):
        with pytest.raises(ValueError, match=r"^retain must be a number in \(0, 1\], got "):
            checks.probability(bad, "retain")


def test_number_with_both_bounds_open_or_closed():
    assert checks.number(0.0, "p", minimum=0, maximum=1, open_maximum=True) == 0.0
    with pytest.raises(ValueError, match=r"^p must be a number in \[0, 1\), got 1$"):
        checks.number(1, "p", minimum=0, maximum=1, open_maximum=True)
    with pytest.raises(ValueError, match=r"^level must be a finite number ≤ 2, got 3$"):
        checks.number(3, "level", maximum=2)


def test_weights_broadcast_one_number_or_one_per_run():
    one = checks.weights(0.5, "lam", (3,))
    assert one.shape == (3,) and one.dtype == np.float64 and np.all(one == 0.5)
    per_run = checks.weights([0.0, 1.0, 2.0], "mu", (2, 3))
    assert per_run.shape == (2, 3) and np.array_equal(per_run[1], [0.0, 1.0, 2.0])
    assert checks.weights(np.int64(2), "lam", ()).shape == ()


@pytest.mark.parametrize("value", [-1.0, [0.5, -0.5, 1.0], math.nan, [1.0, math.inf, 0.0], True, "1", [1.0, 2.0],
                                   object()])
def test_weights_refuse_negative_non_finite_unbroadcastable_values(value):
    with pytest.raises(ValueError, match=r"^lam must be a finite number ≥ 0 or an array of them broadcastable "
                                         r"to shape \(3,\), got "):
        checks.weights(value, "lam", (3,))


def test_matrix_checks_dimensions_and_finiteness():
    A = checks.matrix([[1, 2], [3, 4]], "M")
    assert A.dtype == np.float64 and A.shape == (2, 2)
    assert checks.matrix([1, 2], "u", ndim=1).shape == (2,)
    assert checks.matrix(np.zeros((4, 2, 3)), "U", batched=True).shape == (4, 2, 3)
    with pytest.raises(ValueError, match=r"^M must be a 2-d array, got shape \(3,\)$"):
        checks.matrix([1, 2, 3], "M")
    with pytest.raises(ValueError, match=r"^U must be a 2-d array or a batch of them, got shape \(3,\)$"):
        checks.matrix([1, 2, 3], "U", batched=True)
    with pytest.raises(ValueError, match=r"^M must be finite, got 2 non-finite entries$"):
        checks.matrix([[1, np.nan], [np.inf, 0]], "M")


def test_symmetric_accepts_roundoff_asymmetry_only():
    S = np.array([[2.0, 1.0], [1.0 + 1e-15, 3.0]])
    assert np.array_equal(checks.symmetric(S, "S"), S)
    with pytest.raises(ValueError, match=r"^S must be a symmetric square matrix"):
        checks.symmetric([[1.0, 2.0], [0.0, 1.0]], "S")
    with pytest.raises(ValueError, match=r"^S must be a symmetric square matrix"):
        checks.symmetric(np.ones((2, 3)), "S")


def test_environment_integer(monkeypatch):
    monkeypatch.delenv("DROPNB_TEST_INTEGER", raising=False)
    assert checks.environment_integer("DROPNB_TEST_INTEGER", 7) == 7
    monkeypatch.setenv("DROPNB_TEST_INTEGER", "")
    assert checks.environment_integer("DROPNB_TEST_INTEGER", 7) == 7
    monkeypatch.setenv("DROPNB_TEST_INTEGER", "12")
    assert checks.environment_integer("DROPNB_TEST_INTEGER", 7) == 12
    monkeypatch.setenv("DROPNB_TEST_INTEGER", "0")
    assert checks.environment_integer("DROPNB_TEST_INTEGER", 7, minimum=0) == 0
    with pytest.raises(ValueError, match=r"^DROPNB_TEST_INTEGER must be a positive integer, got '0'$"):
        checks.environment_integer("DROPNB_TEST_INTEGER", 7)
    for bad in ("-1", "1.5", "x", " 3"):
        monkeypatch.setenv("DROPNB_TEST_INTEGER", bad)
        with pytest.raises(ValueError, match=r"^DROPNB_TEST_INTEGER must be a non-negative integer, got "):
            checks.environment_integer("DROPNB_TEST_INTEGER", 7, minimum=0)


def test_error_builds_the_same_format():
    assert str(checks.error("order", "a power of two", 6)) == "order must be a power of two, got 6"


def test_threads_repeats_the_format_without_numpy():
    """dropnb.book.threads keeps its own integer checks, in the same words, because it runs before numpy
    loads (OpenBLAS sizes its thread pool at import) and so must not import dropnb.checks."""
    from dropnb.book import threads

    messages = []
    for check in (lambda: checks.integer(0, "threads"), lambda: threads.thread_environment(0)):
        with pytest.raises(ValueError) as error:
            check()
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    imported = {alias.name for node in ast.walk(ast.parse(Path(threads.__file__).read_text()))
                if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}
    imported |= {node.module for node in ast.walk(ast.parse(Path(threads.__file__).read_text()))
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"numpy", "checks", "torch", "scipy"}


@pytest.mark.parametrize("value", [[1, 2], np.arange(3), np.float32([1.5]), torch.tensor([1.0, 2.0]),
                                   torch.tensor([[1, 2]]), 3])
def test_real_array_accepts_real_numbers_lists_arrays_and_tensors(value):
    array = checks.real_array(value, "x")
    assert array.dtype == np.float64 and np.array_equal(array, np.asarray(value, dtype=np.float64))


@pytest.mark.parametrize("value", ["abc", b"1", True, None, np.array([1 + 1j]), [1j, 2], np.array([True]),
                                   torch.tensor([True]), torch.tensor([1 + 0j]), [[1, 2], [3]], np.array(["1"]),
                                   np.array([object()])])
def test_real_array_refuses_strings_booleans_complex_objects_and_ragged_lists(value):
    with pytest.raises(ValueError, match=r"^x must be a real array \(integers or floats\), got "):
        checks.real_array(value, "x")


def test_matrix_refuses_complex_and_empty_unless_allowed_and_takes_tensors():
    with pytest.raises(ValueError, match=r"^M must be a real array"):
        checks.matrix(np.ones((2, 2)) * 1j, "M")
    with pytest.raises(ValueError, match=r"^M must have entries, got shape \(2, 0\)$"):
        checks.matrix(np.ones((2, 0)), "M")
    assert checks.matrix(np.ones((2, 0)), "M", empty=True).shape == (2, 0)
    assert checks.matrix(torch.ones(2, 3, requires_grad=True), "M").shape == (2, 3)
    assert checks.vector([1, 2], "s").shape == (2,)
    with pytest.raises(ValueError, match=r"^s must be a 1-d array, got shape \(\)$"):
        checks.vector(np.array(1.0), "s")


def test_tensor_keeps_floating_tensors_and_converts_the_rest():
    W = torch.ones(2, 3, dtype=torch.float32, requires_grad=True)
    assert checks.tensor(W, "W") is W
    converted = checks.tensor(np.ones((2, 3)), "W")
    assert isinstance(converted, torch.Tensor) and converted.dtype == torch.float64
    assert checks.tensor(torch.ones(2, 3, dtype=torch.int64), "W").dtype == torch.float64
    assert checks.tensor(torch.ones(4, 2, 3), "W", batched=True).shape == (4, 2, 3)


@pytest.mark.parametrize("value, match", [
    (torch.tensor([[1.0, float("nan")]]), r"^W must be finite, got 1 non-finite entries$"),
    (torch.tensor([[1.0, float("inf")]]), r"^W must be finite"),
    (torch.ones(2, 2, dtype=torch.complex128), r"^W must be a real array"),
    (torch.ones(2, 2, dtype=torch.bool), r"^W must be a real array"),
    (torch.ones(3), r"^W must be a 2-d array, got shape \(3,\)$"),
    (torch.ones(2, 0), r"^W must have entries"),
    ("W", r"^W must be a real array"),
])
def test_tensor_refuses_non_finite_complex_boolean_misshaped_and_empty(value, match):
    with pytest.raises(ValueError, match=match):
        checks.tensor(value, "W")


def test_tensor_weights_take_a_number_or_a_non_negative_tensor():
    assert checks.tensor_weights(0.5, "lam") == 0.5
    assert torch.equal(checks.tensor_weights(torch.tensor([0.0, 2.0]), "lam"), torch.tensor([0.0, 2.0]))
    for bad in (-1.0, math.nan, True, "1", torch.tensor([1.0, -1.0]), torch.tensor([math.inf]), 1j):
        with pytest.raises(ValueError, match=r"^lam must be "):
            checks.tensor_weights(bad, "lam")


def test_generators_choices_flags_texts_functions_instances_and_shapes():
    rng, generator = np.random.default_rng(0), torch.Generator().manual_seed(0)
    assert checks.generator(rng) is rng and checks.torch_generator(generator) is generator
    for bad in (None, 0, np.random.RandomState(0)):
        with pytest.raises(ValueError, match=r"^rng must be a numpy random Generator"):
            checks.generator(bad)
    with pytest.raises(ValueError, match=r"^generator must be a torch Generator"):
        checks.torch_generator(rng)
    assert checks.choice("keep", "expansion", ("keep", "drop")) == "keep"
    with pytest.raises(ValueError, match=r"^expansion must be one of 'keep', 'drop', got 3$"):
        checks.choice(3, "expansion", ("keep", "drop"))
    assert checks.flag(np.bool_(True), "tied") is True
    with pytest.raises(ValueError, match=r"^tied must be True or False, got 'yes'$"):
        checks.flag("yes", "tied")
    assert checks.text("", "stream", empty=True) == ""
    with pytest.raises(ValueError, match=r"^page must be a non-empty string, got 3$"):
        checks.text(3, "page")
    with pytest.raises(ValueError, match=r"^fun must be a function, got None$"):
        checks.function(None, "fun")
    with pytest.raises(ValueError, match=r"^mask must be a mask, got 'x'$"):
        checks.instance("x", "mask", int, "a mask")
    assert checks.shape(3) == (3,) and checks.shape([2, np.int64(0)]) == (2, 0)
    for bad in (2.5, -1, (2, True), "3", None):
        with pytest.raises(ValueError, match=r"^shape must be "):
            checks.shape(bad)


def test_number_refuses_complex_numpy_and_torch_scalars_and_may_allow_non_finite():
    for bad in (np.complex128(1), torch.tensor(1j), torch.tensor(True), np.array(1 + 0j)):
        with pytest.raises(ValueError, match=r"^x must be a finite number, got "):
            checks.number(bad, "x")
    assert math.isnan(checks.number(math.nan, "x", finite=False))
    assert checks.number(-math.inf, "x", finite=False) == -math.inf
    with pytest.raises(ValueError, match=r"^x must be a real number, got '1'$"):
        checks.number("1", "x", finite=False)


def test_weights_without_a_batch_shape_keep_their_own():
    assert checks.weights([[0.5], [1.0]], "lam").shape == (2, 1)
    with pytest.raises(ValueError, match=r"^lam must be a finite number ≥ 0 or an array of them, got "):
        checks.weights([1.0, -1.0], "lam")


def test_per_run_broadcasts_a_number_and_checks_every_value():
    np.testing.assert_array_equal(checks.per_run(0.5, "retain", 3, checks.probability), [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(checks.per_run(torch.tensor([1.0, 0.2], dtype=torch.float64), "retain", 2, checks.probability), [1.0, 0.2])
    with pytest.raises(ValueError, match="retain"):
        checks.per_run([0.5, 1.5], "retain", 2, checks.probability)
    with pytest.raises(ValueError, match="one per run \\(3\\)"):
        checks.per_run([0.5, 0.5], "retain", 3, checks.probability)
    assert checks.whole(3.0, "steps") == 3
    with pytest.raises(ValueError, match="steps"):
        checks.whole(2.5, "steps")


def test_same_batch_and_same_dtype_compare_shapes_and_dtypes_only():
    U, V = torch.zeros(2, 3, 4, dtype=torch.float64), torch.zeros(2, 5, 4, dtype=torch.float64)
    assert checks.same_batch(dict(U=U, V=V, S=None)) == (2,)
    assert checks.same_batch(dict(U=U, V=V), dims=0) == ()
    assert checks.same_batch({}) == () and checks.same_dtype({}) is None
    assert checks.same_dtype(dict(U=U, V=V, S=None)) == torch.float64
    with pytest.raises(ValueError, match=r"^V must have the batch size 2 of U, got shape \(3, 5, 4\)$"):
        checks.same_batch(dict(U=U, V=torch.zeros(3, 5, 4)))
    with pytest.raises(ValueError, match=r"^V must have the batch size \(2, 3\) of U, got shape \(2, 5, 4\)$"):
        checks.same_batch(dict(U=U, V=V), dims=2)
    with pytest.raises(ValueError, match=r"^V must have the dtype torch.float64 of U, got torch.float32$"):
        checks.same_dtype(dict(U=U, V=V.float()))
    # No data is read: tensors on the meta device (no storage) are compared as well.
    meta = torch.empty(2, 3, 4, dtype=torch.float64, device="meta")
    with pytest.raises(ValueError, match=r"^M must be on the device cpu of U, got meta$"):
        checks.same_dtype(dict(U=U, M=meta))
    assert checks.same_batch(dict(M=meta, U=U)) == (2,)
