"""The GPU kit: the lock names every wheel a bare CUDA image lacks to run the pages, no second copy of
what it has, and resolves and downloads for Python 3.12.

The last two tests ask the package registry (as `make test` does when it installs the environment)."""

import pytest

from dropnb.book import gpukit
from dropnb.book.gpukit import Wheel
from dropnb.book.layout import ROOT


def wheel(name, version="1.0", sha256="a" * 64, requires=()) -> Wheel:
    return Wheel(name, version, sha256, tuple(requires))


def offered_for_the_kit() -> dict:
    """A small world: the kit's roots need ``aiohttp`` only on 3.12 and numpy (the image's) everywhere."""
    roots = {gpukit.canonical(r.split("==")[0]): r.split("==")[1] for r in gpukit.kit_roots()[0]}
    offered = {name: wheel(name, version) for name, version in roots.items()}
    offered["papermill"] = wheel("papermill", roots["papermill"],
                                 requires=['aiohttp>=3.9; python_version == "3.12"', "numpy"])
    offered["aiohttp"] = wheel("aiohttp", "3.9", sha256="b" * 64)
    offered |= {name: wheel(name) for name in gpukit.IMAGE if name != "torch"}
    return offered


def kit_of(offered: dict, *leave_out: str) -> dict:
    image = set(gpukit.IMAGE)
    return {n: (w.version, {w.sha256}) for n, w in offered.items() if n not in image and n not in leave_out}


def test_markers_are_read_for_the_target_python():
    papermill = offered_for_the_kit()["papermill"]
    assert [r.name for r in gpukit.needs(papermill, "3.12")] == ["aiohttp", "numpy"]
    assert [r.name for r in gpukit.needs(papermill, "3.11")] == ["numpy"]


def test_audit_accepts_a_complete_kit():
    offered = offered_for_the_kit()
    assert gpukit.audit(kit_of(offered), offered, "3.12") == []


def test_audit_finds_a_wheel_needed_only_on_3_12_missing():
    offered = offered_for_the_kit()
    kit = kit_of(offered, "aiohttp")
    assert gpukit.audit(kit, offered, "3.12") == ["aiohttp is needed on Python 3.12 and missing from the kit"]
    assert gpukit.audit(kit, offered, "3.11") == []


def test_audit_refuses_a_second_copy_of_numpy_or_torch_and_a_missing_hash():
    offered = offered_for_the_kit()
    kit = kit_of(offered) | {"numpy": ("2.4.6", {"c" * 64}), "torch": ("2.13.0", {"d" * 64})}
    kit["aiohttp"] = ("3.9", {"e" * 64})
    assert gpukit.audit(kit, offered, "3.12") == [
        "numpy is in the image already: the kit would install a second copy",
        "torch is in the image already: the kit would install a second copy",
        "aiohttp 3.9: the wheel for Python 3.12 has no hash in the kit"]


def test_the_lock_pins_every_wheel_by_hash_and_no_wheel_of_the_image():
    kit = gpukit.locked()
    assert not set(kit) & set(gpukit.IMAGE)
    assert all(version and hashes for version, hashes in kit.values())
    for name in gpukit.RUNNER + gpukit.RUN_TIME + gpukit.WITHOUT_DEPENDENCIES + ("recbole", "mlxtend"):
        assert name in kit, name
    book = gpukit.pins(ROOT / "requirements.txt") | gpukit.pins(gpukit.DATA)
    assert all(kit[name][0] == version for name, version in book.items() if name in kit)


@pytest.mark.parametrize("python", ["4.0", 3.12])
def test_only_the_kits_pythons_are_accepted(python):
    with pytest.raises(ValueError, match="^python must be one of"):
        gpukit.marker_environment(python)


def test_the_lock_resolves_for_python_3_12_with_nothing_of_the_image():
    assert gpukit.check("3.12") == []


def test_the_kit_downloads_for_python_3_12_within_its_size(tmp_path):
    folder = gpukit.fetch("3.12", tmp_path)
    wheels = sorted(folder.glob("*.whl"))
    assert len(wheels) == len(gpukit.locked())
    assert sum(w.stat().st_size for w in wheels) <= gpukit.SIZE_LIMIT
    assert not [w for w in wheels if w.name.split("-")[0] in ("torch", "numpy")]
    assert not [w for w in wheels if "-cp311-cp311-" in w.name]  # the wheels of 3.12 (or abi3, or pure)
