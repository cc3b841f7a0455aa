"""Sphinx extension of the book: pages generated from the chapters' claim records.

* ``claims-report`` directive (option ``:show: claims | errata | runs``, or ``claim`` with ``:id:``
  for one claim's block) renders the records in
  ``$DROPNB_CLAIMS_DIR`` (set here to ``<book>/_build/claims`` unless given) as MyST tables, and
  warns (an error under ``-W``) when a chapter's recorded ids differ from the committed ledger.
* ``timing-table`` directive (argument: a profile) renders the rows committed by ``benchmarks/book.py``
  and ``benchmarks/gpu.py`` as ``benchmarks/results/<profile>-<device>.json`` (:mod:`dropnb.book.timing`).
* The report pages (config ``dropnb_report_pages``) are read after every other page, so the
  chapters have executed and written their records first, and are re-read on every build.
* Glued numbers in the prose are written readably (``2,140``, ``1.2 × 10⁻¹⁶``), never in
  e-notation.
* Every notebook page offers its executed ``.ipynb`` for download, cleaned for a reader
  (:func:`downloadable`); a page whose outputs came from the execution cache gets them back in
  ``jupyter_execute/`` first (myst-nb writes it without them).
* The stylesheet ``dropnb/book/static/dropnb.css`` lays out claims, claim tables and figures for any
  column width and for print; the footer names the commit the book was built from.
* Figures, tables and equations are numbered per page (Fig. 1, 2, … and (1), (2), … on every page);
  a reference to the number of another page names that page. A reference to a result reads as its
  source's number ("Mianjy 2021, Proposition 3 of Chapter 4"); the proof index lists each result by
  its title, under its page.
* The book offers no live-code (Thebe) button, so Thebe's loader, which names a remote script,
  is left out of the pages: no page references anything outside the built site.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from importlib.metadata import version
from pathlib import Path

import nbformat
from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.util import logging
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective
from sphinx_proof.domain import ProofIndex

from . import timing
from .claims import load_records, totals
from .layout import CLAIMS_DIR_VARIABLE, claims_dir, ledger, pages_with_claims
from .render import claim_block, claims_table, is_estimate, readable_text

logger = logging.getLogger(__name__)
NUMBER_CELL = re.compile(r"^\s*[≈≤≥≠<>]?\s*[−+-]?[\d.,]+(?:\u202f×\u202f10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?\s*%?\s*$")
PACKAGES = ("numpy", "torch", "matplotlib", "jupyter-book", "sphinx", "myst-nb", "papermill")


class ClaimsReport(SphinxDirective):
    """Render the chapters' records: all claims, the errata, or the run summary."""

    option_spec = {"show": lambda value: value.strip(), "id": lambda value: value.strip()}

    def run(self) -> list[nodes.Node]:
        show = self.options.get("show", "claims")
        if show not in ("claims", "errata", "runs", "claim"):
            raise self.error(f"claims-report :show: must be claims, errata, runs or claim, got {show!r}")
        committed = ledger()
        records = load_records(claims_dir(), committed)
        if show == "claim":
            return self._one(records)
        self._check_against_ledger(committed, records)
        return {"claims": self._claims, "errata": self._errata, "runs": self._runs}[show](committed, records)

    def _one(self, records) -> list[nodes.Node]:
        """The block of the claim named by ``:id:``, as its page shows it."""
        wanted = self.options.get("id")
        found = [r for rs in records.values() for r in rs if r["id"] == wanted]
        if not found:
            raise self.error(f"claims-report :id: must name a recorded claim, got {wanted!r}")
        return self._parse(claim_block(found[0]), nodes.container()).children

    def _check_against_ledger(self, ledger, records) -> None:
        for chapter, ids in ledger.items():
            found = [r["id"] for r in records.get(chapter, [])]
            if sorted(found) != sorted(ids):
                logger.warning(
                    f"claim records of chapter {chapter!r} in {claims_dir()} do not match the ledger "
                    f"(missing {sorted(set(ids) - set(found))}, unexpected {sorted(set(found) - set(ids))}); "
                    "rebuild from a clean cache (jupyter-book clean --all) or update the ledger",
                    location=self.get_location(),
                )

    def _parse(self, text: str, parent: nodes.Element) -> nodes.Element:
        self.state.nested_parse(StringList(text.splitlines(), source=self.env.docname), self.content_offset, parent)
        return parent

    def _docname(self, page: str) -> str | None:
        return next((d for d in sorted(self.env.found_docs) if d.rsplit("/", 1)[-1] == page), None)

    def _page_link(self, page: str) -> str:
        docname = self._docname(page)
        return f"{{doc}}`/{docname}`" if docname else f"`{page}`"

    def _section(self, page: str, kind: str, text: str) -> nodes.section:
        """A section titled with the page's title, holding ``text`` (MyST)."""
        docname = self._docname(page)
        title = self.env.titles[docname].astext() if docname in self.env.titles else page
        ident = nodes.make_id(f"{kind}-{page}")
        section = nodes.section(ids=[ident], names=[ident])
        section += nodes.title(title, title)
        self.state.document.note_implicit_target(section, section)
        return self._parse(text, section)

    def _claim_href(self, record: dict) -> str:
        """Where a claim's block is: its page and the claim's anchor, relative to this page."""
        docname = self._docname(record["page"])
        here = self.env.docname.rsplit("/", 1)[0] + "/" if "/" in self.env.docname else ""
        target = docname[len(here):] if docname and docname.startswith(here) else (docname or record["page"])
        return f"{target}.html#{record['id']}"

    def _counts(self, page: str, records: list[dict]) -> str:
        """The first cells of a page's row: the page, its claims, its errata, how many hold."""
        errata, held = sum(r["kind"] == "erratum" for r in records), sum(r["passed"] for r in records)
        hold = "all" if records and held == len(records) else f"**{held} of {len(records)}**"
        return f"| {self._page_link(page)} | {len(records) - errata} | {errata} | {hold} |"

    def _claims(self, ledger, records) -> list[nodes.Node]:
        rows = ["| page | claims | errata | hold | estimated tolerances |", "|---|---|---|---|---|"]
        rows += [f"{self._counts(page, records.get(page, []))} {_estimates(records.get(page, []))} |"
                 for page in ledger]
        every = [r for page in ledger for r in records.get(page, [])]
        estimated = _estimates(every)
        overview = self._parse(
            f"Over the whole book: {totals(every)}. {estimated} of the {len(every)} tolerances "
            f"{'is a first-order estimate' if estimated == 1 else 'are first-order estimates'} "
            "(marked *estimated*); the others are bounds.\n\n" + "\n".join(rows), nodes.container())
        sections = []
        for page in ledger:
            rs = records.get(page, [])
            profiles = ", ".join(sorted({r["profile"] for r in rs})) or "none"
            text = (f"{totals(rs)} (profile {profiles}). Each id links to the claim on its page.\n\n"
                    + claims_table(rs, href=self._claim_href))
            sections.append(self._section(page, "claims", text))
        return [*overview.children, *sections]

    def _errata(self, ledger, records) -> list[nodes.Node]:
        sections = []
        for page in ledger:
            errata = [r for r in records.get(page, []) if r["kind"] == "erratum"]
            if errata:
                text = "\n\n".join(claim_block(r, page_href=self._claim_href(r)) for r in errata)
                sections.append(self._section(page, "errata", text))
        return sections or self._parse("No erratum is recorded yet.", nodes.container()).children

    def _runs(self, ledger, records) -> list[nodes.Node]:
        every = [r for page in ledger for r in records.get(page, [])]
        profiles = ", ".join(sorted({r["profile"] for r in every})) or "none"
        devices = ", ".join(sorted({r["device"] for r in every})) or "none"
        rows = [f"Profile: {profiles}. Device: {devices}.", "",
                "| page | claims | errata | hold | seconds in claims |", "|---|---|---|---|---|"]
        for page in ledger:
            rs = records.get(page, [])
            rows.append(f"{self._counts(page, rs)} {sum(r['seconds'] for r in rs):.1f} |")
        env = ["", "This build ran on:", "", "| software | version |", "|---|---|",
               f"| Python | {platform.python_version()} ({platform.machine()}) |"]
        env += [f"| {name} | {version(name)} |" for name in PACKAGES]
        return self._parse("\n".join(rows + env), nodes.container()).children


