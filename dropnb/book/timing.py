"""What a page run cost: wall time, device, peak GPU memory, claims and slowest cells, as one row.

A row is the JSON object that ``benchmarks/book.py`` and ``benchmarks/gpu.py`` write for every page
they run and that the reproducibility page shows from ``benchmarks/results/<profile>-<device>.json``:

``page``, ``profile``, ``seed`` (None: the page's own), ``date`` (UTC, ISO 8601), ``commit``,
``seconds``, ``time_limit`` (None: none), ``timed_out``, ``returncode``, ``device`` (where the page
computed, as its records say: ``cpu`` or ``cuda``), ``device_name`` (the GPU's name, else the
processor's), ``torch``, ``python``, ``peak_gpu_bytes`` (None without a GPU), ``claims_passed``,
``claims_total``, ``claims_expected`` (the page's ids in the ledger), ``slowest_cells`` (seconds,
index, first line) and ``error`` (the last line of the error output of a failed run, else "").

A row is *complete* when the page ran to its end with every ledger claim recorded and holding.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import nbformat

from .. import checks
from .layout import ROOT, ledger
from .notebooks import Job, Outcome

RESULTS = ROOT / "benchmarks" / "results"
PROBE_FILE = "probe.json"
# Run before the page, in its kernel: after every cell, write what ran it and the peak GPU memory so far.
PROBE = """
def _dropnb_probe(result=None, _path={path!r}):
    import json as _json, os as _os, platform as _platform, torch as _torch
    cuda = _torch.cuda.is_available()
    if cuda:
        name = _torch.cuda.get_device_name()
    else:
        models = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")] \\
            if _os.path.exists("/proc/cpuinfo") else []
        name = f"{{models[0] if models else _platform.processor() or _platform.machine()}}, {{_os.cpu_count()}} cores"
    with open(_path, "w") as handle:
        _json.dump({{"device_name": name, "torch": _torch.__version__, "python": _platform.python_version(),
                    "peak_gpu_bytes": _torch.cuda.max_memory_allocated() if cuda else None}}, handle)
_dropnb_probe()
get_ipython().events.register("post_run_cell", _dropnb_probe)
"""
ROW_KEYS = ("page", "profile", "seed", "date", "commit", "seconds", "time_limit", "timed_out", "returncode", "device",
            "device_name", "torch", "python", "peak_gpu_bytes", "claims_passed", "claims_total", "claims_expected",
            "slowest_cells", "error")


def probed_job(page: str, folder: Path, profile: str, seed: int | None = None, environment: dict | None = None,
               timeout: float | None = None) -> Job:
    """A :class:`~dropnb.book.notebooks.Job` that runs ``page`` with the probe prepended (its notebook and
    records go to ``folder``)."""
    folder = Path(folder)
    return Job(page, folder, profile=profile, seed=seed, environment=environment or {}, timeout=timeout,
               prepend=PROBE.format(path=str((folder / PROBE_FILE).resolve())))


def slowest_cells(notebook: Path, count: int = 3) -> list[dict]:
    """The ``count`` cells of an executed notebook that took longest (papermill's durations; a run
    stopped at its limit has them up to its last saved cell): seconds, index in the page (the probe
    left out) and first line."""
    if not Path(notebook).is_file():
        return []
    cells = [((cell.metadata.get("papermill", {}).get("duration") or 0.0), index, cell.source)
             for index, cell in enumerate(nbformat.read(notebook, as_version=4).cells[1:]) if cell.cell_type == "code"]

    def first_line(source: str) -> str:
        return next((line for line in source.splitlines() if line.strip() and not line.startswith(":")), "")

    return [{"seconds": round(seconds, 2), "cell": index, "first_line": first_line(source)[:60]}
            for seconds, index, source in sorted(cells, key=lambda c: (-c[0], c[1]))[:count]]


def commit() -> str | None:
    """The checkout's commit: ``$DROPNB_COMMIT`` where set (a copy of the tree without its history), else
    git's short hash, else None."""
    if os.environ.get("DROPNB_COMMIT"):
        return os.environ["DROPNB_COMMIT"]
    try:
        result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return None
    return result.stdout.strip() or None


