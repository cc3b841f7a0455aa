"""Claims and errata: measured numbers held against the theory, recorded and enforced.

A *claim* compares a measured value with a target under a comparison and a tolerance whose
origin is stated (``basis``): machine precision, a Monte-Carlo standard error, a solver
tolerance. An *erratum* holds one measured value against a printed statement (which must fail)
and a corrected one (which must hold). Each record

* shows itself as a short Markdown block in a notebook (:func:`dropnb.book.render.claim_block`: the
  verdict, the statement, measured against target with the tolerance and its origin, the full
  record one click away) and prints one line elsewhere,
* is glued into the notebook under its id (``myst_nb.glue``) so the prose can quote it,
* is appended as one JSON object to ``<claims dir>/<page>.jsonl``,

and a failing record raises :class:`ClaimFailed`, which stops the notebook, the book build and
the tests.
"""

from __future__ import annotations

import json
import re
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable


from .. import checks
from .layout import PROFILES, claims_dir
from .render import COMPARISONS, RELATIONS, claim_block, claims_table

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class ClaimFailed(AssertionError):
    """A claim did not hold, or an erratum's printed statement did not fail."""


def holds(measured: float, target: float, comparison: str, tolerance: float) -> bool:
    """Whether ``measured`` stands in ``comparison`` to ``target`` within ``tolerance`` (finite numbers,
    the tolerance ≥ 0)."""
    measured, target = checks.number(measured, "measured"), checks.number(target, "target")
    tolerance = checks.nonnegative(tolerance, "tolerance")
    if comparison == "close":
        return abs(measured - target) <= tolerance
    if comparison == "at_most":
        return measured <= target + tolerance
    if comparison == "at_least":
        return measured >= target - tolerance
    if comparison == "differs":
        return abs(measured - target) > tolerance
    raise ValueError(f"comparison must be one of {sorted(COMPARISONS)}, got {comparison!r}")


@dataclass
class Record:
    """One claim or erratum, as written to its page's JSON-lines file.

    ``chapter`` is the id prefix (the chapter the claim belongs to), ``page`` the page that
    records it (the file stem of ``chapters/<page>.md`` and of ``<page>.jsonl``); they differ where
    a chapter is split over several pages.
    """

    id: str
    chapter: str
    page: str
    kind: str
    source: str
    statement: str
    measured: float
    target: float
    comparison: str
    tolerance: float
    basis: str
    passed: bool
    profile: str
    seconds: float
    device: str
    printed: str | None = None
    printed_target: float | None = None
    seed: int | None = None

    def _ipython_display_(self) -> None:
        """Show nothing when a cell ends with a claim: it is already shown."""

    def line(self) -> str:
        """The printed one-line summary."""
        verdict = "PASS" if self.passed else "FAIL"
        relation = RELATIONS[self.comparison]
        text = (
            f"{verdict} {self.id}: {self.statement} — measured {self.measured:.6g} "
            f"{relation} {self.target:.6g} (tolerance {self.tolerance:.2g}: {self.basis}) [{self.source}]"
        )
        if self.kind == "erratum":
            text += f"; printed statement ({self.printed}) gives {self.printed_target:.6g}"
        return text


# The open Claims of this process, by records file: one page run writes through one object.
_OPEN: "weakref.WeakValueDictionary[Path, Claims]" = weakref.WeakValueDictionary()


