"""Run the book's chapters as notebooks, and keep the regression goldens.

Command line (from the book's top folder)::

    python -m dropnb.notebooks run regularizer --profile full   # execute one chapter
    python -m dropnb.notebooks goldens                          # refresh tests/golden/*.ipynb

A chapter is a MyST Markdown notebook ``chapters/<name>.md``; it is converted with jupytext and
executed by papermill with the working directory ``chapters/`` and the parameter ``profile``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import jupytext
import nbformat
import papermill

from .claims import CLAIMS_DIR_VARIABLE
from .config import PROFILES, book_root, resolve_profile

ROOT = book_root(Path(__file__).parent)
CHAPTERS = ROOT / "chapters"
GOLDENS = ROOT / "tests" / "golden"
CHECK_TAG = "nbval-check-output"


def chapters_with_claims() -> list[str]:
    """The chapters named in the committed ledger, in book order."""
    return list(json.loads((CHAPTERS / "ledger.json").read_text()))


def load_chapter(name: str) -> nbformat.NotebookNode:
    """The chapter's notebook, read from its MyST Markdown source."""
    path = CHAPTERS / f"{name}.md"
    if not path.is_file():
        raise ValueError(f"name must be a chapter in {CHAPTERS}, got {name!r}")
    return jupytext.read(path)


@contextmanager
def _environment(**values: str | None):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update({key: value for key, value in values.items() if value is not None})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def execute(name: str, output: Path, profile: str = "quick", claims_dir: Path | None = None,
            prepend: str | None = None) -> nbformat.NotebookNode:
    """Execute chapter ``name`` at ``profile`` into ``output`` (.ipynb); return the executed notebook.

    ``claims_dir`` redirects the chapter's records; ``prepend`` is code run before the chapter
    (the tests use it to plant bugs). Raises papermill's execution error when a cell fails.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    notebook = load_chapter(name)
    if prepend:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(prepend))
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / f"{name}.ipynb"
        nbformat.write(notebook, source)
        with _environment(**{CLAIMS_DIR_VARIABLE: str(claims_dir) if claims_dir else None}):
            return papermill.execute_notebook(
                source, output, parameters={"profile": profile}, cwd=str(CHAPTERS), kernel_name="python3",
                language="python", progress_bar=False,
            )


def refresh_golden(name: str) -> Path:
    """Execute ``name`` at ``quick`` and keep, as its golden, only the outputs checked by nbval."""
    target = GOLDENS / f"{name}.ipynb"
    with tempfile.TemporaryDirectory() as scratch:
        notebook = execute(name, Path(scratch) / f"{name}.ipynb", profile="quick", claims_dir=Path(scratch))
    for cell in notebook.cells:
        if cell.cell_type == "code":
            if CHECK_TAG not in cell.metadata.get("tags", []):
                cell.outputs = []
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
    notebook.metadata.pop("papermill", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dropnb.notebooks", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute one chapter with papermill")
    run.add_argument("chapter")
    run.add_argument("--profile", choices=PROFILES, help="default: $DROPNB_PROFILE, else book")
    run.add_argument("--output", type=Path, help="executed notebook (default _build/run/<chapter>.ipynb)")
    goldens = commands.add_parser("goldens", help="refresh the nbval goldens in tests/golden/")
    goldens.add_argument("chapters", nargs="*", help="chapters to refresh (default: every chapter in the ledger)")
    args = parser.parse_args(argv)
    if args.command == "run":
        profile = resolve_profile(args.profile)
        output = args.output or ROOT / "_build" / "run" / f"{args.chapter}.ipynb"
        execute(args.chapter, output, profile=profile)
        print(f"executed {args.chapter} at profile {profile}: {output}")
    else:
        for name in args.chapters or chapters_with_claims():
            print(f"refreshed {refresh_golden(name)}")


if __name__ == "__main__":
    main()
