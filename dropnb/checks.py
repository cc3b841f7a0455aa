"""Argument validators shared by every module, with one error format.

Each validator returns the value in its working type (``int``, ``float``, a float64 array or a
torch tensor) or raises ``ValueError("<name> must be <requirement>, got <value>")``, naming the
argument and what the caller requires of it, e.g. ``width must be a positive integer, got 0``.
Booleans are never numbers here, numpy integers and floats are; complex numbers, strings and
object arrays are never real arrays; arrays must be finite and have entries (unless ``empty``);
numpy arrays, lists and torch tensors are all accepted where a function takes an array
(:func:`matrix` gives numpy, :func:`tensor` keeps torch). Beside numbers and arrays there are
validators for random generators, choices among strings, flags, texts, functions, instances and
batch shapes, and for torch arguments that must agree in batch size, dtype and device
(:func:`same_batch`, :func:`same_dtype`). Model-specific checks of shapes (``linear.check_network``,
``deep.check_layers``, …) stay in their modules and are built on these. A public function validates at
entry, once; a training loop calls unvalidated cores (``_batched_objective`` and the like) at every step.

:mod:`dropnb.book.threads` repeats the integer check without numpy: it must run before numpy loads.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Callable

import numpy as np


def error(name: str, requirement: str, value) -> ValueError:
    """The error "<name> must be <requirement>, got <value!r>", for checks beyond those here."""
    return ValueError(f"{name} must be {requirement}, got {value!r}")


def _is_tensor(value) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch: only loaded modules count)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _shown(value) -> str:
    """A short description of an array-like value for an error message."""
    if _is_tensor(value) or isinstance(value, np.ndarray):
        return f"{type(value).__name__} of dtype {value.dtype} and shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def real_array(value, name: str) -> np.ndarray:
    """``value`` as a float64 numpy array: numbers, nested lists, numpy arrays and torch tensors
    (detached, moved to the CPU) of integers or reals. Strings, booleans, complex numbers, objects
    and ragged lists are refused (``<name> must be a real array, got …``); nothing else is checked."""
    requirement = "a real array (integers or floats)"
    if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
        raise error(name, requirement, value)
    if _is_tensor(value):
        if value.is_complex() or value.dtype == sys.modules["torch"].bool:
            raise ValueError(f"{name} must be {requirement}, got {_shown(value)}")
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise error(name, requirement, value) from None
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be {requirement}, got {_shown(value)}")
    return array.astype(np.float64, copy=False)


def _bounds(minimum, maximum, open_minimum: bool, open_maximum: bool) -> str:
    if minimum is not None and maximum is not None:
        return f" in {'(' if open_minimum else '['}{minimum:g}, {maximum:g}{')' if open_maximum else ']'}"
    if minimum is not None:
        return f" {'>' if open_minimum else '≥'} {minimum:g}"
    if maximum is not None:
        return f" {'<' if open_maximum else '≤'} {maximum:g}"
    return ""


def _integer_requirement(minimum: int | None, maximum: int | None) -> str:
    if maximum is None and minimum in (0, 1):
        return "a positive integer" if minimum else "a non-negative integer"
    return "an integer" + _bounds(minimum, maximum, False, False)


def integer(value, name: str, minimum: int | None = 1, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum] (a bound None: unbounded on that side); numpy
    integers are accepted, booleans and floats (even whole ones) refused."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise error(name, _integer_requirement(minimum, maximum), value)
    return int(value)


def number(value, name: str, *, minimum: float | None = None, maximum: float | None = None,
           open_minimum: bool = False, open_maximum: bool = False, finite: bool = True) -> float:
    """``value`` as a finite float within the bounds (open or closed; None: unbounded). Anything
    ``float`` takes that is a single number is accepted (ints, numpy scalars, 0-d arrays);
    booleans, strings, complex numbers and arrays with entries are refused. With ``finite=False``
    (and no bounds) NaN and ±∞ are accepted too: any real number."""
    requirement = ("a number" if minimum is not None and maximum is not None
                   else "a finite number" if finite else "a real number") \
        + _bounds(minimum, maximum, open_minimum, open_maximum)
    converted = None
    if _single_real(value):
        try:
            converted = float(value)
        except (TypeError, ValueError, OverflowError):  # an int beyond the float range
            pass
    if converted is None or (finite and not math.isfinite(converted)) \
            or (minimum is not None and (converted <= minimum if open_minimum else converted < minimum)) \
            or (maximum is not None and (converted >= maximum if open_maximum else converted > maximum)):
        raise error(name, requirement, value)
    return converted


def _single_real(value) -> bool:
    """Whether ``value`` may be one real number: not a boolean, string or complex number, and
    without dimensions (numpy and torch scalars and 0-d arrays of integers or reals count)."""
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
        return False
    if _is_tensor(value):
        return value.ndim == 0 and (value.is_floating_point() or not (value.is_complex() or value.dtype
                                                                      == sys.modules["torch"].bool))
    dtype = getattr(value, "dtype", None)
    return (dtype is None or np.dtype(dtype).kind in "iuf") and getattr(value, "ndim", 0) == 0


def positive(value, name: str) -> float:
    """A finite number > 0, as a float."""
    return number(value, name, minimum=0, open_minimum=True)


def nonnegative(value, name: str) -> float:
    """A finite number ≥ 0, as a float."""
    return number(value, name, minimum=0)


def probability(value, name: str) -> float:
    """A probability in (0, 1] (such as a retain probability θ), as a float."""
    return number(value, name, minimum=0, maximum=1, open_minimum=True)


def distribution(value, name: str, *, positive: bool = False) -> np.ndarray:
    """A probability vector: a finite 1-d array of non-negative (``positive``: positive) entries that
    sum to 1 within 10⁻¹² (rounding of a normalised vector), as float64."""
    p = vector(value, name)
    if np.any(p <= 0 if positive else p < 0) or abs(p.sum() - 1) > 1e-12:
        raise error(name, f"{'positive' if positive else 'non-negative'} entries that sum to 1", p)
    return p


def per_run(value, name: str, runs: int, check: Callable = number) -> np.ndarray:
    """One value per run of a batch of R = ``runs``: a number (the same for every run) or an array or
    tensor of shape (R,); every value passes ``check(value, name)`` (e.g. :func:`positive`,
    :func:`probability`). Returned as a float64 array of shape (R,)."""
    runs, check = integer(runs, "runs"), function(check, "check")
    if np.ndim(value) == 0:
        array = np.full(runs, check(value, name), dtype=np.float64)
    else:
        array = matrix(value, name, ndim=1)
        if array.shape != (runs,):
            raise ValueError(f"{name} must be one number or one per run ({runs}), got shape {array.shape}")
        for entry in array:
            check(entry, name)
    return np.array(array, dtype=np.float64)


def whole(value, name: str) -> int:
    """A positive whole number, which may be given as a float (3.0), as an int."""
    if number(value, name) != round(float(value)) or float(value) < 1:
        raise error(name, "a positive whole number", value)
    return int(round(float(value)))


def run_widths(widths, runs: int, largest: int) -> np.ndarray:
    """The width of each of R = ``runs`` runs that share factors of ``largest`` columns: one whole
    number or one per run, each at most ``largest``, as an int64 array of shape (R,)."""
    largest = integer(largest, "largest")
    widths = per_run(widths, "widths", runs, whole)
    if np.any(widths > largest):
        raise ValueError(f"widths must be at most the {largest} columns of the factors, got {widths.max():g}")
    return widths.astype(np.int64)


def weights(value, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Non-negative weights (λ, μ) of a batch of problems: one finite number ≥ 0 for all, or an array
    of them broadcastable to the batch ``shape`` (one per run); returned broadcast to ``shape``
    (a read-only float64 view). Without ``shape``, any shape is accepted and kept."""
    requirement = "a finite number ≥ 0 or an array of them" + (
        "" if shape is None else f" broadcastable to shape {tuple(shape)}")
    try:
        array = real_array(value, name)
        shape = array.shape if shape is None else shape
        if not (np.all(np.isfinite(array)) and np.all(array >= 0)):
            raise ValueError
        return np.broadcast_to(array, shape)
    except (TypeError, ValueError):
        raise error(name, requirement, value) from None