class Claims:
    """The claims of one page run.

    ``page`` names the page (the file stem of ``chapters/<page>.md``): it keys the records file
    ``<claims dir>/<page>.jsonl``, the ledger and the golden. ``prefix`` (default: ``page``) is
    what every claim id must start with, followed by a dot: the pages of a chapter that is split
    over several pages keep the chapter's ids, so ``Claims("landscape-networks-homogeneous", …,
    prefix="landscape-networks")`` records ids ``landscape-networks.…``. A record's ``chapter`` is
    the prefix and its ``page`` the page.

    Creating it empties ``<claims dir>/<page>.jsonl``; each claim or erratum then appends a
    record. ``seconds`` defaults to the time since the previous record (or since creation).

    One page run, one object: while a ``Claims`` for the same file is alive in this process, a
    second one is refused (ValueError), so that it cannot erase records the first one keeps
    writing. ``restart=True`` (what :func:`dropnb.setup` passes, so that a notebook's setup cell can
    run again) starts the page's records afresh and retires the earlier object: recording on it
    then raises RuntimeError.
    """

    def __init__(self, page: str, profile: str, device: str = "cpu", directory: Path | None = None,
                 seed: int | None = None, prefix: str | None = None, restart: bool = False):
        if not isinstance(page, str) or not _ID.match(page):
            raise ValueError(f"page must be a lower-case identifier, got {page!r}")
        prefix = page if prefix is None else prefix
        if not isinstance(prefix, str) or not _ID.match(prefix):
            raise ValueError(f"prefix must be a lower-case identifier, got {prefix!r}")
        profile, device = checks.choice(profile, "profile", PROFILES), checks.text(device, "device")
        seed = None if seed is None else checks.integer(seed, "seed", minimum=0)
        self.page = page
        self.prefix = prefix
        self.profile = profile
        self.device = device
        self.seed = seed
        self.records: list[Record] = []
        self.path = Path(directory or claims_dir()) / f"{page}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = self.path.resolve()
        earlier = _OPEN.get(key)
        if earlier is not None and not earlier._retired:
            if not checks.flag(restart, "restart"):
                raise ValueError(f"page {page!r} already has open claims in this process (writing {self.path}); a "
                                 "second Claims would erase their records: pass restart=True to start the page's "
                                 "records again")
            earlier._retired = True
        self._retired = False
        _OPEN[key] = self
        self.path.write_text("")
        self._clock = time.perf_counter()

    def claim(
        self,
        id: str,
        *,
        source: str,
        statement: str,
        measured: float,
        target: float,
        tolerance: float,
        basis: str,
        comparison: str = "close",
        seconds: float | None = None,
    ) -> Record:
        """Record ``measured`` against ``target``; raise :class:`ClaimFailed` if it does not hold.

        A comparison that cannot separate is refused (ValueError): a ``close`` tolerance of at least a
        non-zero |target| (it accepts 0 as well), a ``differs`` tolerance of 0 (one ulp would pass)."""
        measured, target, tolerance = self._check_numbers(measured, target, tolerance)
        comparison = checks.choice(comparison, "comparison", tuple(RELATIONS))
        if comparison == "close" and target != 0 and tolerance >= abs(target):
            raise ValueError(f"tolerance must be below |target| = {abs(target):.3g} for a 'close' claim, got "
                             f"{tolerance:.3g}: it accepts 0 as well as the target")
        if comparison == "differs" and tolerance == 0:
            raise ValueError("tolerance must be positive for a 'differs' claim, got 0: a difference of one "
                             "rounding would pass it")
        for text, name in ((source, "source"), (statement, "statement"), (basis, "basis")):
            checks.text(text, name)
        passed = holds(measured, target, comparison, tolerance)
        return self._record(
            Record(id=self._new_id(id), chapter=self.prefix, page=self.page, kind="claim", source=source,
                   statement=statement, measured=measured, target=target, comparison=comparison,
                   tolerance=tolerance, basis=basis, passed=passed, profile=self.profile,
                   seconds=self._seconds(seconds), device=self.device, seed=self.seed)
        )

    def erratum(
        self,
        id: str,
        *,
        source: str,
        printed: str,
        corrected: str,
        measured: float,
        printed_target: float,
        corrected_target: float,
        tolerance: float,
        basis: str,
        seconds: float | None = None,
    ) -> Record:
        """Record a correction: ``measured`` must miss ``printed_target`` and match ``corrected_target``.

        Both comparisons use the same tolerance, so the evidence separates the two statements: the two
        targets must lie more than twice the tolerance apart (ValueError otherwise), so that every
        measurement that matches the correction refutes the printed statement.
        """
        measured, corrected_target, tolerance = self._check_numbers(measured, corrected_target, tolerance,
                                                                    "corrected_target")
        printed_target = checks.number(printed_target, "printed_target")
        if abs(printed_target - corrected_target) <= 2 * tolerance:
            raise ValueError(f"printed_target and corrected_target must lie more than twice the tolerance "
                             f"({tolerance:.3g}) apart, got {printed_target:.6g} and {corrected_target:.6g}: "
                             "no measurement could tell the two statements apart")
        for text, name in ((source, "source"), (printed, "printed"), (corrected, "corrected"), (basis, "basis")):
            checks.text(text, name)
        passed = holds(measured, corrected_target, "close", tolerance) and holds(
            measured, printed_target, "differs", tolerance
        )
        return self._record(
            Record(id=self._new_id(id), chapter=self.prefix, page=self.page, kind="erratum", source=source,
                   statement=corrected, measured=measured, target=corrected_target, comparison="close",
                   tolerance=tolerance, basis=basis, passed=passed, profile=self.profile,
                   seconds=self._seconds(seconds), device=self.device, printed=printed,
                   printed_target=printed_target, seed=self.seed)
        )

    def verdicts(self) -> str:
        """The verdict line of every record so far (:func:`verdict_line`), one per line."""
        return "\n".join(verdict_line(record) for record in self.records)

    def table(self):
        """The page's closing summary (Markdown): the totals, and every record in a table one click away."""
        from IPython.display import Markdown

        return Markdown(summary(self.records))

    def _check_numbers(self, measured: Any, target: Any, tolerance: Any,
                       target_name: str = "target") -> tuple[float, float, float]:
        """Finite numbers only: an infinite or NaN value never passes a claim (a bound of ∞ would
        hold for anything), so it is refused before anything is recorded."""
        return (checks.number(measured, "measured"), checks.number(target, target_name),
                checks.nonnegative(tolerance, "tolerance"))

    def _new_id(self, id: str) -> str:
        if not isinstance(id, str) or not _ID.match(id) or not id.startswith(self.prefix + "."):
            raise ValueError(f"id must be a lower-case identifier starting with '{self.prefix}.', got {id!r}")
        if any(r.id == id for r in self.records):
            raise ValueError(f"id {id!r} is already recorded on this page")
        return id

    def _seconds(self, seconds: float | None) -> float:
        now = time.perf_counter()
        elapsed = now - self._clock if seconds is None else checks.nonnegative(seconds, "seconds")
        self._clock = now
        return elapsed

    def _record(self, record: Record) -> Record:
        if self._retired:
            raise RuntimeError(f"a newer Claims for page {self.page!r} started its records again: record on that "
                               "one (the object dropnb.setup returned last)")
        self.records.append(record)
        with self.path.open("a") as handle:
            handle.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
        _glue(record.id, record.measured)
        _show(record)
        if not record.passed:
            raise ClaimFailed(record.line())
        self._clock = time.perf_counter()
        return record


