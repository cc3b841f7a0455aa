"""Mutation score of the book's claims: which small changes to `dropnb` does some claim notice?

A *mutant* is a copy of the package with one node of its numeric code changed: a numeric
constant (an integer n → n + 1, a float x → 2x), a swapped operator (+ ↔ −, × ↔ ÷, ** → ×,
+= ↔ −=, a dropped unary minus), a swapped comparison (< ↔ >, ≤ ↔ ≥, == ↔ ≠) or a dropped term of
a sum (a ± b → a, a + b → b). Mutation points lie inside function bodies of the numeric modules,
never in argument validation (an ``if`` whose body only raises, ``checks.*`` calls), error
messages, solver stopping settings (``tol``, ``maxiter``, …) or the modules that run, render and
judge the book (claims, rounding bounds, notebooks, …).

1. **Trace** (once, cached in ``_build/mutation/trace.json``, keyed by the sources): every page
   runs at ``quick`` with a line tracer on ``dropnb``; a mutation point is *reached* by the pages
   that executed one of its lines. Only reached points are sampled, and a mutant runs only the
   pages that reach it. The same pass gives the unmutated baseline records.
2. **Sample** ``--count`` mutants, deterministic given ``--seed``, and run each of its pages at
   ``quick`` (default seed) with ``PYTHONPATH`` pointing at the mutated copy, so that every import
   (``from dropnb import x`` in a chapter, ``from .x import y`` inside the package) sees the
   mutant; a first cell asserts that the kernel imported the copy. Pages run ``--parallel`` at a
   time, under ``nice``.
3. **Classify** each (mutant, page): *caught* (a claim failed and raised ``ClaimFailed``),
   *crashed* (another exception, or the page ran past its time limit), *golden* (every claim held,
   and the comparison of the records with the page's golden, :mod:`dropnb.book.regression`, failed),
   *survived* (a record moved, measured value, target, tolerance or printed target, and the golden
   did not notice), *equivalent* (no record changed; left out of the score). A crashed mutant
   changed no number; of the *number-changing* ones (caught, golden, survived) the report gives the
   share caught by a claim and the share surviving. A chapter counts each mutant once (caught if
   one of its pages catches it, …). A mutant runs a chapter's pages cheapest first and stops at the
   first that catches it (``--every-page`` runs them all); the cheapest mutants run first, so a
   cut-short run still has whole mutants (``--report`` writes the report from what has run, from
   the cached trace even if the sources changed since). The golden verdict is decided when the
   report is written, with today's :mod:`dropnb.book.regression`.

The report goes to ``benchmarks/results/mutation.md`` (with ``mutation.png`` and the raw outcomes
in ``mutation.json``); outcomes are cached in ``_build/mutation/outcomes.jsonl`` so an
interrupted run resumes. A hand-written list of missing claims, ``benchmarks/results/
mutation-missing.md``, is included in the report when present.

Usage: python benchmarks/mutation.py [--count 100] [--seed 0] [--parallel 2] [--pages PAGE ...]
                                     [--list] [--dry] [--report] [--retrace] [--every-page]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the book's own dropnb, before an installed one

from dropnb.book.layout import ROOT, pages_with_claims  # noqa: E402
from dropnb.book.regression import differences, read_golden  # noqa: E402

PACKAGE = ROOT / "dropnb"
BUILD = ROOT / "_build" / "mutation"
RESULTS = ROOT / "benchmarks" / "results"
# The mutation points lie in the mathematical modules, the top level of dropnb: what runs, renders and
# judges the book (everything under dropnb/book/) is not walked. Of the top level, the package's
# setup and the modules that check arguments or compute tolerances are not the numeric code under test.
EXCLUDED_MODULES = {"__init__", "checks", "rounding"}
# Functions that compute tolerance multipliers (stats) rather than measured values.
EXCLUDED_FUNCTIONS = {("stats", "simultaneous_z")}
# Keyword arguments that set a solver's stopping rule or a display: their mutants are near-equivalent.
SKIPPED_KEYWORDS = {"tol", "rtol", "atol", "gtol", "ftol", "xtol", "maxiter", "maxfun", "maxls", "maxcor",
                    "max_iterations", "tolerance", "progress", "desc", "every", "stacklevel"}
SKIPPED_CALLS = {"print", "warn", "ValueError", "TypeError", "RuntimeError", "tqdm"}
RECORD_FIELDS = ("measured", "target", "tolerance", "printed_target")
RELATIVE_NOISE = 1e-12  # a record "moves" when it changes by more than this relative amount
SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Pow: ast.Mult,
         ast.FloorDiv: ast.Mult}
COMPARISON_SWAPS = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.NotEq,
                    ast.NotEq: ast.Eq}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.FloorDiv: "//",
           ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


# ----------------------------------------------------------------------------------------------
# Mutation points


@dataclass(frozen=True)
class Mutant:
    """One change of one node: where (module, function, position) and what (kind, before → after)."""

    module: str
    function: str
    line: int
    column: int
    end_line: int
    end_column: int
    kind: str
    before: str
    after: str
    pages: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}:{self.column}:{self.end_line}:{self.end_column}:{self.kind}:{self.after}"

    @property
    def label(self) -> str:
        return f"{self.module}.{self.function} line {self.line}: `{self.before}` → `{self.after}`"


def _changes(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """The mutated replacements of ``node`` (kind, new node)."""
    out = []
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value + 1 if isinstance(node.value, int) else (2 * node.value if node.value else 1.0)
        out.append(("constant", ast.Constant(value)))
    elif isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
        out.append(("operator", ast.BinOp(node.left, SWAPS[type(node.op)](), node.right)))
        if isinstance(node.op, (ast.Add, ast.Sub)):
            out.append(("dropped term", node.left))
            if isinstance(node.op, ast.Add):
                out.append(("dropped term", node.right))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and not isinstance(node.operand, ast.Constant):
        out.append(("operator", node.operand))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARISON_SWAPS:
        out.append(("comparison", ast.Compare(node.left, [COMPARISON_SWAPS[type(node.ops[0])]()], node.comparators)))
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        out.append(("operator", ast.AugAssign(node.target, SWAPS[type(node.op)](), node.value)))
    return out


def _is_validation(node: ast.If) -> bool:
    return all(isinstance(s, ast.Raise) for s in node.body)


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


class _Points(ast.NodeVisitor):
    """Every mutation point of a module, in source order, with its function's qualified name."""

    def __init__(self, module: str):
        self.module, self.stack, self.found, self.depth = module, [], [], 0

    def _function(self, node) -> None:
        self.stack.append(node.name)
        self.depth += 1
        for statement in node.body:  # the body only: defaults and decorators run at import
            self.visit(statement)
        self.depth -= 1
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        for statement in node.body:
            self.visit(statement)
        self.stack.pop()

    def visit_If(self, node: ast.If) -> None:
        if not _is_validation(node):
            self.visit(node.test)
        for statement in node.body + node.orelse:
            self.visit(statement)

    def visit_Raise(self, node) -> None:
        pass

    visit_Assert = visit_JoinedStr = visit_Raise

    def visit_Expr(self, node: ast.Expr) -> None:
        if not isinstance(node.value, ast.Constant):  # docstrings
            self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if name in SKIPPED_CALLS or (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                                     and node.func.value.id == "checks"):
            return
        self.visit(node.func)
        for argument in node.args:
            self.visit(argument)
        for keyword in node.keywords:
            if keyword.arg not in SKIPPED_KEYWORDS:
                self.visit(keyword.value)

    def generic_visit(self, node: ast.AST) -> None:
        if self.depth:
            function = ".".join(self.stack)
            if (self.module, self.stack[-1]) not in EXCLUDED_FUNCTIONS and (self.module, function) not in EXCLUDED_FUNCTIONS:
                for kind, new in _changes(node):
                    before, after = ast.unparse(node), ast.unparse(new)
                    if before != after:
                        self.found.append(Mutant(self.module, function, node.lineno, node.col_offset,
                                                 node.end_lineno, node.end_col_offset, kind, before, after))
        super().generic_visit(node)