def matrix(value, name: str, ndim: int = 2, *, batched: bool = False, empty: bool = False) -> np.ndarray:
    """``value`` as a finite float64 array with ``ndim`` dimensions (at least ``ndim`` if
    ``batched``: leading batch dimensions allowed), from a real array, list or torch tensor
    (:func:`real_array`); without entries only if ``empty``."""
    array = real_array(value, name)
    _check_shape(array.shape, array.ndim, array.size, name, ndim, batched, empty)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {np.size(array) - np.count_nonzero(np.isfinite(array))} "
                         f"non-finite entries")
    return array


def vector(value, name: str, *, empty: bool = False) -> np.ndarray:
    """``value`` as a finite float64 1-d array (:func:`matrix` with ``ndim=1``)."""
    return matrix(value, name, ndim=1, empty=empty)


def _check_shape(shape, dims: int, size: int, name: str, ndim: int, batched: bool, empty: bool) -> None:
    if dims < ndim if batched else dims != ndim:
        what = f"a {ndim}-d array" + (" or a batch of them" if batched else "")
        raise ValueError(f"{name} must be {what}, got shape {tuple(shape)}")
    if size == 0 and not empty:
        raise ValueError(f"{name} must have entries, got shape {tuple(shape)}")


def tensor(value, name: str, ndim: int = 2, *, batched: bool = False, empty: bool = False):
    """``value`` as a finite real torch tensor with ``ndim`` dimensions (at least ``ndim`` if
    ``batched``). A floating tensor is returned as it is (same dtype, device and autograd graph);
    integer tensors, numpy arrays and lists become float64 tensors. Complex or boolean tensors,
    strings and objects are refused. One check for the whole tensor (one synchronization on a
    GPU): validate at the entry of a loop, not at every step."""
    import torch

    if not _is_tensor(value):
        value = torch.as_tensor(real_array(value, name))
    elif value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{name} must be a real array (integers or floats), got {_shown(value)}")
    elif not value.is_floating_point():
        value = value.to(torch.float64)
    _check_shape(value.shape, value.ndim, value.numel(), name, ndim, batched, empty)
    if not bool(torch.isfinite(value.detach()).all()):
        raise ValueError(f"{name} must be finite, got {int((~torch.isfinite(value.detach())).sum())} "
                         f"non-finite entries")
    return value


