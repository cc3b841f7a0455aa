"""The GPU kit: the wheels a bare CUDA machine lacks to run the pages, fetched here and installed there
offline.

A bare GPU machine has Python with torch (CUDA), numpy, scipy, matplotlib, scikit-learn, tqdm and
threadpoolctl (:data:`IMAGE`, with what they require), and no network. To run a page it also needs
the runner (papermill, jupytext, nbclient, nbformat, ipykernel), what pages import at run time (the
Adversarial Robustness Toolbox; docutils for myst-nb's ``glue``) and, without their dependencies,
myst-nb and the two data wheels. ``requirements-gpu.txt`` pins every wheel of that closure that the
image lacks, by hash, for CPython 3.11 and 3.12 on manylinux x86-64 (glibc 2.28 or older). The
closure is computed here from the wheels' metadata with the markers of the target Python (pip's own
resolver reads them for the Python it runs on).

Command line (from the book's top folder; all three need the package registry)::

    python -m dropnb.book.gpukit fetch [--python 3.12]   # make gpu-kit: the pinned wheels into .gpu-kit/py3.12
    python -m dropnb.book.gpukit check [--python 3.12]   # the pins resolve for that Python, nothing of the image
    python -m dropnb.book.gpukit lock                    # resolve again and rewrite requirements-gpu.txt
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from .. import checks
from .layout import ROOT

LOCK = ROOT / "requirements-gpu.txt"
FOLDER = ROOT / ".gpu-kit"
PYTHONS = ("3.11", "3.12")  # 3.12 is the GPU image's; 3.11 is the book's, to try the kit on this machine
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(28, 4, -1)] + ["manylinux2014_x86_64", "manylinux2010_x86_64",
                                                                       "manylinux1_x86_64", "linux_x86_64", "any"]
IMAGE = ("torch", "numpy", "scipy", "matplotlib", "scikit-learn", "tqdm", "threadpoolctl")
RUNNER = ("papermill", "jupytext", "nbclient", "nbformat", "ipykernel")
RUN_TIME = ("adversarial-robustness-toolbox", "docutils")
WITHOUT_DEPENDENCIES = ("myst-nb",)  # its glue needs IPython, nbformat and docutils only
DATA = ROOT / "requirements-data.txt"
SIZE_LIMIT = 40 * 2**20  # bytes: the kit travels beside the working tree (64 MiB in all)


@dataclass(frozen=True)
class Wheel:
    """One distribution as the index offers it: name, version, the chosen wheel's SHA-256 and what it
    requires (its metadata's ``Requires-Dist``)."""

    name: str
    version: str
    sha256: str
    requires: tuple[str, ...]


def canonical(name: str) -> str:
    """A distribution's name as the index compares it (lower case, runs of ``-_.`` as ``-``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_environment(python: str) -> dict[str, str]:
    """The environment markers of CPython ``python`` (``3.12``) on Linux x86-64."""
    checks.choice(python, "python", PYTHONS)
    return {"python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "implementation_version": f"{python}.0",
            "extra": ""}


def pins(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a requirements file, by canonical name."""
    found = {}
    for line in Path(path).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line.strip())
        if match:
            found[canonical(match.group(1))] = match.group(2)
    return found


