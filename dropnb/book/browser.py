"""The built book in a real browser: serve it, measure its layout, print it to PDF.

Uses Debian's ``chromium`` and ``chromium-driver`` through Selenium; nothing is downloaded.

* :func:`serve` serves a built folder on 127.0.0.1 for the time of a ``with`` block.
* :func:`browser` starts headless Chromium at a window width (CSS pixels).
* :func:`layout_problems` loads a page, waits for MathJax, and lists what a reader would find
  broken: a claim, table or figure wider than the text column, a table cell whose content is
  cut, a number broken over two lines, a formula or a line of text or printed output that runs
  past the column or out of its box, a role or glue shown as source text, a figure scaled down so far that its labels
  shrink (on a phone: the picture of "The idea" only), a figure without caption or description.
* :func:`print_book` prints every page of the built book, in the order of its table of
  contents, and joins them into one PDF.

Command line: ``python -m dropnb.book.browser pdf _build/html _build/pdf/dropout-derived.pdf``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import tempfile
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .layout import pages

BROWSERS = ("chromium", "chromium-browser", "google-chrome")  # the first one installed is used
DRIVER = "chromedriver"
MISSING = ("no browser: install Debian's chromium and chromium-driver (make browser, or "
           "apt-get install chromium chromium-driver) to render the book in a real browser")
# A figure drawn at the book's 110 dpi with 10-point labels keeps them at 12 px or more on
# screen when it is shown at no less than this fraction of its natural size.
SMALLEST_FIGURE_SCALE = 0.8
# On a phone (a column of about 360 px) every figure is scaled down; the picture of "The idea", drawn
# at most 4.5 inches wide (495 px), keeps its labels at 10 px or more at this fraction.
SMALLEST_IDEA_SCALE_ON_A_PHONE = 0.7
# Seconds a page may take to load, typeset and decode its images: a limit on a wait for those events,
# not a pause; generous, since a busy machine renders slowly. A renderer that times out is asked once more.
LOAD_LIMIT = 300


def _browser_path() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def available() -> bool:
    """Whether Chromium (or Chrome) and its driver are installed."""
    return _browser_path() is not None and shutil.which(DRIVER) is not None


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on 127.0.0.1; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextmanager
def browser(width: int, height: int = 900):
    """Headless Chromium with a window ``width`` × ``height`` CSS pixels (a Selenium driver)."""
    if not available():
        raise RuntimeError(MISSING)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _browser_path()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--hide-scrollbars", f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which(DRIVER)), options=options)
    # A window is never narrower than about 500 px: emulate the screen to reach a phone's width.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800})
    driver.set_page_load_timeout(LOAD_LIMIT)
    try:
        yield driver
    finally:
        driver.quit()


_WAIT_FOR_MATHJAX = """
const done = arguments[arguments.length - 1];
const images = Array.from(document.images).map(img => img.complete ? null : img.decode().catch(() => null));
const typeset = (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise : null;
Promise.all([typeset, ...images]).then(() => done(true), () => done(false));
"""

_PROBLEMS = """
const smallest = arguments[0], checkFigureScale = arguments[1], smallestIdea = arguments[2];
const problems = [];
const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
const column = article.getBoundingClientRect();
const name = el => {
  const id = el.id || (el.closest('[id]') || {}).id || '';
  return `${el.tagName.toLowerCase()}${el.className && typeof el.className === 'string' ? '.' + el.className.split(' ')[0] : ''}#${id}`;
};
const outside = r => r.width > 0 && (r.right > column.right + 1 || r.left < column.left - 1);
// What a closed <details> holds is not shown (Chrome still lays it out): it is checked once opened.
const hidden = el => { const d = el.closest('details:not([open])'); return d !== null && !el.closest('summary'); };
// A box that scrolls sideways shows all of its content: a table may be wider than the column there.
const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
const inScroller = el => { for (let p = el.parentElement; p && p !== article; p = p.parentElement) if (scrolls(p)) return true; return false; };
// Claims, tables and figures (and everything inside them) stay in the text column.
for (const el of article.querySelectorAll('.claim, table, figure, img, .claims-table, details.claims-summary')) {
  if (hidden(el)) continue;
  const r = el.getBoundingClientRect();
  const fits = el.closest('.claims-table, .claim') !== null || !inScroller(el);
  if (fits && outside(r)) problems.push(`${name(el)} overflows the column (${Math.round(r.left)}–${Math.round(r.right)} px, column ${Math.round(column.left)}–${Math.round(column.right)} px)`);
  if (el.tagName === 'TABLE' && el.closest('.claims-table')) {
    const box = el.parentElement;
    if (el.scrollWidth > box.clientWidth + 1) problems.push(`${name(el)} is wider (${el.scrollWidth} px) than its box (${box.clientWidth} px)`);
  }
}
for (const el of article.querySelectorAll('.claim mjx-container, table mjx-container, .claim code, table code, .claim strong, table td, table th')) {
  if (hidden(el) || inScroller(el)) continue;
  const r = el.getBoundingClientRect();
  if (outside(r)) problems.push(`${name(el)} inside a claim or table overflows the column: "${el.textContent.slice(0, 60)}"`);
}
// No cell cuts its content, and nothing in a claim or table hides part of itself (a formula cut short).
for (const cell of article.querySelectorAll('td, th')) {
  if (hidden(cell) || scrolls(cell)) continue;
  if (cell.scrollWidth > cell.clientWidth + 1) problems.push(`a table cell cuts its content: "${cell.textContent.slice(0, 60)}"`);
}
// (MathJax's own boxes are left out: they clip glyph overhangs and the text kept for screen readers.)
for (const el of article.querySelectorAll('.claim *, table *')) {
  const mathInside = el.tagName !== 'MJX-CONTAINER' && el.closest('span.math, mjx-container');
  if (hidden(el) || mathInside || !['hidden', 'clip'].includes(getComputedStyle(el).overflowX)) continue;
  if (el.scrollWidth > el.clientWidth + 2) problems.push(`${name(el)} cuts its content: "${el.textContent.slice(0, 60)}"`);
}
// No number is broken over two lines.
// A number: digits with separators, a sign only where no letter or digit precedes it (not "rank-2").
const number = /(?<![\\p{L}\\p{N}.\\-−])[−-]?\\d[\\d,.]*(?:\\u202f×\\u202f10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?/gu;
for (const root of article.querySelectorAll('.claim, table')) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest('mjx-container') || hidden(node.parentElement)) continue;
    for (const match of node.data.matchAll(number)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) problems.push(`a number is broken over two lines: "${match[0]}"`);
    }
  }
}
// No formula runs past the column where nothing scrolls (on a phone it is cut at the screen's edge).
for (const el of article.querySelectorAll('mjx-container')) {
  if (hidden(el) || inScroller(el) || el.parentElement.closest('mjx-container')) continue;
  const r = el.getBoundingClientRect();
  const tex = (el.querySelector('mjx-assistive-mml') || el).textContent.replace(/\\s+/g, ' ').slice(0, 60);
  if (outside(r)) problems.push(`a formula runs past the column (${Math.round(r.left)}–${Math.round(r.right)} px): "${tex}"`);
}
// No text runs out of its box (an unbreakable line: a long address or name).
for (const el of article.querySelectorAll('p, li, dt, dd, blockquote')) {
  if (hidden(el) || inScroller(el) || el.querySelector('mjx-container[display="true"], pre, table')) continue;
  if (el.scrollWidth > el.clientWidth + 2) problems.push(`${name(el)} runs out of its box (${el.scrollWidth} px in ${el.clientWidth} px): "${el.textContent.trim().slice(0, 60)}"`);
}
// No printed output hides part of a line behind a scroll bar.
for (const el of article.querySelectorAll('.cell_output pre')) {
  if (hidden(el)) continue;
  if (el.scrollWidth > el.clientWidth + 2) problems.push(`a printed line runs out of its box (${el.scrollWidth} px in ${el.clientWidth} px): "${el.textContent.trim().slice(0, 60)}"`);
}
// No source shows: a role or glue that was not resolved, outside code. Closed boxes count: a reader opens them.
const leaked = /\\{(?:doc|eq|ref|numref|cite(?::[pt])?|term|download|prf:ref|glue(?::\\w+)?)\\}`|glue:(?:text|any|figure|math)\\b/;
const texts = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
for (let node = texts.nextNode(); node; node = texts.nextNode()) {
  if (node.parentElement.closest('pre, code, .highlight, .cell_input, script, style')) continue;
  const match = node.data.match(leaked);
  if (match) problems.push(`source text shows on the page: "${node.data.slice(Math.max(0, match.index - 30), match.index + 50).trim()}"`);
}
// Figures: a caption, a description, and labels that stay readable.
for (const img of article.querySelectorAll('img')) {
  const figure = img.closest('figure');
  if (!figure || !figure.querySelector('figcaption')) problems.push(`a figure has no caption: ${img.getAttribute('src')}`);
  const alt = img.getAttribute('alt') || '';
  if (alt.length < 20 || /\\.(png|svg|jpe?g)$/.test(alt)) problems.push(`a figure has no description (alt "${alt}")`);
}
if (checkFigureScale) {
  // A figure's size is its declared width (a PNG at twice the resolution declares half its pixels,
  // as a style or an attribute).
  for (const img of article.querySelectorAll('img')) {
    const size = parseFloat(img.style.width) || Number(img.getAttribute('width')) || img.naturalWidth;
    if (size > 0 && img.clientWidth / size < smallest)
      problems.push(`a figure is shown at ${(100 * img.clientWidth / size).toFixed(0)} % of its size (${size} px wide): its labels shrink below 12 px`);
  }
} else {
  // On a phone every figure is scaled to the column; the picture of "The idea" must still read.
  for (const img of article.querySelectorAll('section#the-idea img')) {
    const size = parseFloat(img.style.width) || Number(img.getAttribute('width')) || img.naturalWidth;
    if (size > 0 && img.clientWidth / size < smallestIdea)
      problems.push(`the idea's figure is shown at ${(100 * img.clientWidth / size).toFixed(0)} % of its size (${size} px wide) on a phone: draw it narrower`);
  }
}
return problems;
"""


def load(driver, url: str) -> None:
    """Open ``url`` and wait until MathJax has typeset the page and its images are decoded (at most
    :data:`LOAD_LIMIT` seconds; a timeout is retried once, then raised)."""
    from selenium.common.exceptions import TimeoutException

    driver.set_script_timeout(LOAD_LIMIT)
    for attempt in range(2):
        try:
            driver.get(url)
            driver.execute_async_script(_WAIT_FOR_MATHJAX)
            return
        except TimeoutException:
            if attempt:
                raise


def layout_problems(driver, url: str, figure_scale: bool = True) -> list[str]:
    """Load ``url`` in ``driver`` and list its layout problems (see the module docstring)."""
    load(driver, url)
    return driver.execute_script(_PROBLEMS, SMALLEST_FIGURE_SCALE, figure_scale, SMALLEST_IDEA_SCALE_ON_A_PHONE)


def screenshot(driver, path: Path) -> None:
    """A PNG of the whole page as loaded, at the window's width."""
    width, height = driver.execute_script(
        "return [window.innerWidth, document.documentElement.scrollHeight]")
    metrics = {"width": width, "height": min(int(height), 16000), "deviceScaleFactor": 1, "mobile": width < 800}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.save_screenshot(str(path))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics | {"height": 900})


