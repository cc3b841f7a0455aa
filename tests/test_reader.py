"""What a reader of the published book finds: the PDF, the edit, issue and launch buttons, the
Binder environment, and links in the bibliography."""

import json
import re
from urllib.parse import urlparse

import pytest
import yaml

from dropnb.book.layout import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPOSITORY = CONFIG["repository"]["url"]
BRANCH = CONFIG["repository"]["branch"]
OWNER, NAME = urlparse(REPOSITORY).path.strip("/").split("/")
PDF = "dropout-derived.pdf"
# GitHub Pages publishes the repository's site here; the pages workflow puts the PDF at its root.
PUBLISHED_PDF = f"https://{OWNER}.github.io/{NAME}/{PDF}"
RAW_TEX = re.compile(r"\\['`^\"~=.a-zA-Z]|\{\\|\$")


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S))


@pytest.fixture(scope="module")
def book(quick_build):
    assert quick_build.returncode == 0, quick_build.log
    return quick_build.html


def test_the_pdf_is_published_where_the_links_point():
    """make pdf writes the PDF, the pages workflow builds it and copies it to the root of the site,
    and the navbar link names that published file (a local build never holds the PDF, which is
    printed from the built pages)."""
    assert f"_build/pdf/{PDF}" in (ROOT / "Makefile").read_text()
    pages = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "make browser" in pages and "make pdf" in pages
    copy = pages.index(f"cp _build/pdf/{PDF} _build/html/{PDF}")
    assert copy < pages.index("actions/upload-pages-artifact@")
    links = CONFIG["sphinx"]["config"]["html_theme_options"]["icon_links"]
    assert [link["url"] for link in links if "pdf" in link["icon"]] == [PUBLISHED_PDF]
    assert CONFIG["sphinx"]["recursive_update"] is True, "html_theme_options would replace the html: options"


@pytest.mark.chapters
def test_the_landing_page_and_the_navbar_link_the_pdf(book):
    intro = (book / "chapters" / "intro.html").read_text()
    assert f'href="{PUBLISHED_PDF}"' in intro and f"_build/pdf/{PDF}" in intro
    page = (book / "chapters" / "regularizer.html").read_text()
    assert re.search(rf'href="{re.escape(PUBLISHED_PDF)}"[^>]*>\s*<i class="fa-solid fa-file-pdf', page)


@pytest.mark.chapters
def test_a_page_offers_edit_issue_and_launch_buttons_for_the_book_repository(book):
    page = (book / "chapters" / "regularizer.html").read_text()
    assert f"{REPOSITORY}/edit/{BRANCH}/chapters/regularizer.md" in page
    assert f"{REPOSITORY}/issues/new?title=" in page
    assert f"https://mybinder.org/v2/gh/{OWNER}/{NAME}/{BRANCH}?urlpath=lab/tree/chapters/regularizer.md" in page


def test_binder_installs_what_the_makefile_installs():
    """repo2docker reads binder/: the Python the requirements are pinned for, then (postBuild, run
    from the repository root) the Makefile's pip installs: requirements.txt with dropnb itself,
    the data wheels without dependencies and with hashes; jupytext opens the chapters as notebooks."""
    python = re.search(r"\(Python (\d+\.\d+)\)", (ROOT / "requirements.txt").read_text()).group(1)
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == f"python-{python}"
    assert "-e ." in (ROOT / "requirements.txt").read_text().splitlines()
    assert re.search(r"^jupytext==", (ROOT / "requirements.txt").read_text(), re.M)
    makefile = (ROOT / "Makefile").read_text()
    installs = [line.strip().replace("$(BIN)/", "") for line in makefile.splitlines() if "$(BIN)/pip install" in line]
    assert len(installs) == 2 and "--no-deps --require-hashes -r requirements-data.txt" in installs[1]
    post_build = ROOT / "binder" / "postBuild"
    assert post_build.stat().st_mode & 0o111, "repo2docker runs postBuild only when it is executable"
    steps = [line.strip().replace(" --no-cache-dir", "") for line in post_build.read_text().splitlines()]
    assert [step for step in steps if step.startswith("pip install")] == installs
    assert '"markdown": "Jupytext Notebook"' in post_build.read_text()


def bib_entries():
    text = (ROOT / "references.bib").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^@\w+\{([^,]+),(.*?)^\}", text, re.M | re.S)}


def field(entry: str, name: str) -> str | None:
    found = re.search(rf"^\s*{name}\s*=\s*\{{(.*)\}},?\s*$", entry, re.M)
    return found.group(1) if found else None


@pytest.mark.chapters
def test_the_bibliography_links_every_identifier_it_has(book):
    page = (book / "chapters" / "bibliography.html").read_text()
    linked = 0
    for key, entry in bib_entries().items():
        for name, prefix in (("eprint", "https://arxiv.org/abs/"), ("doi", "https://doi.org/"), ("url", "")):
            value = field(entry, name)
            if value:
                assert f'href="{prefix}{value}"' in page, (key, name)
                linked += 1
    assert linked >= len(bib_entries()) // 2


@pytest.mark.chapters
def test_bibliography_and_search_previews_show_no_raw_tex(book):
    """Names with accents (Ren{\\'e}, Lata{\\l}a) and symbols in titles ({$k$}) read as text, in
    the page and in what the search index holds."""
    text = text_of((book / "chapters" / "bibliography.html").read_text())
    assert "René" in text and "Latała" in text
    assert not RAW_TEX.search(text), RAW_TEX.search(text)
    index = (book / "searchindex.js").read_text()
    assert not re.search(r"\{\\\\|\\\\['`^\"~=.]|ren\{", index)
    search = json.loads(index[index.index("(") + 1:index.rindex(")")])
    titles = list(search["titles"]) + list(search["alltitles"])
    assert not [title for title in titles if "\\" in title or "$" in title or "<" in title]


def test_no_heading_holds_math():
    """Headings become the titles of search results and of the table of contents, where math shows
    as raw TeX and emphasis as raw HTML: they use plain Unicode (ηθ/2, ℓ∞, β) instead."""
    import jupytext

    headings = [f"{page.name}: {line}" for page in sorted((ROOT / "chapters").glob("*.md"))
                for cell in jupytext.read(page).cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("#") and ("$" in line or "*" in line)]
    assert not headings
