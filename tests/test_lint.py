"""The code passes ruff with the rules of pyproject.toml (pyflakes and pycodestyle's error classes)."""

import subprocess
import sys
from pathlib import Path

from dropnb.book.layout import ROOT

RUFF = Path(sys.executable).with_name("ruff")


def test_ruff_finds_nothing():
    result = subprocess.run([str(RUFF), "check", "--output-format", "concise", "dropnb", "tests", "benchmarks"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_reports_an_unused_import(tmp_path):
    """The check can fail: an unused import is reported."""
    (tmp_path / "module.py").write_text("import os\n")
    result = subprocess.run([str(RUFF), "check", "--config", str(ROOT / "pyproject.toml"), str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "F401" in result.stdout