def _pip_report(requirements: list[str], python: str, constraints: dict[str, str], no_deps: bool = False) -> dict:
    """What pip would install for ``requirements`` as wheels for ``python`` on manylinux x86-64 (its
    ``--report``), without installing anything."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "requirements.txt").write_text("\n".join(requirements) + "\n")
        (folder / "constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(constraints.items())))
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
                   "--target", str(folder / "target"), "--report", str(folder / "report.json"),
                   "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
                   *[f"--platform={p}" for p in PLATFORMS], "-r", str(folder / "requirements.txt"),
                   "-c", str(folder / "constraints.txt"), *(["--no-deps"] if no_deps else [])]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            errors = [line for line in result.stderr.splitlines() if not line.startswith("WARNING: Location")]
            raise RuntimeError(f"pip could not resolve {requirements} for Python {python}:\n" + "\n".join(errors[-20:]))
        return json.loads((folder / "report.json").read_text())


def _wheels(report: dict) -> dict[str, Wheel]:
    wheels = {}
    for item in report["install"]:
        meta = item["metadata"]
        wheels[canonical(meta["name"])] = Wheel(canonical(meta["name"]), meta["version"],
                                                item["download_info"]["archive_info"]["hashes"]["sha256"],
                                                tuple(meta.get("requires_dist") or ()))
    return wheels


def needs(wheel: Wheel, python: str) -> list[Requirement]:
    """The requirements of ``wheel`` that hold on ``python`` (markers evaluated there; no extras)."""
    environment = marker_environment(python)
    found = []
    for text in wheel.requires:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            found.append(requirement)
    return found


def reach(roots: list[str], offered: dict[str, Wheel], python: str) -> tuple[dict[str, Wheel], set[str]]:
    """The wheels of ``offered`` that ``roots`` (requirement strings) need on ``python``, following the
    requirements whose markers hold there, and the names they need that ``offered`` lacks."""
    reached, missing, queue = {}, set(), [canonical(Requirement(r).name) for r in roots]
    while queue:
        name = queue.pop()
        if name in reached or name in missing:
            continue
        if name not in offered:
            missing.add(name)
            continue
        reached[name] = offered[name]
        queue += [canonical(r.name) for r in needs(offered[name], python)]
    return reached, missing


def closure(roots: list[str], python: str, constraints: dict[str, str] | None = None) -> dict[str, Wheel]:
    """Every distribution that ``roots`` need on ``python``: pip resolves, then the markers are read for
    ``python`` and what they add is resolved too, until nothing is missing."""
    extra: list[str] = []
    while True:
        needed, missing = reach(roots, _wheels(_pip_report(roots + extra, python, constraints or {})), python)
        if not missing:
            return needed
        extra += sorted(missing)


def image_roots() -> list[str]:
    """The requirements of a bare GPU image: :data:`IMAGE` with torch replaced by its requirements (read
    from the torch installed here), since the index need not offer the image's CUDA build."""
    torch_needs = [r for r in importlib.metadata.requires("torch") or () if "extra ==" not in r]
    return [name for name in IMAGE if name != "torch"] + torch_needs


def image(python: str) -> set[str]:
    """The distributions a bare GPU image holds on ``python``: :data:`IMAGE` and what it needs."""
    return set(closure(image_roots(), python)) | {"torch", "triton"}


def kit_roots() -> tuple[list[str], dict[str, str]]:
    """The requirements the kit resolves (pinned as in requirements.txt where it pins them) and those pins."""
    book = pins(ROOT / "requirements.txt")
    missing = [name for name in RUNNER + RUN_TIME + WITHOUT_DEPENDENCIES if name not in book]
    if missing:
        raise ValueError(f"requirements.txt must pin every package of the kit, got none for {missing}")
    return [f"{name}=={book[name]}" for name in RUNNER + RUN_TIME], book


def lock() -> str:
    """The text of ``requirements-gpu.txt``: every wheel the kit needs, pinned with its hashes for each
    Python of :data:`PYTHONS` (versions resolved for the GPU image's Python, the last, and held for
    the others; what another Python needs besides is added)."""
    roots, book = kit_roots()
    chosen: dict[str, str] = {}
    constraints = {name: version for name, version in book.items() if name not in IMAGE}
    for python in reversed(PYTHONS):
        provided = image(python)
        needed = closure(roots, python, constraints | chosen)
        chosen |= {name: wheel.version for name, wheel in needed.items() if name not in provided}
    chosen |= {name: book[name] for name in WITHOUT_DEPENDENCIES}
    hashes: dict[str, set[str]] = {name: set() for name in chosen}
    for python in PYTHONS:
        offered = _wheels(_pip_report([f"{n}=={v}" for n, v in sorted(chosen.items())], python, {}, no_deps=True))
        for name, wheel in offered.items():
            hashes[name].add(wheel.sha256)
    lines = [f"{name}=={chosen[name]} " + " ".join(f"--hash=sha256:{h}" for h in sorted(hashes[name]))
             for name in sorted(chosen)]
    data = [line for line in DATA.read_text().splitlines() if line and not line.startswith("#")]
    header = ("# The GPU kit (python -m dropnb.book.gpukit; make gpu-kit fetches it): the wheels a bare CUDA image with\n"
              "# " + ", ".join(IMAGE) + " lacks to run the pages, for CPython " + " and ".join(PYTHONS) + "\n"
              "# on manylinux x86-64, installed with --no-deps. Written by `python -m dropnb.book.gpukit lock`.\n")
    return header + "\n".join(lines + ["# The data wheels, as in requirements-data.txt.", *data]) + "\n"


