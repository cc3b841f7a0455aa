"""The code passes ruff with the rules of pyproject.toml (pyflakes and pycodestyle's error classes):
the package, the tests and the benchmarks, and the code cells of every page, read as one script
per page (a notebook imports after its parameters cell, so E402 is not asked of pages)."""

import subprocess
import sys
from pathlib import Path

import jupytext

from dropnb.book.layout import CHAPTERS, ROOT

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


def page_scripts(pages: list[Path], folder: Path) -> list[Path]:
    """The code cells of each MyST notebook in ``pages``, one script a page, written to ``folder``."""
    scripts = []
    for page in pages:
        cells = [cell.source for cell in jupytext.read(page).cells if cell.cell_type == "code"]
        script = folder / f"{page.stem}.py"
        script.write_text("\n\n".join(cells) + "\n")
        scripts.append(script)
    return scripts


def ruff_on_pages(pages: list[Path], folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--config", str(ROOT / "pyproject.toml"), "--ignore", "E402",
                           "--output-format", "concise", *map(str, page_scripts(pages, folder))],
                          capture_output=True, text=True)


def executable_pages() -> list[Path]:
    return sorted(p for p in CHAPTERS.glob("*.md") if "```{code-cell}" in p.read_text())


def test_the_pages_code_passes_ruff(tmp_path):
    pages = executable_pages()
    assert len(pages) >= 30
    result = ruff_on_pages(pages, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_reads_a_pages_code_cells(tmp_path):
    """The page check can fail: an unused import in a code cell is reported."""
    page = tmp_path / "page.md"
    header = (CHAPTERS / "regularizer.md").read_text().split("\n---\n")[0] + "\n---\n"
    page.write_text(header + "\n# A page\n\n```{code-cell} ipython3\nimport os\n```\n")
    (tmp_path / "scripts").mkdir()
    result = ruff_on_pages([page], tmp_path / "scripts")
    assert result.returncode == 1 and "F401" in result.stdout


LONGEST_CELL = 40  # lines: a code cell does one thing, and a reader sees it whole


def long_cells(pages: list[Path]) -> list[str]:
    """``page: cell k has n lines`` for every code cell of ``pages`` longer than LONGEST_CELL."""
    return [f"{page.stem}: code cell {k} has {len(cell.source.splitlines())} lines"
            for page in pages
            for k, cell in enumerate(c for c in jupytext.read(page).cells if c.cell_type == "code")
            if len(cell.source.splitlines()) > LONGEST_CELL]


def test_no_code_cell_is_longer_than_forty_lines():
    assert not long_cells(executable_pages())


def test_a_long_cell_is_reported(tmp_path):
    page = tmp_path / "page.md"
    header = (CHAPTERS / "regularizer.md").read_text().split("\n---\n")[0] + "\n---\n"
    page.write_text(header + "\n```{code-cell} ipython3\n" + "x = 1\n" * (LONGEST_CELL + 1) + "```\n")
    assert long_cells([page]) == [f"page: code cell 0 has {LONGEST_CELL + 1} lines"]