def ledger_counts() -> dict[str, int]:
    """How many claim ids each page has in the committed ledger."""
    return {page: len(ids) for page, ids in ledger().items()}


def row(outcome: Outcome) -> dict:
    """The row of a finished :func:`probed_job` (see the module's docstring)."""
    job, folder = outcome.job, Path(outcome.job.folder)
    probe = folder / PROBE_FILE
    probed = json.loads(probe.read_text()) if probe.is_file() else {}
    records = outcome.records
    error = outcome.error.strip().splitlines()
    return {
        "page": job.chapter, "profile": job.profile, "seed": job.seed,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit(),
        "seconds": round(outcome.seconds, 2), "time_limit": job.timeout, "timed_out": outcome.timed_out,
        "returncode": outcome.returncode, "device": records[0]["device"] if records else None,
        "device_name": probed.get("device_name"), "torch": probed.get("torch"), "python": probed.get("python"),
        "peak_gpu_bytes": probed.get("peak_gpu_bytes"),
        "claims_passed": sum(bool(r["passed"]) for r in records), "claims_total": len(records),
        "claims_expected": ledger_counts().get(job.chapter),
        "slowest_cells": slowest_cells(folder / f"{job.chapter}.ipynb"),
        "error": error[-1] if error and (outcome.returncode or outcome.timed_out) else "",
    }


def complete(r: dict) -> bool:
    """Whether row ``r`` is a page that ran to its end with every ledger claim recorded and holding."""
    return (r["returncode"] == 0 and not r["timed_out"] and r["claims_total"] == r["claims_expected"]
            == r["claims_passed"])


def results_file(profile: str, device_name: str) -> Path:
    """``benchmarks/results/<profile>-<device>.json``: the device is the GPU's model (``NVIDIA H200``
    gives ``h200``), or ``cpu``."""
    match = re.search(r"\b([A-Z]\d{2,4}[A-Za-z]?)\b", device_name or "")
    device = match.group(1).lower() if match and "NVIDIA" in device_name.upper() else "cpu"
    return RESULTS / f"{profile}-{device}.json"


def gpu_name() -> str | None:
    """The first GPU's name as ``nvidia-smi`` gives it (``NVIDIA H200``), or None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    result = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    names = result.stdout.strip().splitlines()
    return names[0].strip() if result.returncode == 0 and names else None


def load_rows(path: Path) -> list[dict]:
    """The rows of a results file (a JSON list) or of a run's ``rows.jsonl`` (one object a line); none
    if the file does not exist."""
    path = Path(path)
    if not path.is_file():
        return []
    text = path.read_text()
    rows = json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line.strip()]
    for r in rows:
        missing = [key for key in ROW_KEYS if key not in r]
        if missing:
            raise ValueError(f"rows of {path} must have the keys {ROW_KEYS}; a row lacks {missing}")
    return rows


def merge(old: list[dict], new: list[dict], order: list[str]) -> list[dict]:
    """One row a page: a new row replaces the page's old one unless the old one is complete and the
    new one is not (a run that timed out does not hide a measured time); pages in ``order``."""
    rows = {r["page"]: r for r in old}
    for r in new:
        if r["page"] not in rows or complete(r) or not complete(rows[r["page"]]):
            rows[r["page"]] = r
    unknown = sorted(set(rows) - set(order))
    if unknown:
        raise ValueError(f"rows must be of pages in the ledger, got {unknown}")
    return [rows[page] for page in order if page in rows]


def missing(rows: list[dict], pages: list[str]) -> list[str]:
    """The pages of ``pages`` without a complete row, in their order."""
    done = {r["page"] for r in rows if complete(r)}
    return [page for page in pages if page not in done]


def write_rows(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` as a results file (a JSON list, one key a line)."""
    checks.instance(rows, "rows", list, "a list of rows")
    Path(path).write_text(json.dumps(rows, indent=1) + "\n")