def mutation_points(package: Path = PACKAGE) -> list[Mutant]:
    """Every mutation point of the numeric modules, in module and source order (pages not yet set): the
    top level of the package only, never the book subpackage."""
    points = []
    for path in sorted(package.glob("*.py")):
        if path.stem in EXCLUDED_MODULES:
            continue
        visitor = _Points(path.stem)
        visitor.visit(ast.parse(path.read_text()))
        points += visitor.found
    return points


def mutated_source(mutant: Mutant, package: Path = PACKAGE) -> str:
    """The module's source with the mutant's node replaced (its text only; everything else kept)."""
    source = (package / f"{mutant.module}.py").read_text()
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()))
    data = source.encode()
    start = offsets[mutant.line - 1] + mutant.column
    end = offsets[mutant.end_line - 1] + mutant.end_column
    segment = data[start:end].decode()
    statement = mutant.kind == "operator" and "=" in mutant.after and mutant.after.split("=")[0].endswith(("+", "-"))
    parsed = ast.parse(segment if statement else f"({segment})")
    if ast.unparse(parsed) != ast.unparse(ast.parse(mutant.before)):
        raise RuntimeError(f"mutant {mutant.label} does not match the source {segment!r}")
    new = (data[:start] + (mutant.after if statement else f"({mutant.after})").encode() + data[end:]).decode()
    ast.parse(new)  # it must still compile
    return new


