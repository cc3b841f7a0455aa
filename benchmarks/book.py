"""Wall time of every chapter at a profile: each alone, then two chapters at once.

Each chapter runs in its own process exactly as `make chapter` runs it, with this environment's
thread settings (or `--threads N`). Alone, one chapter runs at a time; together, two run side by
side for the whole pass, so each chapter's time is taken while another one runs. The table gives
both times and their ratio, and the claims each run recorded.

Usage: python benchmarks/book.py [--profile quick] [--threads N] [--alone-only] [--json FILE] [CHAPTER ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from dropnb.config import PROFILES
from dropnb.threads import thread_environment
from dropnb.notebooks import Job, chapters_with_claims, run_jobs


def timings(chapters: list[str], profile: str, parallel: int, environment: dict[str, str]) -> dict[str, dict]:
    """Seconds, records and passes of each chapter, ``parallel`` chapters at a time."""
    with tempfile.TemporaryDirectory() as scratch:
        jobs = [Job(name, Path(scratch) / name, profile=profile, environment=environment) for name in chapters]
        return {o.job.chapter: {"seconds": o.seconds, "device": o.records[0]["device"] if o.records else None,
                                "claims_total": len(o.records),
                                "claims_passed": sum(r["passed"] for r in o.records), "returncode": o.returncode}
                for o in run_jobs(jobs, parallel)}


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
        print(f"{name:<20} {a['seconds']:10.1f} {both}  {a['claims_passed']}/{a['claims_total']}")
    total = sum(a["seconds"] for a in alone.values())
    print(f"{'total':<20} {total:10.1f}" + (f" {sum(t['seconds'] for t in together.values()):16.1f}" if together else ""))
    if args.json:
        rows = [{"chapter": name, "profile": args.profile, **alone[name],
                 "seconds_two_at_once": together.get(name, {}).get("seconds")} for name in chapters]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
