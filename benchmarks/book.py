"""Wall time of every chapter at a profile: each alone, then two chapters at once.

Each chapter runs in its own process exactly as `make chapter` runs it, with this environment's
thread settings (or `--threads N`). Alone, one chapter runs at a time; together, two run side by
side for the whole pass, so each chapter's time is taken while another one runs. The table gives
both times and their ratio, the claims each run recorded, the device, the peak GPU memory (where a
GPU ran) and the three most expensive cells of the run alone (papermill's per-cell durations).
The JSON file (``--json``) holds one object per chapter: ``chapter``, ``profile``, ``seconds``,
``device``, ``claims_passed``, ``claims_total``, ``returncode``, ``peak_gpu_bytes``,
``slowest_cells`` and ``seconds_two_at_once``; the book's reproducibility page renders the files
committed as ``benchmarks/results/<profile>-<device>.json``.

Usage: python benchmarks/book.py [--profile quick] [--threads N] [--alone-only] [--json FILE] [CHAPTER ...]
At paper scale on one GPU: python benchmarks/book.py --profile full --alone-only --json benchmarks/results/full-h100.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import nbformat

from dropnb.config import PROFILES
from dropnb.threads import thread_environment
from dropnb.notebooks import Job, chapters_with_claims, run_jobs


PEAK_FILE = "peak_gpu_bytes.txt"
# Run before the chapter: after every cell, write the peak GPU memory so far (nothing without a GPU).
PEAK_HOOK = """
import torch as _torch
if _torch.cuda.is_available():
    def _write_peak(result, _path={path!r}):
        with open(_path, "w") as handle:
            handle.write(str(_torch.cuda.max_memory_allocated()))
    get_ipython().events.register("post_run_cell", _write_peak)
"""


def slowest_cells(notebook: Path, count: int = 3) -> list[dict]:
    """The ``count`` cells of an executed notebook that took longest: seconds, index in the chapter (the
    first cell, the harness's hook, left out) and first line."""
    if not notebook.is_file():
        return []
    cells = [(cell.metadata.get("papermill", {}).get("duration") or 0.0, index, cell.source)
             for index, cell in enumerate(nbformat.read(notebook, as_version=4).cells[1:]) if cell.cell_type == "code"]

    def first_line(source: str) -> str:
        return next((line for line in source.splitlines() if line.strip() and not line.startswith(":")), "")

    return [{"seconds": round(seconds, 2), "cell": index, "first_line": first_line(source)[:60]}
            for seconds, index, source in sorted(cells, reverse=True)[:count]]


def timings(chapters: list[str], profile: str, parallel: int, environment: dict[str, str]) -> dict[str, dict]:
    """Seconds, records, passes, peak GPU memory and slowest cells of each chapter, ``parallel`` at a time."""
    with tempfile.TemporaryDirectory() as scratch:
        folders = {name: Path(scratch) / name for name in chapters}
        jobs = [Job(name, folders[name], profile=profile, environment=environment,
                    prepend=PEAK_HOOK.format(path=str((folders[name] / PEAK_FILE).resolve())))
                for name in chapters]
        rows = {}
        for o in run_jobs(jobs, parallel):
            peak = folders[o.job.chapter] / PEAK_FILE
            rows[o.job.chapter] = {
                "seconds": o.seconds, "device": o.records[0]["device"] if o.records else None,
                "claims_total": len(o.records), "claims_passed": sum(r["passed"] for r in o.records),
                "returncode": o.returncode, "peak_gpu_bytes": int(peak.read_text()) if peak.is_file() else None,
                "slowest_cells": slowest_cells(folders[o.job.chapter] / f"{o.job.chapter}.ipynb")}
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="default: every chapter in the ledger")
    parser.add_argument("--profile", choices=PROFILES, default="quick")
    parser.add_argument("--threads", type=int, help="threads of every numeric library (default: the environment's)")
    parser.add_argument("--alone-only", action="store_true", help="skip the pass with two chapters at once")
    parser.add_argument("--json", type=Path, help="also write the table as JSON")
    args = parser.parse_args()
    chapters = args.chapters or chapters_with_claims()
    environment = thread_environment(args.threads) if args.threads else {}
    alone = timings(chapters, args.profile, 1, environment)
    together = {} if args.alone_only else timings(chapters, args.profile, 2, environment)
    print(f"profile {args.profile}, threads {args.threads or 'as in the environment'}")
    print(f"{'chapter':<20} {'alone (s)':>10} {'two at once (s)':>16} {'ratio':>6}  claims")
    for name in chapters:
        a, t = alone[name], together.get(name)
        both = f"{t['seconds']:16.1f} {t['seconds'] / a['seconds']:6.2f}" if t else f"{'':16} {'':6}"
        peak = f"{a['peak_gpu_bytes'] / 2**30:.1f} GiB" if a["peak_gpu_bytes"] is not None else "no GPU"
        cells = ", ".join(f"cell {c['cell']} {c['seconds']:.0f} s" for c in a["slowest_cells"])
        print(f"{name:<20} {a['seconds']:10.1f} {both}  {a['claims_passed']}/{a['claims_total']}  {a['device']}, "
              f"{peak}; slowest: {cells}")
    total = sum(a["seconds"] for a in alone.values())
    print(f"{'total':<20} {total:10.1f}" + (f" {sum(t['seconds'] for t in together.values()):16.1f}" if together else ""))
    if args.json:
        rows = [{"chapter": name, "profile": args.profile, **alone[name],
                 "seconds_two_at_once": together.get(name, {}).get("seconds")} for name in chapters]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
