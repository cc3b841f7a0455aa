"""How the book shows numbers and claim records to a reader.

* :func:`readable` writes a number in plain positional notation or as ``m × 10ᵏ``, never in
  e-notation; :func:`readable_text` rewrites the e-notation inside a text (the book applies it to
  every glued number in the prose).
* :func:`claim_block` is one claim or erratum as a short Markdown block that wraps in any column:
  verdict and statement, then measured value, target and tolerance with the tolerance's origin,
  then the source; the full record is one click away (a ``<details>`` element).
* :func:`claims_table` is a table of records whose columns stack into labelled lines on a narrow
  screen (the book's stylesheet, ``dropnb/book/static/dropnb.css``).

The Markdown is MyST with raw HTML wrappers (``<div>``, ``<details>``) on lines of their own, so
it reads the same in the built book and in Jupyter.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, is_dataclass
from typing import Any, Callable, Iterable, Mapping

from .. import checks

RELATIONS = {"close": "≈", "at_most": "≤", "at_least": "≥", "differs": "≠"}
COMPARISONS = {
    "close": "|measured − target| ≤ tolerance",
    "at_most": "measured ≤ target + tolerance",
    "at_least": "measured ≥ target − tolerance",
    "differs": "|measured − target| > tolerance",
}
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_E_NOTATION = re.compile(r"(?<![\w.])([-+]?\d+(?:\.\d+)?)[eE]([-+]?\d+)(?![\w.])")
_NEGATIVE = re.compile(r"(?<![\w.])-(?=\d)")  # a hyphen before a number is a minus sign
_LONG_INTEGER = re.compile(r"(?<![\w.,])\d{5,}(?![\w.,])")
_MATH = re.compile(r"(\$[^$]+\$)")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#])")
NARROW_SPACE = "\u202f"  # a narrow no-break space: a number never breaks across lines


def _power(mantissa: str, exponent: int) -> str:
    return f"{mantissa}{NARROW_SPACE}×{NARROW_SPACE}10{str(exponent).translate(_SUPERSCRIPT)}"


def readable(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits: positional for 10⁻³ ≤ |value| < 10⁵, else ``m × 10ᵏ``.

    Thousands are grouped with commas (``12,345``); infinities read ``∞``.
    """
    value, digits = checks.number(value, "value", finite=False), checks.integer(digits, "digits")
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(float(f"{value:.{digits - 1}e}"))))
    if -3 <= exponent < digits:
        text = f"{value:.{digits}g}"
    elif digits <= exponent < 5:
        text = f"{round(value, digits - 1 - exponent):,.0f}"
    else:
        mantissa, power = f"{value:.{digits - 1}e}".split("e")
        text = _power(mantissa, int(power))
    return text.replace("-", "−")


def readable_text(text: str) -> str:
    """``text`` with every number in e-notation (``2.14e+03``, ``1.0e-16``) written readably, the
    thousands of long integers grouped (``200000`` → ``200,000``) and minus signs for hyphens."""
    text = checks.text(text, "text", empty=True)

    def rewrite(match: re.Match) -> str:
        mantissa, exponent = match.group(1), int(match.group(2))
        if -4 <= exponent <= 4:
            value = float(match.group(0))
            decimals = (len(mantissa.split(".")[1]) if "." in mantissa else 0) - exponent
            return f"{value:,.{max(decimals, 0)}f}"
        return _power(mantissa, exponent)

    text = _LONG_INTEGER.sub(lambda m: f"{int(m.group(0)):,}", _E_NOTATION.sub(rewrite, text))
    return _NEGATIVE.sub("−", text)


def plain(text: str) -> str:
    """``text`` as literal Markdown: specials escaped and numbers made readable outside ``$…$`` math."""
    parts = _MATH.split(checks.text(text, "text", empty=True))
    return "".join(part if index % 2 else _MARKDOWN_SPECIAL.sub(r"\\\1", readable_text(part))
                   for index, part in enumerate(parts))


def prose(text: str) -> str:
    """Markdown ``text`` (a statement) with the numbers outside ``$…$`` math made readable."""
    parts = _MATH.split(checks.text(text, "text", empty=True))
    return "".join(part if index % 2 else readable_text(part) for index, part in enumerate(parts))


def basis_text(basis: str) -> str:
    """The origin of a tolerance as Markdown, with γₙ written as in the prose."""
    return plain(checks.text(basis, "basis", empty=True).replace("γ_n", "γₙ"))


def _fields(record: Any) -> dict:
    if is_dataclass(record):
        return asdict(record)
    if isinstance(record, Mapping):
        return dict(record)
    raise TypeError(f"record must be a Record or a mapping, got {type(record).__name__}")


def comparison_text(r: Mapping) -> str:
    """Measured value against the target: ``3.1 × 10⁻¹⁶ ≤ 0 + 2.3 × 10⁻¹³``, numbers in bold."""
    measured, target, tolerance = (readable(r[k]) for k in ("measured", "target", "tolerance"))
    relation = RELATIONS[r["comparison"]]
    if r["comparison"] == "close":
        return f"measured **{measured}** ≈ **{target}** within **{tolerance}**"
    if r["comparison"] == "differs":
        return f"measured **{measured}** ≠ **{target}** by more than **{tolerance}**"
    if r["tolerance"] == 0:
        return f"measured **{measured}** {relation} bound **{target}**"
    sign = "+" if r["comparison"] == "at_most" else "−"
    return f"measured **{measured}** {relation} **{target}** {sign} **{tolerance}**"