class TimingTable(SphinxDirective):
    """Render the timing rows committed as ``benchmarks/results/<profile>-<device>.json`` (argument: the
    profile) with :func:`dropnb.book.timing.table`."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        for path in timing.RESULTS.glob("*.json"):
            self.env.note_dependency(str(path))
        return self._parse(timing.table(self.arguments[0], pages_with_claims(), timing.RESULTS))

    def _parse(self, text: str) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), source=self.env.docname), self.content_offset, container)
        return container.children


def _estimates(records: list[dict]) -> int:
    """How many of the records rest on an estimated tolerance (:func:`dropnb.book.render.is_estimate`)."""
    return sum(is_estimate(r) for r in records)


class ReadableNumbers(SphinxPostTransform):
    """Glued numbers in the prose read ``2,140``, ``−0.86`` or ``1.2 × 10⁻¹⁶``, never ``2.14e+03``; table
    cells that hold a number are marked ``number`` so that the stylesheet keeps them whole."""

    default_priority = 900  # after myst-nb has pasted the glue of other pages

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.inline)):
            if "pasted-text" in node["classes"]:
                text = node.astext()
                if readable_text(text) != text:
                    node.children = [nodes.Text(readable_text(text))]
        for cell in self.document.findall(nodes.entry):
            if NUMBER_CELL.match(cell.astext()):
                cell["classes"].append("number")


def _number_per_page(app, env) -> list[str]:
    """Renumber what Sphinx numbered across the book (Fig. 45, (58)) from 1 on every page, in page order."""
    for numbers in env.toc_fignumbers.values():
        for ids in numbers.values():
            for n, key in enumerate(sorted(ids, key=ids.get), 1):
                ids[key] = (n,)
    return []


class CrossPageNumbers(SphinxPostTransform):
    """A reference to a figure or an equation of another page reads "(3) on the page *Its title*":
    numbers restart on every page, so a bare number would point into the reader's own page."""

    default_priority = 5  # before the references are resolved

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(addnodes.pending_xref)):
            page = self._page_of(node.get("refdomain"), node.get("reftype"), node.get("reftarget", ""))
            if page is None or page == self.env.docname:
                continue
            link = nodes.reference("", "", nodes.emphasis(text=self.env.titles[page].astext()), internal=True,
                                   refuri=self.app.builder.get_relative_uri(self.env.docname, page))
            node.parent.insert(node.parent.index(node) + 1, [nodes.Text(" on the page "), link])

    def _page_of(self, domain: str, kind: str, target: str) -> str | None:
        if (domain, kind) == ("math", "eq"):
            return self.env.get_domain("math").equations.get(target, (None,))[0]
        if (domain, kind) == ("std", "numref"):
            return self.env.get_domain("std").anonlabels.get(target.lower(), (None,))[0]
        return None