def tensor_weights(value, name: str):
    """A non-negative weight (λ) of batched torch functions: a finite number ≥ 0 (returned as a
    float) or a finite non-negative real tensor of any shape (returned as :func:`tensor` does)."""
    if not (_is_tensor(value) or isinstance(value, (list, tuple)) or getattr(value, "ndim", 0) > 0):
        return nonnegative(value, name)
    array = tensor(value, name, ndim=0, batched=True, empty=True)
    if not bool((array.detach() >= 0).all()):
        raise ValueError(f"{name} must be non-negative, got {_shown(value)}")
    return array


def same_batch(tensors: dict, dims: int = 1) -> tuple[int, ...]:
    """The leading ``dims`` batch sizes shared by the named ``tensors`` (None entries are skipped);
    raises ``ValueError("<name> must have the batch size <R> of <first>, got shape …")`` when one
    differs. Shapes only: no data is read (no synchronization on a GPU)."""
    named = [(name, value) for name, value in tensors.items() if value is not None]
    if not named:
        return ()
    first, reference = named[0]
    batch = tuple(reference.shape[:dims])
    for name, value in named[1:]:
        if tuple(value.shape[:dims]) != batch:
            raise ValueError(f"{name} must have the batch size {batch if dims > 1 else batch[0]} of {first}, "
                             f"got shape {tuple(value.shape)}")
    return batch


