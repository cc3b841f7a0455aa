"""make nbval's notebooks (dropnb.book.nbval): the checked cell, its stored output, the sanitizer."""

import json
import re

import pytest
from nbval.plugin import get_sanitize_patterns

from dropnb.book import nbval
from dropnb.book.claims import verdict_line
from dropnb.book.layout import CHAPTERS, GOLDENS, ROOT, claim_ids

PAGE = "regularizer"


def sanitize(text: str) -> str:
    for regex, replace in get_sanitize_patterns(nbval.SANITIZER.read_text()):
        text = re.sub(regex, replace, text)
    return text


def test_a_page_notebook_runs_in_chapters_and_ends_with_its_checked_verdicts():
    nb = nbval.notebook(PAGE)
    assert str(CHAPTERS) in nb.cells[0].source
    last = nb.cells[-1]
    assert last.source.startswith(nbval.MARKER) and last.execution_count is not None
    lines = last.outputs[0].text.splitlines()
    assert [line.split()[1].rstrip(":") for line in lines] == claim_ids(PAGE)
    assert all(line.startswith("PASS ") for line in lines)


def test_the_sanitizer_keeps_verdict_id_and_relation_and_drops_the_numbers():
    golden = json.loads((GOLDENS / f"{PAGE}.json").read_text())[1]
    other = golden | {"measured": golden["measured"] * 1.37 + 1e-9, "target": -2.5e-300}
    assert sanitize(verdict_line(other)) == sanitize(verdict_line(golden))
    assert sanitize(verdict_line(golden | {"passed": False})) != sanitize(verdict_line(golden))
    assert sanitize(verdict_line(golden | {"comparison": "differs"})) != sanitize(verdict_line(golden))


def test_prepare_writes_every_page_with_claims_and_refuses_others(tmp_path):
    paths = nbval.prepare(tmp_path, [PAGE, "structured"])
    assert [p.name for p in paths] == [f"{PAGE}.ipynb", "structured.ipynb"]
    with pytest.raises(ValueError, match="page with claims"):
        nbval.notebook("notation")


def test_make_nbval_runs_the_notebooks_through_nbval_with_the_sanitizer():
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\nnbval:"):]
    target = target[:target.index("\n\n")]
    assert "--nbval-lax" in target and "tests/nbval-sanitize.cfg" in target and "dropnb.book.nbval" in target
