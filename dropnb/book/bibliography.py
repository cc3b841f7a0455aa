"""The bibliography style of the book, a Sphinx extension that registers it with pybtex.

The book cites author–year (``bibtex_reference_style: author_year``: "Mianjy et al. [2018]",
"[Mianjy et al., 2018]"). The pybtex formatting style ``dropnb`` (``bibtex_default_style`` in
``_config.yml``) lists the bibliography the same way. It is pybtex's ``alpha`` style (the default
of sphinxcontrib-bibtex, sorted by author, year and title) with three changes:

* the labels are author–year, as the citations print them ("Mianjy et al., 2018"; a letter
  after the year tells apart works of the same authors and year), not alphabetic ("MAV18");
* a ``$…$`` span in a field (a symbol in a title, protected from case changes by braces:
  ``{$k$}-Support Norm``) is set in italics, as a symbol is in print, instead of showing its
  dollar signs;
* a PhD thesis needs only its author and year: title and school are given where known, and a
  ``note`` says what the thesis contains where they are not.
"""

from __future__ import annotations

import re
from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.richtext import BaseMultipartText, String, Tag, Text
from pybtex.style import FormattedEntry
from pybtex.style.formatting import toplevel
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.formatting.unsrt import date
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import first_of, optional, optional_field, sentence

STYLE = "dropnb"
LABELS = "dropnb-author-year"
_MATH = re.compile(r"\$([^$]+)\$")


def italic_math(text):
    """``text`` (pybtex rich text) with every ``$…$`` span of its strings set in italics, without the dollars."""
    if isinstance(text, String):
        pieces = _MATH.split(text.value)
        if len(pieces) == 1:
            return text
        return Text(*(Tag("em", piece) if i % 2 else String(piece) for i, piece in enumerate(pieces) if piece))
    if isinstance(text, BaseMultipartText):
        return text._create_similar([italic_math(part) for part in text.parts])
    return text


def _surname(person) -> str:
    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


class LabelStyle(BaseLabelStyle):
    """Author–year labels: "Mianjy", "Mianjy and Arora" or "Mianjy et al.", a comma and the year."""

    def format_labels(self, sorted_entries):
        labels = [self.format_label(entry) for entry in sorted_entries]
        count, seen = Counter(labels), Counter()
        for label in labels:
            if count[label] == 1:
                yield label
            else:
                yield label + chr(ord("a") + seen[label])
                seen[label] += 1

    def format_label(self, entry) -> str:
        names = [_surname(person) for person in entry.persons.get("author") or entry.persons.get("editor") or []]
        if not names:
            authors = entry.key
        elif len(names) <= 2:
            authors = " and ".join(names)
        else:
            authors = f"{names[0]} et al."
        year = entry.fields.get("year")
        return f"{authors}, {year}" if year else authors


class Style(AlphaStyle):
    """pybtex's ``alpha`` formatting with author–year labels, symbols in italics, theses of known author and year."""

    default_label_style = LABELS

    def format_entry(self, label, entry, bib_data=None):
        formatted = super().format_entry(label, entry, bib_data=bib_data)
        return FormattedEntry(formatted.key, italic_math(formatted.text), formatted.label)

    def get_phdthesis_template(self, e):
        return toplevel[
            sentence[self.format_names("author")],
            optional[self.format_btitle(e, "title")],
            sentence[
                first_of[optional_field("type"), "PhD thesis"],
                optional_field("school"),
                optional_field("address"),
                date,
            ],
            sentence[optional_field("note")],
            self.format_web_refs(e),
        ]


def setup(app):
    register_plugin("pybtex.style.labels", LABELS, LabelStyle, force=True)
    register_plugin("pybtex.style.formatting", STYLE, Style, force=True)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