SOURCE_IN_TITLE = re.compile(r"(?P<name>.+?)\s*\((?P<source>[^()]*(?:\([^()]*\)[^()]*)*)\)")


def result_name(kind: str, title: str) -> str:
    """How a reference names a result the book does not number: the source's numbering in the
    title's closing parentheses ("Mianjy 2021, Proposition 3 of Chapter 4"), else kind and title."""
    match = SOURCE_IN_TITLE.fullmatch(title)
    if match:
        return match["source"]
    return f"{kind.capitalize()} “{title}”" if title else kind.capitalize()


class NamedResults(SphinxPostTransform):
    """A reference without text to an unnumbered result (every result the book restates carries its
    source's number, not the book's) reads as that number, not as a bare "Theorem "."""

    default_priority = 5  # before the references are resolved

    def run(self, **kwargs) -> None:
        titles = getattr(self.env, "dropnb_proof_titles", {})
        results = getattr(self.env, "proof_list", {})
        for node in list(self.document.findall(addnodes.pending_xref)):
            target = node.get("reftarget", "")
            if (node.get("refdomain") == "prf" and results.get(target, {}).get("nonumber")
                    and node.astext() == target and target in titles):
                _, kind, title = titles[target]
                node.children = [nodes.inline(text=result_name(kind, title))]


def _proof_titles(app, doctree) -> None:
    """Remember the title of every result of the page (the proof index names results by it)."""
    titles = app.env.__dict__.setdefault("dropnb_proof_titles", {})
    for node in doctree.findall(nodes.Element):
        if node.get("label") and node.get("realtype") and node.get("title") is not None:
            title = node["title"].strip()
            if title.startswith("(") and title.endswith(")"):  # proof_title_format " (%t)"
                title = title[1:-1]
            titles[node["label"]] = (app.env.docname, node["realtype"], title.replace("$", ""))


def _proof_index(self, docnames=None):
    """sphinx-proof's index, by page (in book order) and title instead of one raw label a line."""
    env = self.domain.env
    order = _book_order(env)
    titles = getattr(env, "dropnb_proof_titles", {})
    content: dict[str, list] = {}
    for label, values in getattr(env, "proof_list", {}).items():
        _, kind, title = titles.get(label, (None, values["realtype"], ""))
        page = values["docname"]
        name = f"{kind.capitalize()}: {title}" if title else kind.capitalize()
        content.setdefault(page, []).append((name, 0, page, label, "", "", ""))
    return [(env.titles[page].astext(), entries) for page, entries in sorted(content.items(), key=lambda i: order.get(i[0], len(order)))], False


def _book_order(env) -> dict[str, int]:
    """The pages in reading order (a walk of the table of contents from the root)."""
    order: list[str] = []

    def walk(docname: str) -> None:
        if docname not in order:
            order.append(docname)
            for child in env.toctree_includes.get(docname, []):
                walk(child)

    walk(env.config.root_doc)
    return {d: i for i, d in enumerate(order)}


def _set_claims_dir(app, config) -> None:
    os.environ.setdefault(CLAIMS_DIR_VARIABLE, str(claims_dir(Path(app.srcdir))))


def _reports(app, env) -> list[str]:
    return [d for d in app.config.dropnb_report_pages if d in env.found_docs]