def same_dtype(tensors: dict):
    """The dtype shared by the named torch ``tensors`` (None entries are skipped), which must also
    share a device; raises ``ValueError("<name> must have the dtype <dtype> of <first>, got …")`` (or
    the device) when one differs. Dtypes and devices only: no data is read."""
    named = [(name, value) for name, value in tensors.items() if value is not None]
    if not named:
        return None
    first, reference = named[0]
    for name, value in named[1:]:
        if value.dtype != reference.dtype:
            raise ValueError(f"{name} must have the dtype {reference.dtype} of {first}, got {value.dtype}")
        if value.device != reference.device:
            raise ValueError(f"{name} must be on the device {reference.device} of {first}, got {value.device}")
    return reference.dtype


def float_dtype(value, device):
    """A torch float dtype for computing on ``device``: float32 or float64 as given, or for ``None``
    float64 on a CPU and float32 on a GPU."""
    import torch

    if not isinstance(device, (str, torch.device)):
        raise error("device", "a torch.device or its name", device)
    if value is None:
        return torch.float64 if torch.device(device).type == "cpu" else torch.float32
    if value not in (torch.float32, torch.float64):
        raise error("dtype", "torch.float32, torch.float64 or None", value)
    return value


def generator(value, name: str = "rng") -> np.random.Generator:
    """A numpy random Generator (``np.random.default_rng(seed)``), returned as it is."""
    if not isinstance(value, np.random.Generator):
        raise error(name, "a numpy random Generator (np.random.default_rng(seed))", value)
    return value


def torch_generator(value, name: str = "generator"):
    """A torch random Generator (``torch.Generator(device).manual_seed(seed)``), returned as it is."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Generator):
        raise error(name, "a torch Generator (torch.Generator(device).manual_seed(seed))", value)
    return value


def choice(value, name: str, options) -> str:
    """One of the strings ``options``."""
    if not isinstance(value, str) or value not in options:
        raise error(name, "one of " + ", ".join(repr(o) for o in options), value)
    return value


def flag(value, name: str) -> bool:
    """A boolean (True or False; numpy booleans too), as a bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(name, "True or False", value)
    return bool(value)


def text(value, name: str, *, empty: bool = False) -> str:
    """A string (non-empty unless ``empty``)."""
    if not isinstance(value, str) or not (value or empty):
        raise error(name, "a string" if empty else "a non-empty string", value)
    return value


def function(value, name: str) -> Callable:
    """A callable, returned as it is."""
    if not callable(value):
        raise error(name, "a function", value)
    return value


def instance(value, name: str, kind: type | tuple[type, ...], what: str):
    """An instance of ``kind`` (``what`` describes it in the error), returned as it is."""
    if not isinstance(kind, (type, tuple)):
        raise error("kind", "a type or a tuple of types", kind)
    if not isinstance(value, kind):
        raise error(name, what, value)
    return value


def shape(value, name: str = "shape", minimum: int = 0) -> tuple[int, ...]:
    """A batch shape: one integer ≥ ``minimum`` or a tuple or list of them, as a tuple."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return (integer(value, name, minimum=minimum),)
    if not isinstance(value, (tuple, list)):
        raise error(name, "an integer or a tuple of integers", value)
    return tuple(integer(n, name, minimum=minimum) for n in value)


def symmetric(value, name: str) -> np.ndarray:
    """``value`` as a finite, square, symmetric float64 matrix (‖A − Aᵀ‖_F ≤ 10⁻¹²‖A‖_F)."""
    A = matrix(value, name)
    if A.shape[0] != A.shape[1] or np.linalg.norm(A - A.T) > 1e-12 * np.linalg.norm(A):
        raise ValueError(f"{name} must be a symmetric square matrix, got shape {A.shape}")
    return A


def environment_integer(variable: str, default: int, minimum: int = 1) -> int:
    """The integer in the environment variable ``variable`` (digits only, at least ``minimum``);
    ``default`` when it is unset or empty."""
    value = os.environ.get(text(variable, "variable")) or ""
    if not value:
        return default
    if not value.isdigit() or int(value) < minimum:
        raise error(variable, _integer_requirement(minimum, None), value)
    return int(value)
