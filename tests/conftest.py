"""Test-session setup.

* Claim records of the planted-bug and determinism runs go to a scratch folder, never into _build.
* ``quick_build``: the book is built once at the ``quick`` profile; that one execution of every
  chapter serves the claims tests, the regression comparison and the book-build tests.
* Tests that need the chapters executed carry the marker ``chapters`` (``make unit`` skips them).
* Under CI (``CI`` set), hypothesis draws the same examples on every run, so that a CI verdict
  does not depend on the draw; local runs keep exploring new examples.
"""

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from dropnb.book.config import PROFILE_VARIABLE
from dropnb.book.layout import CLAIMS_DIR_VARIABLE, ROOT


settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config):
    # Kernels started by papermill and the book build inherit this environment.
    os.environ[CLAIMS_DIR_VARIABLE] = tempfile.mkdtemp(prefix="dropnb-claims-")


@dataclass(frozen=True)
class QuickBuild:
    """The book built at ``quick``: exit status and log, HTML, claim records, executed notebooks."""

    returncode: int
    log: str
    html: Path
    claims: Path
    executed: Path


@pytest.fixture(scope="session")
def quick_build(tmp_path_factory) -> QuickBuild:
    """Build the book with -W into a scratch folder at the quick profile (every chapter runs once,
    one per core, into the build's execution cache; the build then reads the outputs from there)."""
    out = tmp_path_factory.mktemp("book")
    env = os.environ | {PROFILE_VARIABLE: "quick", CLAIMS_DIR_VARIABLE: str(out / "claims")}
    subprocess.run([sys.executable, "-m", "dropnb.book.notebooks", "cache", str(out / "_build")], env=env, cwd=ROOT,
                   capture_output=True, check=True)
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", "-W", "-n", "--keep-going", "--path-output", str(out),
                             str(ROOT)], env=env, capture_output=True, text=True)
    return QuickBuild(result.returncode, result.stdout[-5000:] + result.stderr[-5000:], out / "_build" / "html",
                      out / "claims", out / "_build" / "jupyter_execute" / "chapters")