def print_pdf(driver, url: str, path: Path) -> Path:
    """Print ``url`` (A4, backgrounds, the page's print stylesheet) to the PDF file ``path`` (a renderer
    timeout is retried once)."""
    from selenium.webdriver.common.print_page_options import PrintOptions

    options = PrintOptions()
    options.page_width, options.page_height = 21.0, 29.7
    options.margin_top = options.margin_bottom = options.margin_left = options.margin_right = 1.5
    options.background = True
    from selenium.common.exceptions import TimeoutException

    load(driver, url)
    try:
        data = driver.print_page(options)
    except TimeoutException:  # a renderer slowed by other work on the machine: once more, then raise
        data = driver.print_page(options)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(data))
    return path


def print_book(site: Path, output: Path) -> Path:
    """Print every page of the built site ``site`` in reading order into one PDF, ``output``.

    Each page is printed on its own (a single page holding the whole book is too large for the
    browser to print), then the pages are joined, with one bookmark a page.
    """
    from pypdf import PdfWriter

    writer = PdfWriter()
    with tempfile.TemporaryDirectory() as scratch, serve(site) as base, browser(1200) as driver:
        for number, page in enumerate(pages()):
            printed = print_pdf(driver, f"{base}/{page}.html", Path(scratch) / f"{number:03d}.pdf")
            writer.append(str(printed), outline_item=driver.title.split(" — ")[0])
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("wb") as handle:
            writer.write(handle)
    return output


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dropnb.book.browser", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pdf = commands.add_parser("pdf", help="print the built book, every page in reading order, to one PDF file")
    pdf.add_argument("site", type=Path, help="the built HTML book (_build/html)")
    pdf.add_argument("output", type=Path, help="the PDF file to write")
    args = parser.parse_args(argv)
    missing = [page for page in pages() if not (args.site / f"{page}.html").is_file()]
    if missing:
        parser.error(f"site must be the built book, but it lacks {missing[:3]}: build it first (make book)")
    if not available():
        parser.error(MISSING)
    written = print_book(args.site, args.output)
    print(f"wrote {written} ({written.stat().st_size / 1e6:.1f} MB, {len(pages())} pages of the book)")


if __name__ == "__main__":
    main()
