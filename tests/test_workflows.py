"""The GitHub Actions workflows: actionlint accepts them, and each runs the commands it is there for.

The lint tests need an ``actionlint`` binary beside the running Python (a package in the
environment that provides one); without it they are skipped and the content tests still run.
"""

import subprocess
import sys
from pathlib import Path

import pytest

GITHUB = Path(__file__).resolve().parent.parent / ".github"
WORKFLOWS = GITHUB / "workflows"
NAMES = ("ci.yml", "gpu.yml", "pages.yml")
ACTIONLINT = Path(sys.executable).with_name("actionlint")

needs_actionlint = pytest.mark.skipif(not ACTIONLINT.exists(), reason=f"no actionlint at {ACTIONLINT}")


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    command = [ACTIONLINT, "-no-color", "-config-file", GITHUB / "actionlint.yaml", *paths]
    return subprocess.run(list(map(str, command)), capture_output=True, text=True)


@needs_actionlint
def test_actionlint_accepts_the_workflows():
    result = actionlint(*(WORKFLOWS / name for name in NAMES))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_actionlint
def test_actionlint_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    no-such-key: 1\n"
                      "    steps:\n      - run: echo ok\n")
    result = actionlint(broken)
    assert result.returncode != 0
    assert "no-such-key" in result.stdout + result.stderr


def test_workflows_run_what_they_promise():
    ci, gpu, pages = ((WORKFLOWS / name).read_text() for name in NAMES)
    assert "bash .ci/run" in ci
    assert "chapters/ledger.json" in gpu and "fromJSON(needs.pages.outputs.pages)" in gpu
    assert "fail-fast: false" in gpu and "timeout-minutes: 20" in gpu
    assert "benchmarks/gpu.sh --profile full" in gpu and "actions/upload-artifact@" in gpu
    assert "benchmarks/gpu.py merge --check --all" in gpu
    assert "make pdf" in pages and "actions/deploy-pages@" in pages  # make pdf builds the book first
