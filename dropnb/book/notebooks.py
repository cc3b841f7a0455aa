"""Run the book's chapters as notebooks: one at a time, or many at once in separate processes.

Command line (from the book's top folder)::

    python -m dropnb.book.notebooks run regularizer --profile full    # execute one chapter
    python -m dropnb.book.notebooks all --folder _build/quick          # every chapter, records into a folder
    python -m dropnb.book.notebooks seeds --count 10                  # every chapter under 10 other seeds
    python -m dropnb.book.notebooks paths                             # other numeric code paths vs goldens
    python -m dropnb.book.notebooks cache _build                      # the book's pages into the build's cache

A chapter is a MyST Markdown notebook ``chapters/<name>.md``; it is converted with jupytext and
executed by papermill with the working directory ``chapters/`` and the parameters ``profile``
and ``seed`` (``None``: the environment's, else the chapter's own). ``cache`` executes the pages
as the book build would (same reader, same environment) into jupyter-book's execution cache, one
process per core, so that the build which follows finds every page's outputs there instead of
executing the pages one after another.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import jupytext
import nbformat
import papermill
import psutil

from .. import checks
from .claims import load_records
from .config import resolve_profile
from .layout import CHAPTERS, CLAIMS_DIR_VARIABLE, PROFILES, ROOT, pages_with_claims
from .regression import compare_folder, verdict
from .threads import thread_environment


def load_chapter(name: str) -> nbformat.NotebookNode:
    """The chapter's notebook, read from its MyST Markdown source."""
    path = CHAPTERS / f"{name}.md"
    if not path.is_file():
        raise ValueError(f"name must be a chapter in {CHAPTERS}, got {name!r}")
    return jupytext.read(path)


