"""The book's places and lists: its folders, its table of contents, its ledger and its profiles.

Every other module of :mod:`dropnb.book` takes them from here; each file is read once.

* :data:`ROOT`: the book's top folder (the first parent of this package holding ``_config.yml``);
  :data:`CHAPTERS` (``chapters/``), :data:`LEDGER` (``chapters/ledger.json``), :data:`TOC`
  (``_toc.yml``), :data:`GOLDENS` (``tests/golden``);
* :func:`claims_dir`: where a run writes its claim records, ``$DROPNB_CLAIMS_DIR``, else
  ``_build/claims`` under the book's top folder;
* :func:`pages`: the book's pages in reading order, from the table of contents;
* :func:`ledger`: the committed claim ids of each page with claims, in book order
  (:func:`pages_with_claims`, :func:`claim_ids`);
* :data:`PROFILES`: the run profiles, smallest first.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from .. import checks

PROFILES = ("quick", "book", "full")
CLAIMS_DIR_VARIABLE = "DROPNB_CLAIMS_DIR"


def book_root(start: Path | None = None) -> Path:
    """The book's top folder seen from ``start`` (default: the working directory): the first parent
    holding ``_config.yml``, else ``start``."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "_config.yml").is_file():
            return folder
    return start


ROOT = book_root(Path(__file__).parent)
CHAPTERS = ROOT / "chapters"
LEDGER = CHAPTERS / "ledger.json"
TOC = ROOT / "_toc.yml"
GOLDENS = ROOT / "tests" / "golden"


def claims_dir(start: Path | None = None) -> Path:
    """``$DROPNB_CLAIMS_DIR`` if set, else ``_build/claims`` under the book's top folder seen from
    ``start`` (default: the working directory, so that a page run from ``chapters/`` finds it)."""
    value = os.environ.get(CLAIMS_DIR_VARIABLE)
    return Path(value) if value else book_root(start) / "_build" / "claims"


@functools.cache
def table_of_contents() -> dict:
    """The table of contents (``_toc.yml``) as parsed: ``root`` and ``parts`` of ``chapters`` with
    their ``sections``."""
    import yaml

    return yaml.safe_load(TOC.read_text())


def pages() -> list[str]:
    """The book's pages in reading order (``chapters/<name>``, as the table of contents names them)."""
    toc = table_of_contents()
    found = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part["chapters"]:
            found += [chapter["file"]] + [section["file"] for section in chapter.get("sections", [])]
    return found


@functools.cache
def _read_ledger() -> dict[str, list[str]]:
    return json.loads(LEDGER.read_text())


def ledger() -> dict[str, list[str]]:
    """The committed ledger: each page with claims (in book order) and its claim ids, in page order."""
    return {page: list(ids) for page, ids in _read_ledger().items()}


def pages_with_claims() -> list[str]:
    """The pages named in the ledger, in book order."""
    return list(_read_ledger())


def claim_ids(page: str) -> list[str]:
    """The claim ids of ``page`` in the ledger."""
    page, found = checks.text(page, "page"), _read_ledger()
    if page not in found:
        raise ValueError(f"page must be a page of the ledger {LEDGER}, got {page!r}")
    return list(found[page])