def locked(path: Path = LOCK) -> dict[str, tuple[str, set[str]]]:
    """The lock file's wheels: canonical name to (version, SHA-256 hashes)."""
    found = {}
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = re.match(r"^([^=\s]+)==(\S+)", line).groups()
            found[canonical(name)] = (version, set(re.findall(r"--hash=sha256:([0-9a-f]{64})", line)))
    return found


def audit(kit: dict[str, tuple[str, set[str]]], offered: dict[str, Wheel], python: str) -> list[str]:
    """What is wrong with the locked ``kit`` (name to version and hashes) on ``python``, given the wheels
    pip ``offered`` for the kit's roots, its pins and the image's requirements resolved together: a
    needed wheel that is neither in the image nor in the kit, a wheel of the image in the kit (a second
    copy of torch or numpy), a wheel whose hash for that Python the kit lacks."""
    needed, missing = reach(kit_roots()[0], offered, python)
    provided = set(reach(image_roots(), offered, python)[0]) | {"torch", "triton"}
    problems = [f"{name} is in the image already: the kit would install a second copy" for name in sorted(kit)
                if name in provided or name in IMAGE]
    problems += [f"{name} is needed on Python {python} and missing from the kit"
                 for name in sorted(missing | set(needed)) if name not in provided and name not in kit]
    problems += [f"{name} {wheel.version}: the wheel for Python {python} has no hash in the kit"
                 for name, wheel in sorted(offered.items())
                 if name in kit and name not in provided and wheel.sha256 not in kit[name][1]]
    return problems


def check(python: str = "3.12", path: Path = LOCK) -> list[str]:
    """:func:`audit` of the lock file on ``python``, after one resolution of the kit's roots, its pins and
    the image's requirements together (needs the package registry)."""
    kit = locked(path)
    apart = set(WITHOUT_DEPENDENCIES) | set(pins(DATA))
    pinned = [f"{n}=={v}" for n, (v, _) in sorted(kit.items()) if n not in apart]
    return audit(kit, _wheels(_pip_report(kit_roots()[0] + pinned + image_roots(), python, {})), python)


def fetch(python: str = "3.12", folder: Path = FOLDER) -> Path:
    """Download the lock's wheels for ``python`` into ``folder/py<python>`` (hashes checked); return
    that folder. Raises when the kit is over :data:`SIZE_LIMIT`."""
    checks.choice(python, "python", PYTHONS)
    target = Path(folder) / f"py{python}"
    if target.exists():
        for old in target.glob("*.whl"):
            old.unlink()
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", *[f"--platform={p}" for p in PLATFORMS],
               "--require-hashes", "-r", str(LOCK), "-d", str(target)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"pip could not fetch the kit for Python {python}:\n{result.stderr[-3000:]}")
    wheels = sorted(target.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    if len(wheels) != len(locked()) or size > SIZE_LIMIT:
        raise RuntimeError(f"the kit must be the {len(locked())} locked wheels in at most {SIZE_LIMIT / 2**20:.0f} MiB, "
                           f"got {len(wheels)} wheels in {size / 2**20:.1f} MiB")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dropnb.book.gpukit", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("fetch", "download the pinned wheels into .gpu-kit/py<python>"),
                       ("check", "the pins resolve for that Python and name nothing of the image")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--python", choices=PYTHONS, default=PYTHONS[-1])
    commands.add_parser("lock", help="resolve the kit again and rewrite requirements-gpu.txt")
    args = parser.parse_args(argv)
    if args.command == "lock":
        LOCK.write_text(lock())
        print(f"wrote {LOCK.name}: {len(locked())} wheels")
        return 0
    if args.command == "check":
        problems = check(args.python)
        print("\n".join(problems) or f"the kit resolves for Python {args.python}: {len(locked())} wheels, "
                                    "none of them in the image")
        return 1 if problems else 0
    target = fetch(args.python)
    size = sum(w.stat().st_size for w in target.glob("*.whl"))
    print(f"{target.relative_to(ROOT)}: {len(locked())} wheels, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
