"""Paper scale on one GPU: run pages at `full` one at a time within a time budget, merge their rows, plan.

    python benchmarks/gpu.py run [--budget 500] [--limit 600] [--out _build/gpu] [PAGE ...]
    python benchmarks/gpu.py merge ROWS.jsonl ... [--into FILE] [--check]
    python benchmarks/gpu.py plan [--budget 500]

``run`` (what ``benchmarks/gpu.sh`` calls on a bare machine after installing the GPU kit) executes each
page through the same runner as ``make chapter``, under its own time limit, and appends its row
(:mod:`dropnb.book.timing`) to ``OUT/rows.jsonl`` as soon as it ends; ``OUT/pages.tar.gz`` holds the executed
notebooks and claim records. Without pages it takes every page of the ledger, those without a complete
row in ``benchmarks/results/full-<gpu>.json`` first, cheapest first by the committed estimates, and
starts a page only when its estimate fits in what is left of the budget. ``merge`` puts rows into the
results files (one a profile and device), ``--check`` fails unless every row is complete. ``plan`` prints
the estimates (``benchmarks/results/estimates.json``), the measured rows and the pages one budget would
take.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from dropnb.book import timing
from dropnb.book.layout import PROFILES, ROOT, pages_with_claims
from dropnb.book.notebooks import run_job

BUDGET = 500.0  # seconds of pages in one command of at most 9 minutes, the kit's installation and the start left over
LIMIT = 600.0  # seconds: the budget of a page at `full` on one GPU (DESIGN.md)
ESTIMATES = timing.RESULTS / "estimates.json"


def results_path(profile: str) -> Path:
    """The results file of this machine's GPU (``cpu`` without one) at ``profile``."""
    return timing.results_file(profile, timing.gpu_name() or "")