class ClaimView:
    """A record as a notebook shows it: a Markdown block, with the one-line summary as plain text."""

    def __init__(self, record: Record):
        self.record = record

    def _repr_markdown_(self) -> str:
        return claim_block(self.record)

    def __repr__(self) -> str:
        return self.record.line()


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of the notebooks
        return False
    return get_ipython() is not None


def _show(record: Record) -> None:
    """Display the record's block inside a kernel; print its line elsewhere."""
    if _in_kernel():
        from IPython.display import display

        display(ClaimView(record))
    else:
        print(record.line())


def _glue(name: str, value: float) -> None:
    """Glue ``value`` under ``name`` when running inside a kernel; a no-op elsewhere."""
    if not _in_kernel():
        return
    from myst_nb import glue

    glue(name, value, display=False)


def load_records(directory: Path, chapters: Iterable[str] | None = None) -> dict[str, list[dict]]:
    """The records per page found in ``directory`` (all ``*.jsonl``, or the named pages)."""
    directory = Path(directory)
    names = sorted(p.stem for p in directory.glob("*.jsonl")) if chapters is None else list(chapters)
    records = {}
    for name in names:
        path = directory / f"{name}.jsonl"
        if path.is_file():
            records[name] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def verdict_line(record: Record | dict) -> str:
    """``"PASS <id>: measured <value> <relation> <target>"``: a record's verdict in one line."""
    record = asdict(record) if isinstance(record, Record) else record
    verdict = "PASS" if record["passed"] else "FAIL"
    return (f"{verdict} {record['id']}: measured {record['measured']:.6g} {RELATIONS[record['comparison']]} "
            f"{record['target']:.6g}")


def totals(records: Iterable[Record | dict]) -> str:
    """``"30 claims and 2 errata; all hold"`` (or how many fail)."""
    records = [asdict(r) if isinstance(r, Record) else r for r in records]
    errata = sum(r["kind"] == "erratum" for r in records)
    failed = sum(not r["passed"] for r in records)
    counted = f"{len(records) - errata} claim{'s' * (len(records) - errata != 1)}"
    if errata:
        counted += f" and {errata} errat{'a' if errata != 1 else 'um'}"
    return f"{counted}; " + ("all hold" if not failed else f"**{failed} fail**")


def summary(records: Iterable[Record | dict]) -> str:
    """A page's closing summary: its totals, with the table of its records behind one click."""
    records = list(records)
    return "\n".join([
        '<details class="claims-summary">',
        f"<summary>{totals(records).replace('**', '')} (show the table)</summary>",
        "",
        claims_table(records),
        "",
        "</details>",
    ])
