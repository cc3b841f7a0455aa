"""Planted bugs, run as forks of one clean run of their page.

A planted bug is code that replaces something in ``dropnb`` (a function, a property, a class
attribute); run before a chapter, it must make the chapter fail the claim named for it. Running the
whole chapter once per bug repeats, for every bug, the cells before the bug first acts. Here each
chapter runs once, cell by cell, in one process, with every attribute a bug replaces wrapped so that
the first call through it is noticed. Before each cell the process forks a paused copy of itself; when
the cell first calls an attribute that a bug replaces, that copy applies the bug and runs the chapter
from that cell on. Up to that cell the bug's code was never called, so the copy's state is the one a
run with the bug prepended would have there; from there on it is that run.

What a bug replaces is found by running its code in a forked process and comparing the attributes of
every ``dropnb`` module and class before and after. A replaced object that is not a function, a
property or a class or static method cannot be watched: that bug starts before the first cell. Calls
through references taken at import time (``from .x import f`` inside ``dropnb``) are not watched,
and a prepended bug would not reach them either.

Command line (the chapters' records and outcomes go under the folder)::

    python -m dropnb.book.planted FOLDER SPEC.json      # SPEC: [{"chapter", "code"}, ...]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import checks
from .claims import Claims, load_records
from .layout import CHAPTERS, CLAIMS_DIR_VARIABLE
from .notebooks import Job, Outcome, load_chapter

OUTCOME_FILE = "outcome.json"


@dataclass(frozen=True)
class Bug:
    """One planted bug: its chapter, its code and the folder its run writes to."""

    chapter: str
    code: str
    folder: Path


@dataclass
class _Watch:
    """A replaced attribute ``owner.name``: its original value and the wrapper that stands in for it
    during the clean run (``impl`` is what the wrapper calls; ``fired`` is set by the first call)."""

    owner: object
    name: str
    original: object
    wrapped: bool = False
    bugs: list[int] = field(default_factory=list)
    impl: object = None
    fired: bool = False


def chapter_cells(chapter: str, profile: str = "quick") -> list[str]:
    """The code cells of ``chapter`` with ``profile`` set after its parameters cell, as papermill does."""
    cells = []
    for cell in load_chapter(chapter).cells:
        if cell.cell_type != "code":
            continue
        cells.append(cell.source)
        if "parameters" in cell.metadata.get("tags", []):
            cells.append(f"profile = {profile!r}")
    return cells


def _attributes() -> dict[tuple[str, str, str], object]:
    """Every attribute of every loaded ``dropnb`` module and of the classes they define, keyed by
    (module, class or '', name)."""
    found = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == "dropnb" or module_name.startswith("dropnb.")):
            continue
        for name, value in list(vars(module).items()):
            found[(module_name, "", name)] = value
            if inspect.isclass(value) and value.__module__ == module_name:
                for attribute, member in list(vars(value).items()):
                    found[(module_name, name, attribute)] = member
    return found


def replaced_attributes(code: str) -> list[tuple[str, str, str]]:
    """The (module, class or '', name) attributes that running ``code`` replaces or adds; ``code``
    runs in a forked process, so nothing here changes."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child runs the bug and reports what changed
        os.close(read)
        status = 0
        try:
            _import_all()
            before = _attributes()
            exec(compile(code, "<planted bug>", "exec"), {"__name__": "__planted__"})
            after = _attributes()
            changed = [key for key, value in after.items() if key not in before or before[key] is not value]
            payload = json.dumps(changed)
        except BaseException:  # noqa: BLE001 - reported to the parent
            payload, status = json.dumps({"error": traceback.format_exc()}), 1
        with os.fdopen(write, "w") as pipe:
            pipe.write(payload)
        os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        payload = json.loads(pipe.read() or "null")
    os.waitpid(pid, 0)
    if not isinstance(payload, list):
        raise RuntimeError(f"the planted bug's code failed on its own:\n{payload and payload['error']}\n{code}")
    return [tuple(key) for key in payload]


def _owner(module_name: str, class_name: str) -> object:
    module = importlib.import_module(module_name)
    return getattr(module, class_name) if class_name else module


def _wrap(watch: _Watch, fire) -> object | None:
    """A stand-in for ``watch.original`` that calls ``fire(watch)`` then ``watch.impl``; ``None`` if the
    original cannot be watched (not a function, property, class or static method)."""
    original = watch.original

    def stand_in(function):
        watch.impl = function

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if not watch.fired:
                fire(watch)
            return watch.impl(*args, **kwargs)
        return wrapper

    if isinstance(original, property):
        return property(stand_in(original.fget), original.fset, original.fdel, original.__doc__)
    if isinstance(original, classmethod):
        return classmethod(stand_in(original.__func__))
    if isinstance(original, staticmethod):
        return staticmethod(stand_in(original.__func__))
    if inspect.isfunction(original) or inspect.isbuiltin(original):
        return stand_in(original)
    return None


