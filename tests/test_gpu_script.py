"""The one command of a GPU machine, ``benchmarks/gpu.sh``, run here on the CPU at ``quick`` with this
environment's Python (which has the notebook stack, so no kit is needed): one row a page, the executed
notebook and records in the archive, and the rows merge into a results file."""

import json
import os
import subprocess
import sys
import tarfile

import pytest

from dropnb.book import timing
from dropnb.book.layout import ROOT


@pytest.mark.chapters
def test_gpu_script_writes_a_complete_row_and_the_notebook(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(["bash", "benchmarks/gpu.sh", "--profile", "quick", "--out", str(out), "regularizer"],
                            cwd=ROOT, env=os.environ | {"PYTHON": sys.executable}, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = timing.load_rows(out / "rows.jsonl")
    assert [r["page"] for r in rows] == ["regularizer"] and timing.complete(rows[0]), rows
    assert rows[0]["profile"] == "quick" and rows[0]["slowest_cells"] and rows[0]["device_name"]
    with tarfile.open(out / "pages.tar.gz") as tar:
        assert {"pages/regularizer/regularizer.ipynb", "pages/regularizer/regularizer.jsonl"} <= set(tar.getnames())
    merged = tmp_path / "quick-test.json"
    merge = subprocess.run([sys.executable, "benchmarks/gpu.py", "merge", "--check", str(out / "rows.jsonl"),
                            "--into", str(merged)], cwd=ROOT, capture_output=True, text=True)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    assert [r["page"] for r in json.loads(merged.read_text())] == ["regularizer"]
    failed = subprocess.run([sys.executable, "benchmarks/gpu.py", "merge", "--check", "--all", str(out / "rows.jsonl"),
                             "--into", str(merged)], cwd=ROOT, capture_output=True, text=True)
    assert failed.returncode == 1 and "equalization: no row" in failed.stdout


def test_gpu_script_says_what_to_do_without_the_notebook_stack(tmp_path):
    bare = tmp_path / "python"
    bare.write_text("#!/bin/sh\nexec /usr/bin/env python3 -I -S \"$@\"\n")
    bare.chmod(0o755)
    result = subprocess.run(["bash", "benchmarks/gpu.sh", "regularizer"], cwd=ROOT, capture_output=True, text=True,
                            env=os.environ | {"PYTHON": str(bare), "DROPNB_KIT": str(tmp_path / "no-kit")})
    assert result.returncode == 2 and "make gpu-kit GPU_PYTHON=" in result.stderr, result.stderr