def run(pages: list[str], named: bool, profile: str, budget: float, limit: float, out: Path) -> int:
    """Run ``pages``, each under min(``limit``, what is left of ``budget``), until the budget is spent.

    Pages ``named`` on the command line run in their order; otherwise in
    :func:`dropnb.book.timing.run_order`, each only when its estimate fits in what is left. Return the
    number of rows that are not complete."""
    out.mkdir(parents=True, exist_ok=True)
    rows_file, archive = out / "rows.jsonl", out / "pages.tar.gz"
    estimates = timing.load_estimates(ESTIMATES) if profile == "full" else {}
    order = list(pages) if named else timing.run_order(pages, timing.load_rows(results_path(profile)), estimates)
    start, failures = time.monotonic(), 0
    print(f"{timing.gpu_name() or 'no GPU'}; profile {profile}; budget {budget:.0f} s; order: {', '.join(order)}",
          flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        while order:
            left = budget - (time.monotonic() - start)
            page = (order[0] if left > 0 else None) if named else timing.next_page(order, estimates, left, limit)
            if page is None:
                break
            order.remove(page)
            outcome = run_job(timing.probed_job(page, Path(scratch) / page, profile, timeout=min(limit, left)))
            r = timing.row(outcome)
            failures += not timing.complete(r)
            with rows_file.open("a") as handle:
                handle.write(json.dumps(r) + "\n")
            with tarfile.open(archive, "w:gz") as tar:
                tar.add(scratch, arcname="pages")
            print(f"{page:<34} {r['seconds']:7.1f} s  {r['claims_passed']}/{r['claims_expected']} claims  "
                  f"{(r['peak_gpu_bytes'] or 0) / 2**30:5.1f} GiB  {verdict(r)}", flush=True)
    for page in order:
        print(f"{page:<34} not started: estimate {estimates.get(page, limit):.0f} s, "
              f"{max(0.0, budget - (time.monotonic() - start)):.0f} s left", flush=True)
    return failures


def verdict(r: dict) -> str:
    """``complete``, or why a row is not."""
    if timing.complete(r):
        return "complete"
    if r["timed_out"]:
        return f"stopped at its limit of {r['time_limit']:.0f} s"
    if r["returncode"]:
        return f"failed: {r['error'] or 'exit status ' + str(r['returncode'])}"
    return f"{r['claims_passed']} of {r['claims_expected']} claims held"


def merge(files: list[Path], into: Path | None, check: bool, every: bool) -> int:
    """Merge the rows of ``files`` into their results files (or ``into``). With ``check``, return 1 unless
    every row is complete; with ``every``, also unless every page of the ledger has a row."""
    rows = [r for path in files for r in timing.load_rows(path)]
    ledger = pages_with_claims()
    if not rows:
        print("no row in " + ", ".join(map(str, files)))
        return 1
    groups: dict[Path, list[dict]] = {}
    for r in rows:
        groups.setdefault(into or timing.results_file(r["profile"], r["device_name"] or ""), []).append(r)
    for path, new in groups.items():
        merged = timing.merge(timing.load_rows(path), new, ledger)
        timing.write_rows(path, merged)
        left = timing.missing(merged, ledger)
        print(f"{path.name}: {len(new)} new rows; {len(ledger) - len(left)} of {len(ledger)} pages complete"
              + (f"; still missing: {', '.join(left)}" if left else ""))
    bad = [f"{r['page']}: {verdict(r)}" for r in rows if not timing.complete(r)]
    bad += [f"{page}: no row" for page in ledger if every and page not in {r["page"] for r in rows}]
    print("\n".join(bad))
    return 1 if check and bad else 0


def plan(budget: float, limit: float) -> None:
    """Print every page's estimate, its measured row and the pages one command of ``budget`` would take."""
    ledger, estimates = pages_with_claims(), timing.load_estimates(ESTIMATES)
    path = timing.RESULTS / "full-h200.json"
    measured = {r["page"]: r for r in timing.load_rows(path)}
    order = timing.run_order(ledger, list(measured.values()), estimates)
    taken, left = [], budget
    for page in order:
        if page in timing.missing(list(measured.values()), [page]) and estimates.get(page, limit) <= left:
            taken.append(page)
            left -= estimates.get(page, limit)
    print(f"| page | estimate on one H200 (s) | measured ({path.name}) | next command of {budget:.0f} s |")
    print("|---|---|---|---|")
    for page in ledger:
        r = measured.get(page)
        shown = "none" if r is None else f"{r['seconds']:.0f} s, {r['date'][:10]}" + ("" if timing.complete(r) else ", not complete")
        print(f"| {page} | {estimates.get(page, float('nan')):.0f} | {shown} | {'yes' if page in taken else ''} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    go = commands.add_parser("run", help="run pages at full within a budget")
    go.add_argument("pages", nargs="*", help="default: every page of the ledger")
    go.add_argument("--profile", choices=PROFILES, default="full")
    go.add_argument("--budget", type=float, default=BUDGET, help=f"seconds for all pages (default {BUDGET:.0f})")
    go.add_argument("--limit", type=float, default=LIMIT, help=f"seconds for one page (default {LIMIT:.0f})")
    go.add_argument("--out", type=Path, default=ROOT / "_build" / "gpu", help="rows.jsonl and pages.tar.gz")
    together = commands.add_parser("merge", help="merge rows into the results files")
    together.add_argument("files", nargs="+", type=Path)
    together.add_argument("--into", type=Path, help="one results file for every row (default: by profile and device)")
    together.add_argument("--check", action="store_true", help="fail unless every row is complete")
    together.add_argument("--all", action="store_true", help="with --check: and every page has a row")
    ahead = commands.add_parser("plan", help="estimates, measured rows, what the next command takes")
    ahead.add_argument("--budget", type=float, default=BUDGET)
    ahead.add_argument("--limit", type=float, default=LIMIT)
    args = parser.parse_args()
    if args.command == "run":
        unknown = sorted(set(args.pages) - set(pages_with_claims()))
        if unknown:
            raise SystemExit(f"pages must be pages of the ledger, got {unknown}")
        pages = args.pages or pages_with_claims()
        return 1 if run(pages, bool(args.pages), args.profile, args.budget, args.limit, args.out) else 0
    if args.command == "merge":
        return merge(args.files, args.into, args.check, args.all)
    if args.command == "plan":
        plan(args.budget, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