def _always_outdated(app, env, added, changed, removed) -> list[str]:
    return _reports(app, env)


def _read_reports_last(app, env, docnames: list[str]) -> None:
    reports = [d for d in docnames if d in app.config.dropnb_report_pages]
    docnames[:] = [d for d in docnames if d not in reports] + reports


def downloadable(notebook: nbformat.NotebookNode, root: Path, repository: str) -> nbformat.NotebookNode:
    """The executed notebook as a reader downloads it.

    Streams to stderr (progress bars, library notices) are dropped, as on the page; the build
    machine's paths become relative to the book's top folder; a first cell says where the
    notebook comes from and how to get the package it imports.
    """
    root = str(root.resolve())
    text = json.dumps(notebook, ensure_ascii=False).replace(root + "/", "").replace(root, ".")
    notebook = nbformat.reads(text, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    origin = (f"This notebook is a page of *Dropout, derived*, an executable book on the theory of dropout "
              f"({repository}). It imports the book's package `dropnb`: clone the repository, run "
              "`pip install -r requirements.txt` in it, and open the notebook from the folder `chapters/`.")
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(origin))
    return notebook


def _executed_notebook(app, path: Path) -> nbformat.NotebookNode:
    """The executed notebook myst-nb wrote to ``path``. When a page's outputs come from the execution
    cache, myst-nb writes the notebook as read, without outputs; they are then merged in from the
    cache (matched by the code cells) and the file is rewritten."""
    notebook = nbformat.read(path, as_version=4)
    if any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"):
        return notebook
    from jupyter_cache import get_cache

    cache = app.env.mystnb_config.execution_cache_path or Path(app.outdir).parent / ".jupyter_cache"
    try:
        _, notebook = get_cache(str(cache)).merge_match_into_notebook(notebook)
    except KeyError:  # not in the cache: the page was not executed
        return notebook
    for cell in notebook.cells:  # as myst-nb does: values glued with display=False leave the cells
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not o.get("metadata", {}).get("scrapbook", {}).get("mime_prefix")]
    nbformat.write(notebook, path)
    return notebook


def _offer_notebook(app, pagename, templatename, context, doctree) -> None:
    """Name the page's executed notebook for the theme's download button (which the theme's
    buttons, at priority 501, show when ``ipynb_source`` is set)."""
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if doctree is None or not executed.is_file() or context.get("ipynb_source"):
        return
    context["ipynb_source"] = f"{pagename}.ipynb"


def _write_notebook(app, pagename, templatename, context, doctree) -> None:
    """Write the downloadable notebook the page offers, after the theme: its launch buttons copy the
    raw executed notebook to the same place."""
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if doctree is None or not executed.is_file() or context.get("ipynb_source") != f"{pagename}.ipynb":
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    repository = app.config.html_theme_options.get("repository_url", "")
    nbformat.write(downloadable(_executed_notebook(app, executed), Path(app.srcdir), repository), target)


def _stylesheet(app, config) -> None:
    config.html_static_path.append(str(Path(__file__).parent / "static"))


def _footer(app, config) -> None:
    """Add the commit the book was built from to the footer (the date is Sphinx's 'last updated')."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=app.srcdir, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return
    options = dict(config.html_theme_options)
    shown = f"<code>{commit}</code>"
    if options.get("repository_url"):
        shown = f'<a href="{options["repository_url"]}/commit/{commit}">{shown}</a>'
    options["extra_footer"] = (options.get("extra_footer") or "") + f"<p>Built from commit {shown}.</p>"
    config.html_theme_options = options


def _drop_thebe(app, pagename, templatename, context, doctree) -> None:
    def is_thebe(script) -> bool:
        return "thebe" in str(getattr(script, "filename", "") or "") or "THEBE_JS_URL" in str(
            getattr(script, "attributes", {}).get("body", ""))

    context["script_files"] = [s for s in context.get("script_files", []) if not is_thebe(s)]


def setup(app):
    app.add_config_value("dropnb_report_pages", [], "env")
    app.add_directive("claims-report", ClaimsReport)
    app.add_directive("timing-table", TimingTable)
    app.add_post_transform(ReadableNumbers)
    app.add_post_transform(CrossPageNumbers)
    app.add_post_transform(NamedResults)
    app.connect("env-get-updated", _number_per_page, priority=900)
    app.connect("doctree-read", _proof_titles)
    ProofIndex.generate = _proof_index
    app.add_css_file("dropnb.css")
    app.connect("config-inited", _set_claims_dir)
    app.connect("config-inited", _stylesheet)
    app.connect("config-inited", _footer)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("env-before-read-docs", _read_reports_last)
    app.connect("html-page-context", _offer_notebook, priority=400)
    app.connect("html-page-context", _write_notebook, priority=600)
    app.connect("html-page-context", _drop_thebe)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