def mutated_package(mutant: Mutant | None, folder: Path) -> Path:
    """A copy of ``dropnb`` in ``folder`` with ``mutant`` applied (none: unchanged); return the copy."""
    copy = folder / "dropnb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        (copy / f"{mutant.module}.py").write_text(mutated_source(mutant))
    return copy


# ----------------------------------------------------------------------------------------------
# Running a page

RUNNER = """
import json, sys
from pathlib import Path
from dropnb.book.notebooks import execute
page, folder, prepend = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]).read_text()
try:
    execute(page, folder / f"{page}.ipynb", profile="quick", claims_dir=folder, prepend=prepend)
except Exception as error:
    (folder / "error.json").write_text(json.dumps({"ename": getattr(error, "ename", type(error).__name__),
                                                   "evalue": str(getattr(error, "evalue", error))[-1500:]}))
    sys.exit(1)
"""

# First cell of every run: the kernel must import the copy named by $MUTATION_DROPNB.
CHECK = """import os as _os, dropnb as _dropnb
assert _os.path.dirname(_dropnb.__file__) == _os.environ["MUTATION_DROPNB"], _dropnb.__file__
"""

# First cell of the trace run: record every line of dropnb that runs, after each cell.
TRACE = CHECK + """import sys as _sys, json as _json, threading as _threading
_mut_dir, _mut_lines = _os.environ["MUTATION_DROPNB"], {}
def _mut_local(frame, event, arg):
    if event == "line":
        _mut_lines.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
    return _mut_local
def _mut_global(frame, event, arg):
    if frame.f_code.co_filename.startswith(_mut_dir):
        _mut_lines.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
        return _mut_local
    return None
def _mut_dump(*args):
    with open(_os.environ["MUTATION_TRACE"], "w") as handle:
        _json.dump({_os.path.relpath(k, _mut_dir): sorted(v) for k, v in _mut_lines.items()}, handle)
_sys.settrace(_mut_global)
_threading.settrace(_mut_global)
get_ipython().events.register("post_run_cell", _mut_dump)
"""


