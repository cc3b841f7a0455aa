"""Sphinx extension of the book: pages generated from the chapters' claim records.

* ``claims-report`` directive (option ``:show: claims | errata | runs``) renders the records in
  ``$DROPNB_CLAIMS_DIR`` (set here to ``<book>/_build/claims`` unless given) as MyST tables, and
  warns (an error under ``-W``) when a chapter's recorded ids differ from the committed ledger.
* The report pages (config ``dropnb_report_pages``) are read after every other page, so the
  chapters have executed and written their records first, and are re-read on every build.
* Every notebook page offers its executed ``.ipynb`` for download.
* The book offers no live-code (Thebe) button, so Thebe's loader, which names a remote script,
  is left out of the pages: no page references anything outside the built site.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from importlib.metadata import version
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from .claims import CLAIMS_DIR_VARIABLE, format_value, load_records, markdown_table, table_cell

logger = logging.getLogger(__name__)
PACKAGES = ("numpy", "torch", "matplotlib", "jupyter-book", "sphinx", "myst-nb", "papermill")


def _claims_dir() -> Path:
    return Path(os.environ[CLAIMS_DIR_VARIABLE])


def _ledger(app) -> dict[str, list[str]]:
    path = Path(app.srcdir) / app.config.dropnb_ledger
    return json.loads(path.read_text()) if path.is_file() else {}


class ClaimsReport(SphinxDirective):
    """Render the chapters' records: all claims, the errata, or the run summary."""

    option_spec = {"show": lambda value: value.strip()}

    def run(self) -> list[nodes.Node]:
        show = self.options.get("show", "claims")
        if show not in ("claims", "errata", "runs"):
            raise self.error(f"claims-report :show: must be claims, errata or runs, got {show!r}")
        ledger = _ledger(self.env.app)
        records = load_records(_claims_dir(), ledger)
        self._check_against_ledger(ledger, records)
        text = {"claims": self._claims, "errata": self._errata, "runs": self._runs}[show](ledger, records)
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), source=self.env.docname), self.content_offset, container)
        return container.children

    def _check_against_ledger(self, ledger, records) -> None:
        for chapter, ids in ledger.items():
            found = [r["id"] for r in records.get(chapter, [])]
            if sorted(found) != sorted(ids):
                logger.warning(
                    f"claim records of chapter {chapter!r} in {_claims_dir()} do not match the ledger "
                    f"(missing {sorted(set(ids) - set(found))}, unexpected {sorted(set(found) - set(ids))}); "
                    "rebuild from a clean cache (jupyter-book clean --all) or update the ledger",
                    location=self.get_location(),
                )

    def _chapter_link(self, chapter: str) -> str:
        docname = next((d for d in sorted(self.env.found_docs) if d.rsplit("/", 1)[-1] == chapter), None)
        return f"{{doc}}`/{docname}`" if docname else f"`{chapter}`"

    def _claims(self, ledger, records) -> str:
        parts = []
        for chapter in ledger:
            chapter_records = records.get(chapter, [])
            passed = sum(r["passed"] for r in chapter_records)
            profiles = ", ".join(sorted({r["profile"] for r in chapter_records})) or "none"
            parts += [
                f"**Chapter {self._chapter_link(chapter)}**: {passed} of {len(chapter_records)} records "
                f"hold (profile {profiles}).",
                "",
                markdown_table(chapter_records),
                "",
            ]
        return "\n".join(parts)

    def _errata(self, ledger, records) -> str:
        rows = ["| erratum | source | printed | corrected | measured | printed gives | corrected gives "
                "| tolerance | result |", "|---|---|---|---|---|---|---|---|---|"]
        for chapter in ledger:
            for r in records.get(chapter, []):
                if r["kind"] == "erratum":
                    rows.append(
                        f"| `{r['id']}` | {table_cell(r['source'])} | {table_cell(r['printed'])} | {table_cell(r['statement'])} "
                        f"| {format_value(r['measured'])} | {format_value(r['printed_target'])} "
                        f"| {format_value(r['target'])} | {format_value(r['tolerance'])} "
                        f"| {'corrected statement holds' if r['passed'] else '**FAIL**'} |"
                    )
        return "\n".join(rows) if len(rows) > 2 else "No erratum is recorded yet."

    def _runs(self, ledger, records) -> str:
        rows = ["| chapter | profile | device | claims | errata | passed | seconds in claims |",
                "|---|---|---|---|---|---|---|"]
        for chapter in ledger:
            rs = records.get(chapter, [])
            rows.append(
                f"| {self._chapter_link(chapter)} | {', '.join(sorted({r['profile'] for r in rs}))} "
                f"| {', '.join(sorted({r['device'] for r in rs}))} | {sum(r['kind'] == 'claim' for r in rs)} "
                f"| {sum(r['kind'] == 'erratum' for r in rs)} | {sum(r['passed'] for r in rs)} of {len(rs)} "
                f"| {sum(r['seconds'] for r in rs):.1f} |"
            )
        env = ["", "This build ran on:", "", "| software | version |", "|---|---|",
               f"| Python | {platform.python_version()} ({platform.machine()}) |"]
        env += [f"| {name} | {version(name)} |" for name in PACKAGES]
        return "\n".join(rows + env)


def _set_claims_dir(app, config) -> None:
    os.environ.setdefault(CLAIMS_DIR_VARIABLE, str(Path(app.srcdir) / "_build" / "claims"))


def _reports(app, env) -> list[str]:
    return [d for d in app.config.dropnb_report_pages if d in env.found_docs]


def _always_outdated(app, env, added, changed, removed) -> list[str]:
    return _reports(app, env)


def _read_reports_last(app, env, docnames: list[str]) -> None:
    reports = [d for d in docnames if d in app.config.dropnb_report_pages]
    docnames[:] = [d for d in docnames if d not in reports] + reports


def _offer_notebook(app, pagename, templatename, context, doctree) -> None:
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if doctree is None or not executed.is_file() or context.get("ipynb_source"):
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def _drop_thebe(app, pagename, templatename, context, doctree) -> None:
    def is_thebe(script) -> bool:
        return "thebe" in str(getattr(script, "filename", "") or "") or "THEBE_JS_URL" in str(
            getattr(script, "attributes", {}).get("body", ""))

    context["script_files"] = [s for s in context.get("script_files", []) if not is_thebe(s)]


def setup(app):
    app.add_config_value("dropnb_report_pages", [], "env")
    app.add_config_value("dropnb_ledger", "chapters/ledger.json", "env")
    app.add_directive("claims-report", ClaimsReport)
    app.connect("config-inited", _set_claims_dir)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("env-before-read-docs", _read_reports_last)
    app.connect("html-page-context", _offer_notebook, priority=400)
    app.connect("html-page-context", _drop_thebe)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
