"""The GitHub Actions workflows: check-jsonschema and zizmor accept them, and each runs the commands it is there for.

Both tools are pinned in requirements.txt and found beside the running Python; a missing one fails the
test, it is never skipped. check-jsonschema validates each workflow against the GitHub workflow schema it
ships (``--builtin-schema vendor.github-workflows``, nothing downloaded); zizmor audits them for security
problems offline, with the settings in ``.github/zizmor.yml``, at its default ("regular") persona and
every severity.
"""

import subprocess
import sys
from pathlib import Path

import pytest

GITHUB = Path(__file__).resolve().parent.parent / ".github"
WORKFLOWS = GITHUB / "workflows"
NAMES = ("ci.yml", "gpu.yml", "nbval.yml", "pages.yml")
BIN = Path(sys.executable).parent


def run_tool(name: str, *arguments) -> subprocess.CompletedProcess:
    tool = BIN / name
    if not tool.exists():
        pytest.fail(f"no {name} at {tool}: pip install -r requirements.txt")
    return subprocess.run([str(tool), *map(str, arguments)], capture_output=True, text=True)


def check_jsonschema(*paths: Path) -> subprocess.CompletedProcess:
    return run_tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", "--color", "never", *paths)


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    return run_tool("zizmor", "--offline", "--config", GITHUB / "zizmor.yml", "--color", "never",
                    "--no-progress", *paths)


def test_check_jsonschema_accepts_the_workflows():
    result = check_jsonschema(*(WORKFLOWS / name for name in NAMES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_jsonschema_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    no-such-key: 1\n"
                      "    steps:\n      - run: echo ok\n")
    result = check_jsonschema(broken)
    assert result.returncode != 0
    assert "'no-such-key' was unexpected" in result.stdout + result.stderr


def test_zizmor_finds_nothing_in_the_workflows():
    result = zizmor(*(WORKFLOWS / name for name in NAMES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout, result.stdout + result.stderr


def test_zizmor_finds_a_template_injection(tmp_path):
    injected = tmp_path / "injected.yml"
    injected.write_text("on: issues\npermissions: {}\njobs:\n  greet:\n    runs-on: ubuntu-latest\n"
                        "    steps:\n      - run: echo \"${{ github.event.issue.title }}\"\n")
    result = zizmor(injected)
    assert result.returncode != 0
    assert "template-injection" in result.stdout + result.stderr


def test_workflows_run_what_they_promise():
    ci, gpu, nbval, pages = ((WORKFLOWS / name).read_text() for name in NAMES)
    assert "bash .ci/run" in ci
    assert "chapters/ledger.json" in gpu and "fromJSON(needs.pages.outputs.pages)" in gpu
    assert "fail-fast: false" in gpu and "timeout-minutes: 20" in gpu
    assert "benchmarks/gpu.sh --profile full" in gpu and "actions/upload-artifact@" in gpu
    assert "benchmarks/gpu.py merge --check --all" in gpu
    assert "make pdf" in pages and "actions/deploy-pages@" in pages  # make pdf builds the book first
    assert "schedule:" in nbval and "make nbval" in nbval