def run_page(page: str, package: Path, folder: Path, prepend: str = CHECK, timeout: float | None = None,
             environment: dict[str, str] | None = None) -> dict:
    """Run ``page`` at quick with the kernel importing ``package`` (niced); return its outcome."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prepend.py").write_text(prepend)
    env = os.environ | {"PYTHONPATH": str(package.parent), "MUTATION_DROPNB": str(package)} | (environment or {})
    env.pop("DROPNB_SEED", None), env.pop("DROPNB_PROFILE", None)
    command = ["nice", "-n", "10", sys.executable, "-c", RUNNER, page, str(folder), str(folder / "prepend.py")]
    start = time.perf_counter()
    try:  # the runner imports the book's own dropnb (cwd first on sys.path); the kernel imports the copy
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        returncode, stderr = result.returncode, result.stderr
    except subprocess.TimeoutExpired:
        returncode, stderr = None, "timed out"
    seconds = time.perf_counter() - start
    path = folder / f"{page}.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    error = json.loads((folder / "error.json").read_text()) if (folder / "error.json").is_file() else None
    if returncode is None:
        error = {"ename": "Timeout", "evalue": f"ran past {timeout:.0f} s"}
    elif returncode and error is None:
        error = {"ename": "RunnerError", "evalue": stderr[-1500:]}
    return {"returncode": returncode, "seconds": seconds, "records": records, "error": error}


# ----------------------------------------------------------------------------------------------
# Trace and baseline


def sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "chapters").glob("*.md")]):
        digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def trace(pages: list[str], parallel: int, retrace: bool = False, cached_only: bool = False) -> dict:
    """Per page: the lines of dropnb it runs, its records and its seconds (traced), cached by sources;
    ``cached_only``: the cached trace as it is (a report of a run on earlier sources)."""
    cache = BUILD / "trace.json"
    key = sources_hash()
    cached = json.loads(cache.read_text()) if cache.is_file() and not retrace else {}
    if cached_only and cached:
        return cached
    if cached.get("key") != key:
        cached = {"key": key, "pages": {}}
    todo = [p for p in pages if p not in cached["pages"]]
    if todo:
        print(f"tracing {len(todo)} page(s) at quick: {' '.join(todo)}", flush=True)
        with tempfile.TemporaryDirectory(prefix="mutation-trace-") as scratch:
            package = mutated_package(None, Path(scratch))

            def one(page: str) -> tuple[str, dict]:
                folder = Path(scratch) / page
                lines = folder / "lines.json"
                outcome = run_page(page, package, folder, TRACE, environment={"MUTATION_TRACE": str(lines)})
                if outcome["returncode"] != 0:
                    raise RuntimeError(f"the unmutated page {page} failed: {outcome['error']}")
                outcome["lines"] = json.loads(lines.read_text())
                print(f"  {page:<34} {outcome['seconds']:6.1f} s traced, {len(outcome['records'])} records", flush=True)
                return page, outcome

            lock = threading.Lock()
            with ThreadPoolExecutor(parallel) as pool:
                for page, outcome in pool.map(one, todo):
                    with lock:
                        cached["pages"][page] = outcome
                        BUILD.mkdir(parents=True, exist_ok=True)
                        cache.write_text(json.dumps(cached))
    return cached


def with_pages(points: list[Mutant], traced: dict, pages: list[str]) -> list[Mutant]:
    """The points reached by one of ``pages``, each with the pages that run one of its lines."""
    out = []
    for m in points:
        lines = set(range(m.line, m.end_line + 1))
        reach = tuple(p for p in pages if lines & set(traced["pages"][p]["lines"].get(f"{m.module}.py", ())))
        if reach:
            out.append(Mutant(**{**asdict(m), "pages": reach}))
    return out


def sample(points: list[Mutant], count: int, seed: int) -> list[Mutant]:
    """``count`` points drawn without replacement, deterministic given ``seed``, in source order."""
    chosen = random.Random(seed).sample(range(len(points)), min(count, len(points)))
    return [points[i] for i in sorted(chosen)]


# ----------------------------------------------------------------------------------------------
# Classification


def moved(baseline: list[dict], records: list[dict]) -> list[dict]:
    """The record fields that differ from the baseline by more than :data:`RELATIVE_NOISE`."""
    before = {r["id"]: r for r in baseline}
    out = []
    for r in records:
        b = before.get(r["id"])
        if b is None:
            out.append({"id": r["id"], "field": "new record"})
            continue
        for name in RECORD_FIELDS:
            x, y = b.get(name), r.get(name)
            if x == y or x is None or y is None:
                continue
            scale = max(abs(x), abs(y))
            if abs(x - y) > RELATIVE_NOISE * scale:
                out.append({"id": r["id"], "field": name, "baseline": x, "mutant": y,
                            "relative": abs(x - y) / scale if scale else math.inf})
    missing = {r["id"] for r in baseline} - {r["id"] for r in records}
    out += [{"id": i, "field": "missing record"} for i in sorted(missing)]
    return out


def classify(outcome: dict, baseline: list[dict]) -> dict:
    """caught (a claim failed), crashed (another exception), survived (a record moved) or equivalent; whether
    the golden notices a survivor is decided by :func:`judged_by_golden`, when the report is written."""
    failed = [r["id"] for r in outcome["records"] if not r["passed"]]
    changes = moved(baseline, outcome["records"])
    if failed:
        verdict = "caught"
    elif outcome["returncode"] != 0:
        verdict = "crashed"
    elif changes:
        verdict = "survived"
    else:
        verdict = "equivalent"
    return {"verdict": verdict, "failed_claim": failed[0] if failed else None, "moved": changes,
            "error": outcome["error"], "seconds": round(outcome["seconds"], 1)}


VERDICTS = ("caught", "crashed", "golden", "survived", "equivalent")


def judged_by_golden(row: dict, baseline: list[dict], page: str) -> dict:
    """``row`` with a survivor split into golden and survived by today's :mod:`dropnb.book.regression`: the
    mutant's records are the baseline with the fields that moved, so a change of the comparison needs no new
    runs."""
    if row["verdict"] not in ("golden", "survived"):
        return row
    records = {r["id"]: dict(r) for r in baseline}
    for change in row["moved"]:
        if "baseline" not in change:
            return {**row, "verdict": "golden", "golden": [f"{change['id']}: {change['field']}"]}
        records[change["id"]][change["field"]] = change["mutant"]
    golden = differences(read_golden(page), list(records.values()))
    return {**row, "verdict": "golden" if golden else "survived", "golden": golden[:3]}


def cached_outcomes(traced: dict, mutants: list[Mutant]) -> dict[str, dict]:
    """The outcomes of ``mutants`` found in ``_build/mutation/outcomes.jsonl`` for these sources."""
    cache, keys = BUILD / "outcomes.jsonl", {m.key for m in mutants}
    rows = [json.loads(line) for line in cache.read_text().splitlines()] if cache.is_file() else []
    return {f"{r['mutant']}|{r['page']}": r for r in rows if r["trace"] == traced["key"] and r["mutant"] in keys}


def run_mutants(mutants: list[Mutant], traced: dict, parallel: int, every_page: bool = False) -> dict[str, dict]:
    """Outcome of every (mutant, page) run, resumed from ``_build/mutation/outcomes.jsonl``.

    A mutant runs its pages chapter by chapter, the cheapest page first; unless ``every_page``, the
    other pages of a chapter are skipped once one page of it catches the mutant (the chapter's verdict
    is then known)."""
    cache = BUILD / "outcomes.jsonl"
    BUILD.mkdir(parents=True, exist_ok=True)
    done = {}
    if cache.is_file():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            if row["trace"] == traced["key"]:
                done[(row["mutant"], row["page"])] = row
    seconds = {p: traced["pages"][p]["seconds"] for p in traced["pages"]}
    tasks = []
    for m in mutants:
        chapters = defaultdict(list)
        for p in m.pages:
            chapters[chapter_of(p, traced)].append(p)
        tasks += [(m, sorted(ps, key=seconds.get)) for ps in chapters.values()]
    tasks = [t for t in tasks if any((t[0].key, p) not in done for p in t[1])]
    # the cheapest mutants first, so that an interrupted run has as many whole mutants as it can
    cost = {m.key: sum(seconds[p] for p in m.pages) for m in mutants}
    tasks.sort(key=lambda t: (cost[t[0].key], t[0].key))
    estimate = sum(seconds[p] for _, ps in tasks for p in ps if (_.key, p) not in done)
    print(f"{len(mutants)} mutants, {sum(len(m.pages) for m in mutants)} page runs at most, "
          f"{len(tasks)} (mutant, chapter) pairs to do: at most {estimate / 60:.0f} min of traced page time on one "
          f"core, {estimate / 60 / parallel:.0f} min with {parallel} at once (a caught mutant stops early)", flush=True)
    lock = threading.Lock()
    counter = iter(range(1, len(tasks) + 1))

    def one(task: tuple[Mutant, list[str]]) -> None:
        mutant, pages = task
        for page in pages:
            row = done.get((mutant.key, page))
            if row is None:
                base = traced["pages"][page]
                with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
                    package = mutated_package(mutant, Path(scratch))
                    outcome = run_page(page, package, Path(scratch) / "run", timeout=3 * base["seconds"] + 60)
                row = {"trace": traced["key"], "mutant": mutant.key, "page": page,
                       **classify(outcome, base["records"])}
                with lock:
                    done[(mutant.key, page)] = row
                    with cache.open("a") as handle:
                        handle.write(json.dumps(row) + "\n")
                    detail = row["failed_claim"] or (row["error"] or {}).get("ename") or \
                        (f"{len(row['moved'])} record(s) moved" if row["moved"] else "")
                    print(f"  {row['verdict']:<10} {page:<34} {row['seconds']:5.0f} s  {mutant.label}  {detail}",
                          flush=True)
            if row["verdict"] == "caught" and not every_page:
                break
        with lock:
            print(f"  [{next(counter)}/{len(tasks)}] done", flush=True)

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, tasks))
    keys = {m.key for m in mutants}
    return {f"{k[0]}|{k[1]}": v for k, v in done.items() if k[0] in keys}


# ----------------------------------------------------------------------------------------------
# Report


def chapter_of(page: str, traced: dict) -> str:
    records = traced["pages"][page]["records"]
    return records[0]["chapter"] if records else page


def combine(verdicts: list[str]) -> str:
    """A mutant's verdict over several pages: caught if one catches it, else crashed, else survived."""
    for v in VERDICTS:
        if v in verdicts:
            return v
    return "equivalent"


