"""Wall time of every page at a profile: each alone, then two pages at once.

Each page runs in its own process exactly as `make chapter` runs it, with this environment's thread
settings (or `--threads N`). Alone, one page runs at a time; together, two run side by side for the
whole pass, so each page's time is taken while another one runs. The table gives both times and
their ratio, the claims each run recorded, the device, the peak GPU memory (where a GPU ran) and the
three most expensive cells of the run alone (papermill's per-cell durations). The JSON file
(``--json``) holds one row per page (:mod:`dropnb.book.timing`), with ``seconds_two_at_once`` added; the
book's reproducibility page renders the files committed as ``benchmarks/results/<profile>-<device>.json``.
Paper scale on a GPU machine has its own script, ``benchmarks/gpu.sh`` (see CONTRIBUTING.md).

Usage: python benchmarks/book.py [--profile quick] [--threads N] [--alone-only] [--limit S] [--json FILE] [PAGE ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from dropnb.book import timing
from dropnb.book.layout import PROFILES, pages_with_claims
from dropnb.book.notebooks import run_jobs
from dropnb.book.threads import thread_environment


def timings(pages: list[str], profile: str, parallel: int, environment: dict[str, str],
            limit: float | None = None) -> dict[str, dict]:
    """The row of each page (:func:`dropnb.book.timing.row`), ``parallel`` pages at a time."""
    with tempfile.TemporaryDirectory() as scratch:
        jobs = [timing.probed_job(name, Path(scratch) / name, profile, environment=environment, timeout=limit)
                for name in pages]
        return {o.job.chapter: timing.row(o) for o in run_jobs(jobs, parallel)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="default: every page in the ledger")
    parser.add_argument("--profile", choices=PROFILES, default="quick")
    parser.add_argument("--threads", type=int, help="threads of every numeric library (default: the environment's)")
    parser.add_argument("--alone-only", action="store_true", help="skip the pass with two pages at once")
    parser.add_argument("--limit", type=float, help="seconds a page may run before it is stopped (default: none)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args()
    pages = args.pages or pages_with_claims()
    environment = thread_environment(args.threads) if args.threads else {}
    alone = timings(pages, args.profile, 1, environment, args.limit)
    together = {} if args.alone_only else timings(pages, args.profile, 2, environment, args.limit)
    print(f"profile {args.profile}, threads {args.threads or 'as in the environment'}")
    print(f"{'page':<34} {'alone (s)':>10} {'two at once (s)':>16} {'ratio':>6}  claims")
    for name in pages:
        a, t = alone[name], together.get(name)
        both = f"{t['seconds']:16.1f} {t['seconds'] / a['seconds']:6.2f}" if t else f"{'':16} {'':6}"
        peak = f"{a['peak_gpu_bytes'] / 2**30:.1f} GiB" if a["peak_gpu_bytes"] is not None else "no GPU"
        cells = ", ".join(f"cell {c['cell']} {c['seconds']:.0f} s" for c in a["slowest_cells"])
        stopped = " STOPPED at the limit" if a["timed_out"] else ""
        print(f"{name:<34} {a['seconds']:10.1f} {both}  {a['claims_passed']}/{a['claims_total']}  {a['device_name']}, "
              f"{peak}; slowest: {cells}{stopped}")
    total = sum(a["seconds"] for a in alone.values())
    print(f"{'total':<34} {total:10.1f}" + (f" {sum(t['seconds'] for t in together.values()):16.1f}" if together else ""))
    if args.json:
        timing.write_rows(args.json, [alone[name] | {"seconds_two_at_once": together.get(name, {}).get("seconds")}
                                      for name in pages])


if __name__ == "__main__":
    main()
