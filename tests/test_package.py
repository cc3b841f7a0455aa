"""The package's maps of its modules (the package docstring, the README) name every module."""

import re
from pathlib import Path

import dropnb
from dropnb.notebooks import ROOT

MODULES = sorted(p.stem for p in Path(dropnb.__file__).parent.glob("*.py") if p.stem != "__init__")


def test_the_package_docstring_names_every_module():
    named = set(re.findall(r":mod:`~dropnb\.(\w+)`", dropnb.__doc__))
    assert named == set(MODULES)


def test_the_readme_table_names_every_module():
    named = set(re.findall(r"^\| `dropnb\.(\w+)` \|", (ROOT / "README.md").read_text(), re.MULTILINE))
    assert named == set(MODULES)


def test_the_book_names_one_repository():
    """The repository named in the book's configuration is the one CITATION.cff names."""
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["repository-code"] == url
    assert url in (ROOT / "chapters" / "about.md").read_text()