def tally(mutants: list[Mutant], outcomes: dict, traced: dict, pages: list[str]) -> tuple[dict, dict]:
    """Counts of verdicts per page and per chapter (a mutant once per chapter)."""
    per_page = {p: Counter() for p in pages}
    per_chapter: dict[str, Counter] = {}
    for m in mutants:
        by_chapter = defaultdict(list)
        for p in m.pages:
            row = outcomes.get(f"{m.key}|{p}")
            if row:
                per_page[p][row["verdict"]] += 1
                by_chapter[chapter_of(p, traced)].append(row["verdict"])
        for chapter, verdicts in by_chapter.items():
            per_chapter.setdefault(chapter, Counter())[combine(verdicts)] += 1
    order = []
    for p in pages:
        c = chapter_of(p, traced)
        if c not in order:
            order.append(c)
    return per_page, {c: per_chapter.get(c, Counter()) for c in order}


def number_changing(c: Counter) -> int:
    """Mutants that changed a number: caught by a claim, by the golden, or surviving (a crash changes none)."""
    return c["caught"] + c["golden"] + c["survived"]


def score(c: Counter) -> str:
    """The share of number-changing mutants that a claim caught."""
    n = number_changing(c)
    return f"{c['caught'] / n:.0%}" if n else "–"


def surviving(c: Counter) -> str:
    """The share of number-changing mutants that neither a claim nor the golden noticed."""
    n = number_changing(c)
    return f"{c['survived'] / n:.0%}" if n else "–"


