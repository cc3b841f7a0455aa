"""The pages through nbval: each page as a Jupyter notebook whose last cell prints its claims' verdicts.

nbval (``pytest --nbval-lax``) executes a notebook and fails on any error; in lax mode it compares
only the outputs of the cells marked ``# NBVAL_CHECK_OUTPUT`` with the outputs stored in the
notebook. :func:`prepare` converts every page with claims (jupytext) and appends one such cell,
``print(claims.verdicts())``, whose stored output is written from the page's golden
(``tests/golden/<page>.json``): one line ``PASS <id>: measured <value> <relation> <target>`` per
record, in page order. The numbers differ from run to run (other seeds, another code path), so the
sanitizer file (:data:`SANITIZER`) replaces every number with ``NUMBER`` on both sides: what nbval
checks is the verdict, the id and the relation of every claim, in order. The claim-record regression
(:mod:`dropnb.book.regression`) remains the test of the numbers themselves.

``python -m dropnb.book.nbval <folder> [page ...]`` writes ``<folder>/<page>.ipynb``; ``make nbval``
runs them with the sanitizer, the kernel in ``chapters/`` and the quick profile.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jupytext
import nbformat

from .claims import verdict_line
from .layout import CHAPTERS, GOLDENS, ROOT, pages_with_claims

MARKER = "# NBVAL_CHECK_OUTPUT"
CHECK_CELL = f"{MARKER}\nprint(claims.verdicts())"
SANITIZER = ROOT / "tests" / "nbval-sanitize.cfg"


def expected_verdicts(page: str) -> str:
    """The verdict lines of ``page``'s golden records, as :meth:`Claims.verdicts` prints them."""
    records = json.loads((GOLDENS / f"{page}.json").read_text())
    return "\n".join(verdict_line(record) for record in records) + "\n"


def notebook(page: str) -> nbformat.NotebookNode:
    """``chapters/<page>.md`` as a notebook that runs in ``chapters/`` (as papermill runs it), with the
    checked verdict cell appended."""
    if page not in pages_with_claims():
        raise ValueError(f"page must be a page with claims (chapters/ledger.json), got {page!r}")
    nb = jupytext.read(CHAPTERS / f"{page}.md")
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import os\nos.chdir({str(CHAPTERS)!r})  # as papermill runs the pages"))
    cell = nbformat.v4.new_code_cell(CHECK_CELL, execution_count=1)  # nbval ignores outputs of unrun cells
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=expected_verdicts(page))]
    nb.cells.append(cell)
    return nb


def prepare(folder: Path, pages: list[str] | None = None) -> list[Path]:
    """Write ``<folder>/<page>.ipynb`` for the named pages (default: every page with claims)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages or pages_with_claims():
        path = folder / f"{page}.ipynb"
        nbformat.write(notebook(page), path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("pages", nargs="*")
    arguments = parser.parse_args(argv)
    for path in prepare(arguments.folder, arguments.pages):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
