"""Threads of the numeric libraries: one per process unless ``$DROPNB_THREADS`` says otherwise.

The chapters' linear algebra is small: extra threads cost more in start-up and waiting than they
save (measured on two cores at the quick profile: the equalization chapter takes 23 s on one
thread and 76 s on two), and a process that runs beside another one must not spin on the cores
the other one needs. This module imports nothing numeric, so that :func:`set_defaults` can run
before numpy's, scipy's and torch's thread pools start.
"""

from __future__ import annotations

import os

THREADS_VARIABLE = "DROPNB_THREADS"
DEFAULT_THREADS = 1


# The two checks below repeat dropnb.checks.environment_integer and checks.integer, in their error
# format, because this module must not import numpy: OpenBLAS sizes its thread pool when numpy is
# first imported, from the variables that set_defaults writes (measured: numpy imported before
# OPENBLAS_NUM_THREADS=1 is set keeps one OpenBLAS thread per core).


def threads_from_environment() -> int:
    """``$DROPNB_THREADS`` (a positive integer), else 1."""
    value = os.environ.get(THREADS_VARIABLE)
    if value is None:
        return DEFAULT_THREADS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_VARIABLE} must be a positive integer, got {value!r}")
    return int(value)


def thread_environment(threads: int) -> dict[str, str]:
    """Environment variables that give a new process ``threads`` threads in every numeric library.

    torch (``$DROPNB_THREADS``), OpenMP, OpenBLAS and MKL; idle OpenMP threads sleep instead of
    spinning (``OMP_WAIT_POLICY=PASSIVE``).
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    count = str(threads)
    return {THREADS_VARIABLE: count, "OMP_NUM_THREADS": count, "OPENBLAS_NUM_THREADS": count,
            "MKL_NUM_THREADS": count, "OMP_WAIT_POLICY": "PASSIVE"}


def set_defaults() -> None:
    """Give the libraries not loaded yet the thread count of :func:`threads_from_environment`.

    Variables already set are kept, so a reader's own OpenBLAS or OpenMP settings win.
    """
    for name, value in thread_environment(threads_from_environment()).items():
        os.environ.setdefault(name, value)
