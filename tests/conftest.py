"""Test-session setup: the chapters' claim records go to a scratch folder, never into _build."""

import os
import tempfile


def pytest_configure(config):
    # Kernels started by papermill, nbval and the book build inherit this environment.
    os.environ["DROPNB_CLAIMS_DIR"] = tempfile.mkdtemp(prefix="dropnb-claims-")