def table(rows: dict[str, Counter], title: str) -> list[str]:
    out = [f"| {title} | mutants | caught | golden | crashed | survived | equivalent | by a claim | surviving |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in rows.items():
        out.append(f"| {name} | {sum(c.values())} | {c['caught']} | {c['golden']} | {c['crashed']} | "
                   f"{c['survived']} | {c['equivalent']} | {score(c)} | {surviving(c)} |")
    return out


def figure(per_chapter: dict[str, Counter], path: Path) -> None:
    """Stacked horizontal bars: caught, golden, crashed and survived mutants per chapter, the score at the end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from dropnb.book.plotting import PALETTE, use_style

    use_style()
    names = list(per_chapter)
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * len(names) + 1.5), layout="constrained")
    left = [0] * len(names)
    colours = {"caught": PALETTE["green"], "golden": PALETTE["blue"], "crashed": PALETTE["orange"],
               "survived": PALETTE["vermillion"]}
    for verdict, colour in colours.items():
        values = [per_chapter[n][verdict] for n in names]
        ax.barh(names, values, left=left, color=colour, label=verdict)
        left = [a + b for a, b in zip(left, values)]
    for y, (name, end) in enumerate(zip(names, left)):
        label = f" {score(per_chapter[name])} by a claim" if end else " no mutant run"
        ax.annotate(label, (end, y), va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, max(left + [1]) * 1.25)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("non-equivalent mutants (each counted once per chapter)")
    ax.grid(axis="y", visible=False)
    fig.legend(loc="outside upper center", ncols=4)
    fig.savefig(path)
    plt.close(fig)


def format_move(change: dict) -> str:
    if "baseline" not in change:
        return f"`{change['id']}` ({change['field']})"
    return (f"`{change['id']}` {change['field']} {change['baseline']:.6g} → {change['mutant']:.6g} "
            f"(relative {change['relative']:.1e})")


def report(mutants: list[Mutant], outcomes: dict, traced: dict, pages: list[str], args, points: int) -> str:
    per_page, per_chapter = tally(mutants, outcomes, traced, pages)
    unfinished = [m for m in mutants if not any(f"{m.key}|{p}" in outcomes for p in m.pages)]
    overall = Counter(combine([outcomes[f"{m.key}|{p}"]["verdict"] for p in m.pages if f"{m.key}|{p}" in outcomes])
                      for m in mutants if m not in unfinished)
    kinds = Counter(m.kind for m in mutants)
    estimate = sum(traced["pages"][p]["seconds"] for m in mutants for p in m.pages)
    seconds = sum(r["seconds"] for r in outcomes.values())
    lines = [
        "# Mutation score of the book's claims",
        "",
        f"Run of {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python benchmarks/mutation.py --count "
        f"{args.count} --seed {args.seed}` on the sources `{traced['key']}`: {len(mutants)} mutants drawn from "
        f"{points} mutation points that some page reaches ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
        f"{len(outcomes)} page runs at `quick`, {seconds / 3600:.1f} h of wall time in all.",
        "",
        *([f"**Partial run**: {len(unfinished)} of the {len(mutants)} mutants have not run yet; they are "
           "left out of every count below.", ""] if unfinished else []),
        "A mutant changes one node of `dropnb`'s numeric code; it runs every page that executes that line. "
        "*Caught*: a claim failed. *Golden*: every claim held, and the comparison with the page's golden "
        "records (`dropnb.book.regression`, as the test suite runs it) failed. *Crashed*: another exception or a run "
        "past its time limit (noticed, but not by a claim). *Survived*: every claim held and the golden "
        "matched while a record (measured value, target, tolerance) moved by more than "
        f"{RELATIVE_NOISE:g} relative. *Equivalent*: no record moved; not scored. A mutant that crashed changed "
        "no number; the *number-changing* mutants are the caught, golden and surviving ones. *By a claim* = "
        "caught / number-changing; *surviving* = survived / number-changing. A chapter counts each mutant "
        "once: caught if one of its pages caught it, else crashed, else golden, else survived. The pages of a "
        "chapter run cheapest first and stop at the first that catches the mutant, so a page's row counts the "
        "mutants that reached it and were not caught first by a cheaper page of its chapter.",
        "",
        f"**Cost.** The trace (every page once at `quick` with a line tracer on `dropnb`) took "
        f"{sum(v['seconds'] for v in traced['pages'].values()):.0f} s; a mutant costs at most the traced time of "
        f"the pages it reaches, {estimate / 60:.0f} min for this sample on one core (runs without the tracer are about "
        "a quarter faster, and a caught mutant stops at its first failing claim).",
        "",
        "![Caught, crashed and survived mutants per chapter](mutation.png)",
        "",
        "## Per chapter",
        "",
        *table(per_chapter, "chapter"),
        f"| **book** (each mutant once) | {sum(overall.values())} | {overall['caught']} | {overall['golden']} | "
        f"{overall['crashed']} | {overall['survived']} | {overall['equivalent']} | {score(overall)} | "
        f"{surviving(overall)} |",
        "",
        "## Per page",
        "",
        *table({p: per_page[p] for p in pages if sum(per_page[p].values())}, "page"),
        "",
        "## Surviving mutants",
        "",
        "Every claim held and the golden matched, yet a printed number moved: a bug of this kind in `dropnb` "
        "would go unnoticed.",
        "",
    ]
    survivors = [(m, p, outcomes[f"{m.key}|{p}"]) for m in mutants for p in m.pages
                 if outcomes.get(f"{m.key}|{p}", {}).get("verdict") == "survived"]
    for m, p, row in survivors:
        shown = sorted(row["moved"], key=lambda c: -c.get("relative", math.inf))
        more = f"; and {len(shown) - 4} more" if len(shown) > 4 else ""
        only = " (tolerances only)" if all(c["field"] == "tolerance" for c in shown) else ""
        lines.append(f"* **{p}**: {m.label} ({m.kind}); moved{only}: {'; '.join(map(format_move, shown[:4]))}{more}")
    if not survivors:
        lines.append("None.")
    noticed = [(m, p, outcomes[f"{m.key}|{p}"]) for m in mutants for p in m.pages
               if outcomes.get(f"{m.key}|{p}", {}).get("verdict") == "golden"]
    lines += ["", "## Caught by the golden", "", "Every claim held; the comparison with the page's golden records "
              "failed (its first difference shown).", ""]
    lines += [f"* **{p}**: {m.label} ({m.kind}): {row['golden'][0]}" for m, p, row in noticed] or ["None."]
    crashed = [(m, p, outcomes[f"{m.key}|{p}"]) for m in mutants for p in m.pages
               if outcomes.get(f"{m.key}|{p}", {}).get("verdict") == "crashed"]
    by_exception = Counter(row["error"]["ename"] for _, _, row in crashed)
    lines += ["", "## Crashed mutants", "", "Noticed by an exception other than a failed claim (by exception: "
              + ", ".join(f"{name} {n}" for name, n in by_exception.most_common()) + ").", ""]
    lines += [f"* **{p}**: {m.label}: {row['error']['ename']}" for m, p, row in crashed] or ["None."]
    missing = RESULTS / "mutation-missing.md"
    if missing.is_file():
        lines += ["", missing.read_text().strip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100, help="mutants to draw (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument("--parallel", type=int, default=2, help="page runs at once (default 2)")
    parser.add_argument("--pages", nargs="+", help="only these pages (default: every page in the ledger)")
    parser.add_argument("--list", action="store_true", help="print the drawn mutants and the cost; run nothing")
    parser.add_argument("--dry", action="store_true", help="smoke test: run two mutants, write no report")
    parser.add_argument("--report", action="store_true",
                        help="write the report from the cached trace and the outcomes run so far; run nothing")
    parser.add_argument("--retrace", action="store_true", help="trace the pages again even if cached")
    parser.add_argument("--every-page", action="store_true",
                        help="run every page a mutant reaches, also after another page of its chapter caught it")
    args = parser.parse_args()
    pages = args.pages or pages_with_claims()
    traced = trace(pages, args.parallel, args.retrace, cached_only=args.report)
    all_points = mutation_points()
    points = with_pages(all_points, traced, pages)
    mutants = sample(points, args.count, args.seed)
    print(f"{len(all_points)} mutation points, {len(points)} reached by the pages; drew {len(mutants)}")
    if args.list:
        for m in mutants:
            cost = sum(traced["pages"][p]["seconds"] for p in m.pages)
            print(f"  {m.label} [{m.kind}] pages: {' '.join(m.pages)} ({cost:.0f} s traced)")
        total = sum(traced["pages"][p]["seconds"] for m in mutants for p in m.pages)
        print(f"at most {total / 60:.0f} min of traced page time on one core")
        return
    if args.dry:
        page = min(pages, key=lambda p: traced["pages"][p]["seconds"])
        with tempfile.TemporaryDirectory(prefix="mutation-identity-") as scratch:
            outcome = run_page(page, mutated_package(None, Path(scratch)), Path(scratch) / "run")
        row = classify(outcome, traced["pages"][page]["records"])
        print(f"unmutated copy on {page}: {row['verdict']} ({outcome['seconds']:.0f} s untraced; must be "
              f"equivalent: the traced baseline is reproduced) {row['moved'][:3]}", flush=True)
        mutants = sorted(mutants, key=lambda m: sum(traced["pages"][p]["seconds"] for p in m.pages))[:2]
        outcomes = run_mutants(mutants, traced, args.parallel)
        for m in mutants:
            for p in m.pages:
                row = outcomes[f"{m.key}|{p}"]
                print(f"{row['verdict']:<10} {p}: {m.label} {row['failed_claim'] or ''} {row['moved'][:2]}")
        return
    outcomes = run_mutants([] if args.report else mutants, traced, args.parallel, args.every_page)
    if args.report:
        outcomes = cached_outcomes(traced, mutants)
    outcomes = {key: judged_by_golden(row, traced["pages"][row["page"]]["records"], row["page"])
                for key, row in outcomes.items()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    per_page, per_chapter = tally(mutants, outcomes, traced, pages)
    figure(per_chapter, RESULTS / "mutation.png")
    (RESULTS / "mutation.md").write_text(report(mutants, outcomes, traced, pages, args, len(points)))
    raw = [{**asdict(m), "outcomes": {p: outcomes.get(f"{m.key}|{p}") for p in m.pages}} for m in mutants]
    (RESULTS / "mutation.json").write_text(json.dumps({"seed": args.seed, "count": args.count, "sources": traced["key"],
                                                       "mutants": raw}, indent=1) + "\n")
    print("\n".join(table(per_chapter, "chapter")))
    print(f"report: {RESULTS / 'mutation.md'}")


if __name__ == "__main__":
    main()
