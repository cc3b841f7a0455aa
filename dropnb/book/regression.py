"""Regression of the chapters' claim records against committed golden records.

A golden is ``tests/golden/<chapter>.json``: the chapter's records at the ``quick`` profile and
its default seed, reduced to the fields below. A new run matches its golden when

* the records have the same ids in the same order, with the same kind, profile, seed,
  comparison and verdict;
* each basis is the same text: a basis names the constants its tolerance rests on (sample sizes,
  numbers of standard errors, family-wise levels, operation counts), so a changed constant
  changes it;
* for a two-sided claim (``close``, and every erratum), the target lies within the golden's
  tolerance of the golden's target (a constant or a closed form: a claim whose target moved by
  more than its own tolerance is another claim), and the distance of the measured value to its
  target moved by at most the claim's tolerance: a few standard errors for a Monte-Carlo
  estimate, the rounding or solver bound for a computed quantity;
* a one-sided claim (``at_most``, ``at_least``, ``differs``) keeps its verdict, and its measured
  value stays within the band of :func:`one_sided_band` of the golden's: one unit for a
  standardized statistic (a z-score or t statistic against its critical value, a count in a sign
  test), else half its golden distance from the target, or its tolerance if that is larger. The
  value keeps at least half of its margin and gains at most as much: another code path moves a
  solver's end point by the solver's accuracy, which changes a margin of thousands of rounding
  units by a few per cent and a value at rounding level by less than its bound, while a wrong
  formula moves it by orders of magnitude;
* a Monte-Carlo tolerance (its basis names standard errors) stays within a factor of two of the
  golden's: at the same seed an estimated standard error changes by rounding only, and a wrong
  one moves by orders of magnitude. A rounding tolerance is left free: it scales with the norm of
  a solver's end point, which another code path may move along a set of equal minima.

These bands hold on any machine with the same pinned libraries: only rounding differs between
numeric code paths (BLAS kernels, SIMD loops, thread counts), and every claim's tolerance
covers its rounding.

Command line (from the book's top folder)::

    python -m dropnb.book.regression refresh --records DIR [CHAPTER ...]   # write goldens from records
    python -m dropnb.book.regression compare --records DIR [CHAPTER ...]   # compare records with goldens
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Iterable

from .. import checks
from .claims import load_records
from .layout import GOLDENS, pages_with_claims

FIELDS = ("id", "kind", "profile", "seed", "comparison", "passed", "basis", "measured", "target", "tolerance",
          "printed_target")
EXACT_FIELDS = ("kind", "profile", "seed", "comparison", "passed", "basis")
# A basis that names a standardized statistic: its measured value is in units of its standard deviation.
STATISTIC = re.compile(r"z-score|t test|critical value|sign test", re.IGNORECASE)
# A basis that names standard errors: its tolerance is a Monte-Carlo estimate, fixed by the seed.
STANDARD_ERRORS = re.compile(r"standard error", re.IGNORECASE)
TOLERANCE_FACTOR = 2.0


def golden_record(record: dict) -> dict:
    """The fields of ``record`` that a golden keeps."""
    return {name: record.get(name) for name in FIELDS}


def write_golden(chapter: str, records: list[dict], folder: Path = GOLDENS) -> Path:
    """Write the golden of ``chapter`` (one record a line, so that a diff shows what moved)."""
    chapter = checks.text(chapter, "chapter")
    if not records:
        raise ValueError(f"records of chapter {chapter!r} must not be empty")
    path = Path(folder) / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join("  " + json.dumps(golden_record(r), ensure_ascii=False) for r in records)
    path.write_text(f"[\n{lines}\n]\n")
    return path


def read_golden(chapter: str, folder: Path = GOLDENS) -> list[dict]:
    """The committed golden records of ``chapter``."""
    chapter = checks.text(chapter, "chapter")
    path = Path(folder) / f"{chapter}.json"
    if not path.is_file():
        raise ValueError(f"chapter {chapter!r} has no golden at {path}")
    return json.loads(path.read_text())


def _within(value: float | None, golden: float | None, band: float) -> bool:
    if value is None or golden is None:
        return value is golden
    return abs(value - golden) <= band


def one_sided_band(golden: dict) -> float:
    """How far the measured value of a one-sided ``golden`` record may move: 1 for a standardized
    statistic (its basis names z-scores, a t or sign test or a critical value), else
    max(tolerance, |measured − target|/2)."""
    if STATISTIC.search(golden["basis"]):
        return 1.0
    return max(golden["tolerance"], abs(golden["measured"] - golden["target"]) / 2)


def record_differences(golden: dict, record: dict) -> list[str]:
    """How ``record`` departs from ``golden`` (same id) beyond the bands above; empty if it does not."""
    rid, band = golden["id"], golden["tolerance"]
    problems = [f"{rid}: {name} {record.get(name)!r}, golden {golden[name]!r}"
                for name in EXACT_FIELDS if record.get(name) != golden[name]]
    tolerance = record.get("tolerance")
    if STANDARD_ERRORS.search(golden["basis"]) and tolerance is not None \
            and not band / TOLERANCE_FACTOR <= tolerance <= band * TOLERANCE_FACTOR:
        problems.append(f"{rid}: tolerance {tolerance:.6g} is not within a factor {TOLERANCE_FACTOR:g} of the "
                        f"golden's {band:.6g}")
    if golden["comparison"] != "close":
        one_sided = one_sided_band(golden)
        if not _within(record.get("measured"), golden["measured"], one_sided):
            problems.append(f"{rid}: measured {record.get('measured')!r} moved by more than {one_sided:.3g} "
                            f"from the golden's {golden['measured']!r}")
        return problems
    for name in ("target", "printed_target"):
        if not _within(record.get(name), golden.get(name), band):
            problems.append(f"{rid}: {name} {record.get(name)!r} is not within the tolerance {band:.3g} "
                            f"of the golden {golden.get(name)!r}")
    residual = record["measured"] - record["target"]
    golden_residual = golden["measured"] - golden["target"]
    if abs(residual - golden_residual) > band:
        problems.append(f"{rid}: measured − target = {residual:.6g} moved by more than the tolerance "
                        f"{band:.3g} from the golden's {golden_residual:.6g}")
    return problems


def differences(golden: list[dict], records: list[dict]) -> list[str]:
    """How a chapter's ``records`` depart from its ``golden``; an empty list means they match."""
    golden_ids, ids = [g["id"] for g in golden], [r["id"] for r in records]
    problems = []
    if golden_ids != ids:
        missing = [i for i in golden_ids if i not in ids]
        unexpected = [i for i in ids if i not in golden_ids]
        problems.append(f"ids differ from the golden: missing {missing}, unexpected {unexpected}"
                        + ("" if missing or unexpected else ", order changed"))
    by_id = {r["id"]: r for r in records}
    for g in golden:
        if g["id"] in by_id:
            problems += record_differences(g, by_id[g["id"]])
    return problems


