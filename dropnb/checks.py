"""Argument validators shared by every module, with one error format.

Each validator returns the value in its working type (``int``, ``float`` or a float64 array) or
raises ``ValueError("<name> must be <requirement>, got <value>")``, naming the argument and what
the caller requires of it, e.g. ``width must be a positive integer, got 0``. Booleans are never
numbers here, numpy integers and floats are. Model-specific checks of shapes (``linear.check_network``,
``deep.check_layers``, …) stay in their modules and are built on these.

:mod:`dropnb.threads` repeats the integer check without numpy: it must run before numpy loads.
"""

from __future__ import annotations

import math
import os

import numpy as np


def error(name: str, requirement: str, value) -> ValueError:
    """The error "<name> must be <requirement>, got <value!r>", for checks beyond those here."""
    return ValueError(f"{name} must be {requirement}, got {value!r}")


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
           open_minimum: bool = False, open_maximum: bool = False) -> float:
    """``value`` as a finite float within the bounds (open or closed; None: unbounded). Anything
    ``float`` takes that is a single number is accepted (ints, numpy scalars, 0-d arrays);
    booleans, strings and arrays with entries are refused."""
    requirement = ("a number" if minimum is not None and maximum is not None else "a finite number") \
        + _bounds(minimum, maximum, open_minimum, open_maximum)
    converted = math.nan
    if not isinstance(value, (bool, np.bool_, str, bytes)) and getattr(value, "ndim", 0) == 0:
        try:
            converted = float(value)
        except (TypeError, ValueError):
            pass
    if not math.isfinite(converted) \
            or (minimum is not None and (converted <= minimum if open_minimum else converted < minimum)) \
            or (maximum is not None and (converted >= maximum if open_maximum else converted > maximum)):
        raise error(name, requirement, value)
    return converted


def positive(value, name: str) -> float:
    """A finite number > 0, as a float."""
    return number(value, name, minimum=0, open_minimum=True)


def nonnegative(value, name: str) -> float:
    """A finite number ≥ 0, as a float."""
    return number(value, name, minimum=0)


def probability(value, name: str) -> float:
    """A probability in (0, 1] (such as a retain probability θ), as a float."""
    return number(value, name, minimum=0, maximum=1, open_minimum=True)


def weights(value, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Non-negative weights (λ, μ) of a batch of problems: one finite number ≥ 0 for all, or an array
    of them broadcastable to the batch ``shape`` (one per run); returned broadcast to ``shape``
    (a read-only float64 view)."""
    requirement = f"a finite number ≥ 0 or an array of them broadcastable to shape {tuple(shape)}"
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise error(name, requirement, value)
    try:
        array = np.asarray(value, dtype=np.float64)
        if not (np.all(np.isfinite(array)) and np.all(array >= 0)):
            raise ValueError
        return np.broadcast_to(array, shape)
    except (TypeError, ValueError):
        raise error(name, requirement, value) from None


def matrix(value, name: str, ndim: int = 2, *, batched: bool = False) -> np.ndarray:
    """``value`` as a finite float64 array with ``ndim`` dimensions (at least ``ndim`` if
    ``batched``: leading batch dimensions allowed)."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim < ndim if batched else array.ndim != ndim:
        what = f"a {ndim}-d array" + (" or a batch of them" if batched else "")
        raise ValueError(f"{name} must be {what}, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {np.size(array) - np.count_nonzero(np.isfinite(array))} "
                         f"non-finite entries")
    return array


def symmetric(value, name: str) -> np.ndarray:
    """``value`` as a finite, square, symmetric float64 matrix (‖A − Aᵀ‖_F ≤ 10⁻¹²‖A‖_F)."""
    A = matrix(value, name)
    if A.shape[0] != A.shape[1] or np.linalg.norm(A - A.T) > 1e-12 * np.linalg.norm(A):
        raise ValueError(f"{name} must be a symmetric square matrix, got shape {A.shape}")
    return A


def environment_integer(variable: str, default: int, minimum: int = 1) -> int:
    """The integer in the environment variable ``variable`` (digits only, at least ``minimum``);
    ``default`` when it is unset or empty."""
    value = os.environ.get(variable) or ""
    if not value:
        return default
    if not value.isdigit() or int(value) < minimum:
        raise error(variable, _integer_requirement(minimum, None), value)
    return int(value)
