"""The book as a reader sees it: every page in headless Chromium at 1,400 and 420 px, and the PDF.

Claims, tables, figures and formulas must stay in the text column, no table cell may cut its
content, no line of text may run out of its box, no role or glue may show as source text, no
number may break over two lines, every figure needs a caption and a description, and on a
desktop screen no figure may be scaled down so far that its labels shrink below 12 px. Without
Chromium (Debian's chromium and chromium-driver; ``make browser`` installs them) these tests
skip with that message. ``DROPNB_SCREENSHOTS=<folder>`` keeps a screenshot of every page.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dropnb.book import browser
from dropnb.book.layout import pages

WIDTHS = (1400, 420)
needs_browser = pytest.mark.skipif(not browser.available(), reason=browser.MISSING)


@pytest.fixture(scope="module")
def site(quick_build):
    assert quick_build.returncode == 0, quick_build.log
    return quick_build.html


@pytest.mark.chapters
@needs_browser
@pytest.mark.parametrize("width", WIDTHS)
def test_claims_tables_and_figures_fit_the_column(site, width):
    pages = sorted(p.relative_to(site).as_posix() for p in (site / "chapters").glob("*.html"))
    shots = os.environ.get("DROPNB_SCREENSHOTS")
    problems = {}
    with browser.serve(site) as base, browser.browser(width) as driver:
        for page in pages:
            found = browser.layout_problems(driver, f"{base}/{page}", figure_scale=width >= 1000)
            if found:
                problems[page] = found
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                browser.screenshot(driver, Path(shots) / f"{Path(page).stem}-{width}.png")
    report = "\n".join(f"{page}: {problem}" for page, found in problems.items() for problem in found[:8])
    assert not problems, f"at {width} px:\n{report}"


PAGE = """<!doctype html><html><body style="margin:0">
<article class="bd-article" style="width:400px">
<div class="claim" id="c1"><p>measured <strong>{number}</strong></p>
<p><span id="cut" style="display:inline-block;max-width:30px;overflow:hidden">a formula cut short</span></p></div>
<table><tr><td style="max-width:60px;overflow:hidden;white-space:nowrap">0.123456789012345</td></tr></table>
<figure><img src="data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg' width='900' height='90'/>"
 alt="x.png" style="max-width:100%"></figure>
<div class="claim" id="c2" style="width:700px">a claim wider than the column</div>
<figure><img src="data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg' width='760' height='76'/>"
 alt="a figure at twice its resolution, declared at half its pixels" style="width: 380px; height: 38px; max-width:100%">
<figcaption>shown at its declared size</figcaption></figure>
<p>a formula <mjx-container style="display:inline-block;width:600px">x + y</mjx-container> cut by the screen</p>
<p>the licence at https://example.org/averylongaddressthatcannotbreakanywhereatallinalineofthecolumnwhateverthewidth</p>
<p>a role left as source: {{doc}}`bounds`, and a glue in math: $glue:text`slope`$</p>
<div class="cell_output"><pre style="overflow-x:auto">printed terms of use that run on and on far past the column's right edge without end</pre></div>
</article></body></html>"""


@needs_browser
def test_the_checker_finds_what_a_reader_would(tmp_path):
    """A page with every defect: each is reported."""
    long_number = "12,345,678,901,234,567,890,123,456,789"
    (tmp_path / "bad.html").write_text(PAGE.format(number=" ".join([long_number] * 3)))
    with browser.serve(tmp_path) as base, browser.browser(1400) as driver:
        problems = "\n".join(browser.layout_problems(driver, f"{base}/bad.html"))
    assert "div.claim#c2 overflows the column" in problems
    assert "a table cell cuts its content" in problems and 'span#cut cuts its content' in problems
    assert "a figure has no caption" in problems and 'no description (alt "x.png")' in problems
    assert problems.count("labels shrink") == 1, "a figure shown at its declared width is at full size"
    assert 'a formula runs past the column' in problems and '"x + y"' in problems
    assert "runs out of its box" in problems and "example.org" in problems
    assert "source text shows on the page" in problems and "{doc}`bounds`" in problems
    assert "a printed line runs out of its box" in problems


@pytest.mark.chapters
@needs_browser
def test_the_whole_book_prints_to_pdf(site, tmp_path):
    """Every page of the quick build, printed by Chromium in reading order into one PDF."""
    pdf = tmp_path / "book.pdf"
    result = subprocess.run([sys.executable, "-m", "dropnb.book.browser", "pdf", str(site), str(pdf)],
                            capture_output=True, text=True)
    assert result.returncode == 0, f"printing the book failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    titles = [item.title for item in reader.outline]
    assert len(titles) == len(pages()) and titles[0] == "Dropout, derived"
    assert len(reader.pages) > 100
    text = "".join(reader.pages[k].extract_text() for k in range(len(reader.pages)))
    assert "Claim." in text and "measured" in text and "Erratum." in text


class SlowRenderer:
    """A driver whose page loads at once and whose first ``timeouts`` prints time out."""

    def __init__(self, timeouts: int):
        self.timeouts, self.prints = timeouts, 0

    def set_script_timeout(self, seconds):
        pass

    def get(self, url):
        pass

    def execute_async_script(self, script):
        pass

    def print_page(self, options):
        from selenium.common.exceptions import TimeoutException

        self.prints += 1
        if self.prints <= self.timeouts:
            raise TimeoutException("timed out receiving message from renderer")
        return "JVBERi0="  # base64 of "%PDF-"


def test_a_renderer_timeout_while_printing_is_retried_once(tmp_path):
    driver = SlowRenderer(timeouts=1)
    assert browser.print_pdf(driver, "page.html", tmp_path / "page.pdf").read_bytes() == b"%PDF-"
    assert driver.prints == 2
    from selenium.common.exceptions import TimeoutException

    with pytest.raises(TimeoutException):
        browser.print_pdf(SlowRenderer(timeouts=2), "page.html", tmp_path / "again.pdf")