def _underlying(value: object) -> object:
    """The function a property, class or static method (or a function) calls."""
    if isinstance(value, property):
        return value.fget
    if isinstance(value, (classmethod, staticmethod)):
        return value.__func__
    return value


class _Run:
    """The clean run of one chapter and the forks that run its bugs (see the module's note)."""

    def __init__(self, chapter: str, bugs: list[Bug], folder: Path, slots):
        self.chapter, self.bugs, self.folder, self.slots = chapter, bugs, folder, slots
        self.cells = chapter_cells(chapter)
        self.namespace = {"__name__": "__main__"}
        self.watches: list[_Watch] = []
        self.start = [None] * len(bugs)  # the cell before which each bug starts
        self.pending: list[int] = []     # bugs whose attribute the current cell first called

    def watch(self) -> None:
        """Wrap every attribute a bug replaces; a bug whose attribute cannot be wrapped starts at cell 0."""
        by_key: dict[tuple, _Watch] = {}
        for index, bug in enumerate(self.bugs):
            keys = replaced_attributes(bug.code)
            for key in keys:
                owner = _owner(key[0], key[1])
                original = vars(owner).get(key[2])
                if key not in by_key:
                    by_key[key] = _Watch(owner, key[2], original)
                    wrapper = None if original is None else _wrap(by_key[key], self._fire)
                    if wrapper is None:
                        by_key[key].fired = True  # cannot be watched: acts from the start
                    else:
                        setattr(owner, key[2], wrapper)
                        by_key[key].wrapped = True
                by_key[key].bugs.append(index)
            if not keys or any(by_key[key].fired for key in keys):
                self.start[index] = 0
        self.watches = list(by_key.values())

    def _fire(self, watch: _Watch) -> None:
        watch.fired = True
        self.pending += [b for b in watch.bugs if self.start[b] is None and b not in self.pending]

    def run(self) -> None:
        """Run the chapter cell by cell; fork the bugs' runs; wait for them; write every outcome."""
        os.environ[CLAIMS_DIR_VARIABLE] = str(self.folder / "clean")
        os.chdir(CHAPTERS)
        self.watch()
        snapshots = []
        clean_error = None
        with self.slots:
            for index, source in enumerate(self.cells):
                self.pending = [b for b in range(len(self.bugs)) if self.start[b] == index]
                if all(start is not None for start in self.start) and not self.pending:
                    break  # every bug has started: the clean run has nothing left to do
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(write)
                    self._snapshot(index, read)
                os.close(read)
                try:
                    self._execute(index, source)
                except BaseException:  # noqa: BLE001 - the clean chapter failed: every waiting bug says so
                    clean_error = traceback.format_exc()
                for bug in self.pending:
                    self.start[bug] = index
                with os.fdopen(write, "w") as pipe:
                    pipe.write(json.dumps(self.pending))
                snapshots.append(pid)
                if clean_error:
                    break
        for pid in snapshots:
            os.waitpid(pid, 0)
        for index, bug in enumerate(self.bugs):
            if self.start[index] is None:  # never reached: a prepended run would have run the page unchanged
                message = clean_error or "the chapter ran to its end without calling what the bug replaces"
                self._write_outcome(bug, 0 if clean_error is None else 1, message, 0.0)

    def _execute(self, index: int, source: str) -> None:
        import matplotlib.pyplot as plt

        exec(compile(source, f"<{self.chapter} cell {index}>", "exec"), self.namespace)
        plt.close("all")  # as the notebook's inline backend does after each cell

    def _snapshot(self, index: int, pipe_end: int) -> None:
        """The paused copy before cell ``index``: wait for the bugs that cell started, run each in a
        fork of its own, wait for them, exit."""
        try:
            with os.fdopen(pipe_end) as pipe:
                started = json.loads(pipe.read() or "[]")
            children = {}
            for bug in started:
                self.slots.acquire()
                pid = os.fork()
                if pid == 0:
                    self._run_bug(bug, index)
                children[pid] = bug
            for pid, bug in children.items():
                _, status = os.waitpid(pid, 0)
                if not (self.bugs[bug].folder / OUTCOME_FILE).exists():  # killed before it could say so
                    self.slots.release()
                    self._write_outcome(self.bugs[bug], 1, f"the run stopped with wait status {status}", 0.0)
        finally:
            os._exit(0)

    def _run_bug(self, bug: int, index: int) -> None:
        """In a fork: apply bug ``bug`` as if it had run before the chapter, run the cells from ``index``."""
        start, returncode, error = time.perf_counter(), 0, ""
        spec = self.bugs[bug]
        try:
            for watch in self.watches:  # the modules as they were, for the bug's code to read and replace
                if watch.wrapped:
                    setattr(watch.owner, watch.name, watch.original)
            names_before = dict(self.namespace)
            exec(compile(spec.code, "<planted bug>", "exec"), self.namespace)
            self.namespace.update(names_before)  # the cells before this one ran after the bug: theirs win
            for watch in self.watches:
                watch.fired = True
                if bug in watch.bugs:  # references to the stand-in now reach the bug
                    watch.impl = _underlying(vars(watch.owner).get(watch.name))
            self._redirect_claims(spec.folder)
            for cell in range(index, len(self.cells)):
                self._execute(cell, self.cells[cell])
        except BaseException:  # noqa: BLE001 - the outcome of the run
            returncode, error = 1, traceback.format_exc()
        finally:
            self._write_outcome(spec, returncode, error, time.perf_counter() - start)
            self.slots.release()
            os._exit(returncode)

    def _redirect_claims(self, folder: Path) -> None:
        """Make the page's claims write to the bug's folder, the records so far included."""
        folder.mkdir(parents=True, exist_ok=True)
        os.environ[CLAIMS_DIR_VARIABLE] = str(folder)
        for value in list(self.namespace.values()):
            if isinstance(value, Claims):
                value.path = folder / value.path.name
                value.path.write_text("".join(json.dumps(asdict(record), ensure_ascii=False) + "\n"
                                              for record in value.records))

    @staticmethod
    def _write_outcome(bug: Bug, returncode: int, error: str, seconds: float) -> None:
        bug.folder.mkdir(parents=True, exist_ok=True)
        (bug.folder / OUTCOME_FILE).write_text(json.dumps(
            dict(chapter=bug.chapter, returncode=returncode, error=error[-3000:], seconds=seconds)))