ESTIMATE = "estimate:"


def is_estimate(r: Mapping) -> bool:
    """Whether the record's tolerance is a first-order estimate, not a bound: its basis starts
    with ``estimate:`` (CONTRIBUTING, "Claims")."""
    return r["basis"].lstrip().lower().startswith(ESTIMATE)


def origin_text(r: Mapping) -> str:
    """The basis as Markdown, without the ``estimate:`` prefix (the label says it)."""
    basis = r["basis"].lstrip()
    return basis_text(basis[len(ESTIMATE):].lstrip() if is_estimate(r) else basis)


def origin_label(r: Mapping) -> str:
    """What the basis gives: the tolerance (or an estimated one), or, for a one-sided check against
    a bound, the bound."""
    if r["comparison"] in ("at_most", "at_least") and r["tolerance"] == 0:
        return "bound"
    return "estimated tolerance" if is_estimate(r) else "tolerance"


def claim_block(record: Any, page_href: str | None = None) -> str:
    """One claim or erratum as a Markdown block (see the module docstring). An erratum links to its
    section of the errata page, or, given ``page_href`` (on the errata page), to its own page."""
    r = _fields(record)
    if page_href is not None:
        page_href = checks.text(page_href, "page_href")
    verdict = "✓" if r["passed"] else "✗"
    state = "pass" if r["passed"] else "fail"
    if r["kind"] == "erratum":
        head = f"**{verdict} Erratum.** {prose(r['statement'])}"
        if not r["passed"]:
            head += " **Does not hold.**"
        printed = f"Printed: {prose(r['printed'])}, which would give **{readable(r['printed_target'])}**."
        lines = [head, "", printed, ""]
    else:
        head = f"**{verdict} Claim.** {prose(r['statement'])}"
        lines = [head + ("" if r["passed"] else " **Does not hold.**"), ""]
    link = ""
    if r["kind"] == "erratum":
        link = (f' · <a class="erratum-page" href="{page_href}">on its page</a>' if page_href else
                f' · <a class="erratum-list" href="errata.html#errata-{r["page"]}">all errata</a>')
    lines += [
        f"{comparison_text(r)} · {origin_label(r)}: {origin_text(r)} · *{plain(r['source'])}*{link}",
        "",
        '<details class="claim-record"><summary>record</summary>',
        "",
        *record_list(r),
        "",
        "</details>",
    ]
    return "\n".join([f'<div class="claim claim-{state}" id="{r["id"]}">', "", *lines, "", "</div>"])


def record_list(r: Mapping) -> list[str]:
    """The full record as a Markdown list: every field, numbers at full precision."""
    fields = [
        ("id", f"`{r['id']}`"),
        ("kind", f"{r['kind']}, {r['comparison']}: {plain(COMPARISONS[r['comparison']])}"),
        ("measured", repr(r["measured"])),
        ("target", repr(r["target"])),
        ("tolerance", f"{r['tolerance']!r} ({basis_text(r['basis'])})"),
    ]
    if r["kind"] == "erratum":
        fields.append(("printed statement gives", repr(r["printed_target"])))
    fields += [
        ("source", plain(r["source"])),
        ("run", f"page {r['page']}, profile {r['profile']}, seed {r.get('seed')}, device {r['device']}, "
                f"{r['seconds']:.2f} s"),
    ]
    return [f"- {name}: {value}" for name, value in fields]


def claims_table(records: Iterable[Any], href: Callable[[dict], str] | None = None) -> str:
    """A table of records: verdict, claim (statement and source), measured, target, tolerance.

    With ``href`` (record → URL), each statement ends with the claim's id, linked there. On narrow
    screens the stylesheet stacks the cells of a row into labelled lines.
    """
    rows = ["| | claim | measured | target | tolerance and its origin |", "|---|---|---|---|---|"]
    for record in records:
        r = _fields(record)
        statement = prose(r["statement"])
        if r["kind"] == "erratum":
            statement = (f"**Erratum.** {statement} (printed: {prose(r['printed'])}, which gives "
                         f"{readable(r['printed_target'])})")
        claim = f"{statement} · *{plain(r['source'])}*"
        if href is not None:
            claim += f' · <a class="claim-id" href="{href(r)}">{r["id"]}</a>'
        origin = f"{readable(r['tolerance'])}: {origin_text(r)}"
        if is_estimate(r):
            origin = f"{readable(r['tolerance'])}, estimated: {origin_text(r)}"
        if origin_label(r) == "bound":
            origin = f"the bound: {basis_text(r['basis'])}"
        verdict = "✓" if r["passed"] else "**✗ FAIL**"
        cells = [verdict, claim, readable(r["measured"]), f"{RELATIONS[r['comparison']]} {readable(r['target'])}",
                 origin]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(['<div class="claims-table">', "", *rows, "", "</div>"])


def show_numpy_scalars_plainly() -> None:
    """In a notebook, a NumPy scalar is displayed, and glued, as the plain number (``638.7``, not
    ``np.float64(638.7)``, which a ``{glue:text}`` format cannot read and the build rejects)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import numpy as np

    plain = shell.display_formatter.formatters["text/plain"]
    for kind, python in ((np.floating, float), (np.integer, int), (np.bool_, bool)):
        # each concrete type: IPython stops at the first class of the MRO that defines __repr__
        for scalar in {t for t in np.sctypeDict.values() if issubclass(t, kind)}:
            plain.for_type(scalar, lambda value, printer, cycle, python=python: printer.text(repr(python(value))))
