"""The whole book builds at the quick profile with zero warnings, offline, from its records."""

import re

import nbformat
import pytest

from dropnb.book.layout import ROOT, ledger, pages, pages_with_claims

pytestmark = pytest.mark.chapters

REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=[\"'](?:https?:)?//", re.IGNORECASE)
REMOTE_URL_IN_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>[^<]*https?://", re.IGNORECASE)


@pytest.fixture(scope="module")
def book(quick_build):
    """The HTML folder of the session's quick build, which must have passed with -W."""
    assert quick_build.returncode == 0, quick_build.log
    return quick_build.html


def test_the_book_builds_with_no_warning(quick_build):
    assert quick_build.returncode == 0, quick_build.log


def test_every_page_of_the_toc_is_built(book):
    for page in pages():
        assert (book / f"{page}.html").is_file(), page


def test_no_page_references_a_remote_script(book):
    for page in book.rglob("*.html"):
        text = page.read_text()
        assert not REMOTE_SCRIPT.search(text), page
        assert not REMOTE_URL_IN_INLINE_SCRIPT.search(text), page
    assert (book / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_verification_page_lists_every_claim(book):
    text = (book / "chapters" / "verification.html").read_text()
    for ids in ledger().values():
        for claim_id in ids:
            assert claim_id in text, claim_id
    assert "FAIL" not in text


def test_chapters_show_no_raw_records(book):
    for chapter in pages_with_claims():
        assert "Record(" not in (book / "chapters" / f"{chapter}.html").read_text()


def test_chapters_offer_their_executed_notebook(book):
    for chapter in pages_with_claims():
        assert (book / "_sources" / "chapters" / f"{chapter}.ipynb").is_file()
        assert f"_sources/chapters/{chapter}.ipynb" in (book / "chapters" / f"{chapter}.html").read_text()


def test_downloaded_notebooks_are_clean(book):
    """What a reader downloads: where it comes from first, no stderr (progress bars, notices) and
    no path of the machine that built it."""
    for path in (book / "_sources" / "chapters").glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        assert "dropnb" in notebook.cells[0].source and "github.com" in notebook.cells[0].source
        for cell in notebook.cells:
            assert not any(o.get("name") == "stderr" for o in cell.get("outputs", [])), path.name
        text = path.read_text()
        assert str(ROOT.resolve()) not in text and "site-packages" not in text, path.name


def test_the_site_names_its_licence_authors_and_repository(book):
    page = (book / "chapters" / "regularizer.html").read_text()
    for words in ("MIT licence", "CC BY 4.0", "github.com/dropout-derived/dropout-derived", "Cite as",
                  "Built from commit", "Last updated on"):
        assert words in page, words
    assert not (book / "genindex.html").exists()
    assert 'href="../prf-prf.html"' in (book / "chapters" / "intro.html").read_text()


def test_every_figure_cell_shows_one_figure(quick_build):
    """A cell's figure metadata (caption, name, description) wraps every output it displays, so
    a figure cell displays its figure alone: claims go in a cell of their own."""
    for path in quick_build.executed.glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            if "figure" in cell.metadata.get("mystnb", {}):
                shown = [o for o in cell.outputs if o.output_type in ("display_data", "execute_result")]
                assert len(shown) == 1 and "image/png" in shown[0].data, (path.name, cell.metadata.mystnb.figure)


def test_figures_and_equations_are_numbered_per_page(book):
    """Fig. 1, 2, … and (1), (2), … restart on every page, in the order of the page."""
    for chapter in pages_with_claims():
        text = (book / "chapters" / f"{chapter}.html").read_text()
        figures = [int(n) for n in re.findall(r'class="caption-number">Fig\. (\d+) ', text)]
        equations = [int(n) for n in re.findall(r'class="eqno">\((\d+)\)', text)]
        assert figures == list(range(1, len(figures) + 1)), (chapter, figures)
        assert equations == list(range(1, len(equations) + 1)), (chapter, equations)


def test_a_number_of_another_page_names_that_page(book):
    """structured-masks refers to the DropBlock bound, an equation of structured."""
    text = re.sub(r"<[^>]+>", "", (book / "chapters" / "structured-masks.html").read_text())
    assert re.search(r"\(\d+\) on the page Structured dropout", text)


def test_the_proof_index_names_each_result_by_its_title_under_its_page(book):
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (book / "prf-prf.html").read_text()))
    assert "Theorem: The expected dropout loss is a regularized loss" in text
    assert "The explicit regularizer of dropout" in text
    assert not re.search(r"\b(?:thm|lem|def|prop)-[a-z]", text), "a raw label in the proof index"