def _import_all() -> None:
    """Load every ``dropnb`` module once, before the forks, so that what a bug replaces is found among
    the loaded modules' attributes (modules that need what this environment lacks are left out)."""
    import pkgutil

    import dropnb

    for info in pkgutil.walk_packages(dropnb.__path__, "dropnb."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            pass


def run_bugs(bugs: list[Bug], parallel: int = 1) -> None:
    """Run every bug (in this process's forks: call it from a process of its own, see :func:`run`);
    at most ``parallel`` chapters or bug runs compute at a time."""
    parallel = checks.integer(parallel, "parallel", minimum=1)
    os.environ.setdefault("MPLBACKEND", "Agg")
    _import_all()

    slots = multiprocessing.get_context("fork").Semaphore(parallel)
    chapters = {}
    for bug in bugs:
        chapters.setdefault(bug.chapter, []).append(bug)
    runs = []
    for chapter, chapter_bugs in chapters.items():
        pid = os.fork()
        if pid == 0:
            try:
                _Run(chapter, chapter_bugs, chapter_bugs[0].folder.parent / f"clean-{chapter}", slots).run()
            except BaseException:  # noqa: BLE001 - the chapter could not be run: its bugs say why
                error = traceback.format_exc()
                for bug in chapter_bugs:
                    if not (bug.folder / OUTCOME_FILE).exists():
                        _Run._write_outcome(bug, 1, error, 0.0)
            finally:
                os._exit(0)
        runs.append(pid)
    for pid in runs:
        os.waitpid(pid, 0)


def run(bugs: list[tuple[str, str]], folder: Path, parallel: int = 1) -> list[Outcome]:
    """Run the planted bugs ``(chapter, code)`` at ``quick`` in a process of their own; return one
    :class:`~dropnb.book.notebooks.Outcome` per bug, in order (records in ``folder/bug-<k>``)."""
    for chapter, code in bugs:
        load_chapter(chapter)
        checks.text(code, "code")
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(len(bugs)):
        shutil.rmtree(folder / f"bug-{k}", ignore_errors=True)
    spec = folder / "bugs.json"
    spec.write_text(json.dumps([dict(chapter=chapter, code=code) for chapter, code in bugs]))
    log = folder / "log.txt"
    with log.open("w") as output:
        subprocess.run([sys.executable, "-m", "dropnb.book.planted", str(folder), str(spec), "--parallel", str(parallel)],
                       stdout=output, stderr=subprocess.STDOUT)
    outcomes = []
    for k, (chapter, code) in enumerate(bugs):
        bug_folder = folder / f"bug-{k}"
        job = Job(chapter, bug_folder, prepend=code)
        path = bug_folder / OUTCOME_FILE
        if not path.exists():
            outcomes.append(Outcome(job, 1, 0.0, [], f"no outcome written; the runner's output ends:\n"
                                                      f"{log.read_text()[-3000:]}"))
            continue
        written = json.loads(path.read_text())
        records = load_records(bug_folder, [chapter]).get(chapter, [])
        outcomes.append(Outcome(job, written["returncode"], written["seconds"], records, written["error"]))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dropnb.book.planted", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("spec", type=Path, help='JSON list of {"chapter": ..., "code": ...}')
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    entries = json.loads(args.spec.read_text())
    folder = args.folder.resolve()
    run_bugs([Bug(e["chapter"], e["code"], folder / f"bug-{k}") for k, e in enumerate(entries)], args.parallel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