@contextmanager
def _environment(**values: str | None):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update({key: value for key, value in values.items() if value is not None})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def execute(name: str, output: Path, profile: str = "quick", seed: int | None = None,
            claims_dir: Path | None = None, prepend: str | None = None,
            replace: tuple[str, str] | None = None) -> nbformat.NotebookNode:
    """Execute chapter ``name`` at ``profile`` into ``output`` (.ipynb); return the executed notebook.

    ``seed`` overrides the chapter's seed; ``claims_dir`` redirects its records. The tests change
    a chapter two ways: ``prepend`` is code run before it (a planted bug), ``replace = (old, new)``
    rewrites one piece of its code (a changed constant). Raises papermill's execution error when a
    cell fails.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    notebook = load_chapter(name)
    if prepend:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(prepend))
    if replace:
        cells = [cell for cell in notebook.cells if cell.cell_type == "code" and replace[0] in cell.source]
        if len(cells) != 1:
            raise ValueError(f"replace must name code found in exactly one cell of {name}, got {replace[0]!r}")
        cells[0].source = cells[0].source.replace(replace[0], replace[1])
    parameters = {"profile": profile} | ({} if seed is None else {"seed": int(seed)})
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / f"{name}.ipynb"
        nbformat.write(notebook, source)
        with _environment(**{CLAIMS_DIR_VARIABLE: str(Path(claims_dir).resolve()) if claims_dir else None}):
            return papermill.execute_notebook(
                source, output, parameters=parameters, cwd=str(CHAPTERS), kernel_name="python3",
                language="python", progress_bar=False,
            )


@dataclass(frozen=True)
class Job:
    """One chapter run in its own process: chapter, profile, seed, output folder, extra environment,
    code run before the chapter (``prepend``: a planted bug) and a time limit in seconds (``timeout``:
    the run and its kernel are stopped there)."""

    chapter: str
    folder: Path
    profile: str = "quick"
    seed: int | None = None
    environment: dict[str, str] = field(default_factory=dict)
    prepend: str | None = None
    timeout: float | None = None

    def __post_init__(self):
        if self.timeout is not None:
            checks.positive(self.timeout, "timeout")


@dataclass(frozen=True)
class Outcome:
    """What a :class:`Job` gave: its exit status, wall time, records, the end of its error output and
    whether it was stopped at its time limit."""

    job: Job
    returncode: int
    seconds: float
    records: list[dict]
    error: str
    timed_out: bool = False

    @property
    def failed_claims(self) -> list[str]:
        return [r["id"] for r in self.records if not r["passed"]]


# Numeric code paths other than this machine's defaults: OpenBLAS kernels (numpy and scipy), numpy's
# SIMD loops, torch's CPU capability and MKL's code branch, each with one or two threads.
CODE_PATHS = {
    "prescott, 1 thread, torch default": (1, {"OPENBLAS_CORETYPE": "Prescott", "ATEN_CPU_CAPABILITY": "default"}),
    "haswell, 2 threads, torch avx2, numpy without AVX-512": (2, {
        "OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}),
    "sandybridge, 1 thread, MKL compatible branch": (1, {"OPENBLAS_CORETYPE": "Sandybridge", "MKL_CBWR": "COMPATIBLE"}),
}


def run_job(job: Job) -> Outcome:
    """Execute ``job`` in a fresh process (``python -m dropnb.book.notebooks run``); records go to its folder.

    At the job's time limit the process and everything it started (its kernel) are killed; the
    records written until then are kept and the outcome says ``timed_out``."""
    folder = job.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "dropnb.book.notebooks", "run", job.chapter, "--profile", job.profile,
               "--claims-dir", str(folder), "--output", str(folder / f"{job.chapter}.ipynb")]
    if job.seed is not None:
        command += ["--seed", str(job.seed)]
    if job.prepend:
        command += ["--prepend", job.prepend]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=os.environ | job.environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = process.communicate(timeout=job.timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_tree(process)
        _, stderr = process.communicate()
        stderr, timed_out = stderr + f"\nstopped at the time limit of {job.timeout:g} s", True
    seconds = time.perf_counter() - start
    records = load_records(folder, [job.chapter]).get(job.chapter, [])
    failed = process.returncode != 0 or timed_out
    return Outcome(job, process.returncode, seconds, records, stderr[-3000:] if failed else "", timed_out)


def _kill_tree(process: subprocess.Popen) -> None:
    """Kill ``process`` and every process it started (a Jupyter kernel runs in a session of its own)."""
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    process.kill()
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=30)


def run_jobs(jobs: list[Job], parallel: int = 1) -> Iterator[Outcome]:
    """Run ``jobs``, ``parallel`` at a time; yield the outcomes in the order of ``jobs``, each as soon as
    it and those before it are done."""
    parallel = checks.integer(parallel, "parallel")
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        yield from pool.map(run_job, jobs)


def _report(outcomes: Iterable[Outcome]) -> int:
    """Print one line per outcome (a failed claim, a failed run, or no claim at all fails it); return
    the number of failed runs."""
    failures = 0
    for o in outcomes:
        ok = o.returncode == 0 and o.records and not o.failed_claims
        failures += not ok
        seed = "default" if o.job.seed is None else o.job.seed
        reason = ", ".join(o.failed_claims) or (o.error.strip().splitlines() or ["no claim recorded"])[-1]
        verdict = "ok" if ok else f"FAILED {reason}"
        print(f"{o.job.chapter:<20} seed {seed!s:<8} {o.seconds:7.1f} s  "
              f"{sum(r['passed'] for r in o.records)}/{len(o.records)} records  {verdict}", flush=True)
    return failures


def _check_code_paths(names: list[str], folder: Path) -> int:
    """Run ``names`` on every code path of :data:`CODE_PATHS`; return 1 if any run or comparison fails."""
    checks = failures = 0
    for number, (path, (threads, environment)) in enumerate(CODE_PATHS.items()):
        print(f"code path: {path}", flush=True)
        records = folder / f"path-{number}"
        jobs = [Job(name, records, environment=thread_environment(threads) | environment) for name in names]
        failures += _report(run_jobs(jobs, parallel=2 if threads == 1 else 1))
        for chapter, problems in compare_folder(records, names).items():
            failures += bool(problems)
            print(verdict(chapter, problems))
        checks += 2 * len(names)
    return _closing_line(checks, failures)


def _closing_line(total: int, failures: int) -> int:
    """Print "N passed, N failed"; return the exit status."""
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures else 0


def fill_execution_cache(build: Path, names: list[str], timeout: int = 900) -> list[str]:
    """Execute the pages ``names`` into the execution cache of a book built into ``build`` (the
    folder holding ``html``: ``<build>/.jupyter_cache``, where myst-nb looks in ``cache`` mode), one
    process per core; return the pages that failed (the build executes them again and reports why)."""
    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor

    cache = get_cache(str(Path(build).resolve() / ".jupyter_cache"))
    uris = [str(CHAPTERS / f"{name}.md") for name in names]
    for uri in uris:
        cache.add_nb_to_project(uri, read_data={"name": "myst_nb_md", "type": "plugin"})
    result = load_executor("local-parallel", cache).run_and_cache(filter_uris=uris, timeout=timeout)
    return [Path(uri).stem for uri in result.excepted + result.errored]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dropnb.book.notebooks", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute one chapter with papermill")
    run.add_argument("chapter")
    run.add_argument("--profile", choices=PROFILES, help="default: $DROPNB_PROFILE, else book")
    run.add_argument("--seed", type=int, help="default: $DROPNB_SEED, else the chapter's own")
    run.add_argument("--output", type=Path, help="executed notebook (default _build/run/<chapter>.ipynb)")
    run.add_argument("--claims-dir", type=Path, help="where the records go (default $DROPNB_CLAIMS_DIR)")
    run.add_argument("--prepend", help="code run before the chapter (a planted bug)")
    every = commands.add_parser("all", help="run chapters (in parallel processes); records go to one folder")
    every.add_argument("chapters", nargs="*", help="default: every chapter in the ledger")
    every.add_argument("--profile", choices=PROFILES, default="quick")
    every.add_argument("--seed", type=int, help="default: the chapter's own")
    every.add_argument("--parallel", type=int, default=os.cpu_count() or 1, help="runs at once")
    every.add_argument("--folder", type=Path, default=ROOT / "_build" / "quick", help="records and notebooks")
    seeds = commands.add_parser("seeds", help="run chapters under other seeds (1, 2, …); all claims must hold")
    seeds.add_argument("chapters", nargs="*", help="default: every chapter in the ledger")
    seeds.add_argument("--profile", choices=PROFILES, default="quick")
    seeds.add_argument("--count", type=int, default=10, help="how many seeds (1, 2, …; default 10)")
    seeds.add_argument("--parallel", type=int, default=os.cpu_count() or 1, help="runs at once")
    seeds.add_argument("--folder", type=Path, default=ROOT / "_build" / "seeds", help="records and notebooks")
    paths = commands.add_parser("paths", help="run chapters at quick on other numeric code paths; compare with goldens")
    paths.add_argument("chapters", nargs="*", help="default: every chapter in the ledger")
    paths.add_argument("--folder", type=Path, default=ROOT / "_build" / "paths", help="records and notebooks")
    cache = commands.add_parser("cache", help="execute the pages into a book build's execution cache, one process per core")
    cache.add_argument("build", type=Path, help="the build folder that holds html/ (_build, or <path-output>/_build)")
    cache.add_argument("chapters", nargs="*", help="default: every chapter in the ledger")
    args = parser.parse_args(argv)
    if args.command == "cache":
        failed = fill_execution_cache(args.build, args.chapters or pages_with_claims())
        print(f"cached {len(args.chapters or pages_with_claims()) - len(failed)} pages" + (f"; failed: {', '.join(failed)}" if failed else ""))
        return 0
    if args.command == "run":
        profile = resolve_profile(args.profile)
        output = args.output or ROOT / "_build" / "run" / f"{args.chapter}.ipynb"
        execute(args.chapter, output, profile=profile, seed=args.seed, claims_dir=args.claims_dir, prepend=args.prepend)
        print(f"executed {args.chapter} at profile {profile}: {output}")
        return 0
    names = args.chapters or pages_with_claims()
    if args.command == "paths":
        return _check_code_paths(names, args.folder)
    if args.command == "all":
        jobs = [Job(name, args.folder, profile=args.profile, seed=args.seed) for name in names]
    else:
        jobs = [Job(name, args.folder / f"seed-{seed}", profile=args.profile, seed=seed) for seed in range(1, args.count + 1) for name in names]
    return _closing_line(len(jobs), _report(run_jobs(jobs, args.parallel)))


if __name__ == "__main__":
    sys.exit(main())