def load_estimates(path: Path = RESULTS / "estimates.json") -> dict[str, float]:
    """The estimated seconds of each page at ``full`` on one GPU (``benchmarks/gpu.py estimate``)."""
    path = Path(path)
    return {r["page"]: float(r["seconds"]) for r in json.loads(path.read_text())} if path.is_file() else {}


def run_order(pages: list[str], rows: list[dict], estimates: dict[str, float]) -> list[str]:
    """``pages`` in the order a short GPU machine should run them: those without a complete row first,
    each group cheapest first by ``estimates`` (a page without an estimate last)."""
    todo = set(missing(rows, pages))

    def key(page: str) -> tuple:
        return (page not in todo, page not in estimates, estimates.get(page, 0.0), pages.index(page))

    return sorted(pages, key=key)


def next_page(order: list[str], estimates: dict[str, float], left: float, limit: float) -> str | None:
    """The first page of ``order`` whose estimate (``limit`` where it has none) fits in the ``left``
    seconds, or None."""
    return next((page for page in order if estimates.get(page, limit) <= left), None)


def _seconds(r: dict) -> str:
    stopped = r["timed_out"] or r["returncode"]
    return f"over {r['seconds']:,.0f}" if r["timed_out"] else f"{r['seconds']:,.0f}" + (" (failed)" if stopped else "")


def table(profile: str, pages: list[str], folder: Path = RESULTS) -> str:
    """The timing tables of ``profile`` as MyST Markdown, one per results file ``<profile>-<device>.json``
    in ``folder``, a row per page of ``pages`` (with the estimate on one GPU at ``full``), then, at
    ``full``, the pages that no GPU has run to their end yet."""
    estimates = load_estimates(folder / "estimates.json") if profile == "full" else {}
    files = sorted(folder.glob(f"{profile}-*.json"))
    text, on_gpu = [], set()
    for path in files:
        rows = {r["page"]: r for r in load_rows(path)}
        devices = sorted({str(r["device_name"] or r["device"]) for r in rows.values()})
        gpu = any(r["peak_gpu_bytes"] is not None for r in rows.values())
        on_gpu |= {page for page, r in rows.items() if gpu and complete(r)}
        done = sum(complete(r) for r in rows.values())
        text += [f"`{path.name}` ({', '.join(devices)}): {done} of {len(pages)} pages ran to their end with every "
                 "claim holding.", "",
                 "| page |" + (" estimate on one GPU (s) |" if estimates else "") +
                 " seconds | date | claims held | peak GPU memory | slowest cell |",
                 "|---|" + ("---|" if estimates else "") + "---|---|---|---|---|"]
        for page in pages:
            estimate = f" {estimates[page]:,.0f} |" if page in estimates else (" |" if estimates else "")
            r = rows.get(page)
            if r is None:
                text.append(f"| {page} |{estimate} not run | | | | |")
                continue
            peak = f"{r['peak_gpu_bytes'] / 2**30:.1f} GiB" if r["peak_gpu_bytes"] is not None else "no GPU"
            cells = r["slowest_cells"]
            cell = f"{cells[0]['seconds']:,.0f} s (cell {cells[0]['cell']})" if cells else "not recorded"
            text.append(f"| {page} |{estimate} {_seconds(r)} | {(r['date'] or '')[:10]} | {r['claims_passed']} of "
                        f"{r['claims_expected']} | {peak} | {cell} |")
        text.append("")
    if profile == "full":
        left = [page for page in pages if page not in on_gpu]
        text.append(f"Pages not yet run to their end at `full` on a GPU: {', '.join(left)}." if left
                    else "Every page has run to its end at `full` on a GPU.")
    if not files and profile != "full":
        text.append(f"No timing at profile `{profile}` is committed yet: `python benchmarks/book.py --profile "
                    f"{profile} --json benchmarks/results/{profile}-cpu.json` writes one.")
    return "\n".join(text)