def compare_folder(records_dir: Path, chapters: Iterable[str], folder: Path = GOLDENS) -> dict[str, list[str]]:
    """The differences of each chapter's records in ``records_dir`` from its golden."""
    found = load_records(records_dir, chapters)
    return {chapter: differences(read_golden(chapter, folder), found.get(chapter, [])) for chapter in chapters}


def verdict(chapter: str, problems: list[str]) -> str:
    """One readable report of a chapter's comparison with its golden."""
    chapter = checks.text(chapter, "chapter")
    return f"{chapter}: " + ("matches its golden" if not problems else "\n  ".join(["differs:", *problems]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dropnb.book.regression", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("refresh", "compare"))
    parser.add_argument("chapters", nargs="*", help="default: every chapter in the ledger")
    parser.add_argument("--records", type=Path, required=True, help="folder of <chapter>.jsonl records")
    args = parser.parse_intermixed_args(argv)  # options before, between or after the chapters
    chapters = args.chapters or pages_with_claims()
    if args.command == "refresh":
        found = load_records(args.records, chapters)
        for chapter in chapters:
            records = found.get(chapter, [])
            if records and not all(r["profile"] == "quick" and r["passed"] for r in records):
                raise SystemExit(f"{chapter}: a golden is made from a passing run at the quick profile")
            print(f"wrote {write_golden(chapter, records)}")
        return 0
    failed = 0
    for chapter, problems in compare_folder(args.records, chapters).items():
        failed += bool(problems)
        print(verdict(chapter, problems))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
