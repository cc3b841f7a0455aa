"""The package's maps of its modules (the docstrings, the README) name every module, and its layout
holds: the mathematics at the top level, the book's machinery under ``dropnb.book``, no import cycle."""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import dropnb
import dropnb.book
from dropnb.book.layout import ROOT

PACKAGE = Path(dropnb.__file__).parent
MATHEMATICS = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
BOOK = sorted(p.stem for p in (PACKAGE / "book").glob("*.py") if p.stem != "__init__")
# What the book's machinery may import of the mathematics: the argument validators.
SHARED = {"dropnb.checks"}


def module_files() -> dict[str, Path]:
    """Every module of dropnb by its dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


FILES = module_files()


def imports(name: str) -> set[str]:
    """The dropnb modules that module ``name`` imports anywhere in its source (at the top or inside a
    function), read with ``ast``: ``from . import x`` and ``from dropnb import x`` name the module x,
    ``from .x import y`` the module x (or x.y where that is a module)."""
    path = FILES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "dropnb"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "dropnb":
                continue
            for alias in node.names:
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in FILES else source)
    return {module for module in found if module in FILES} - {name}


GRAPH = {name: imports(name) for name in FILES}


def is_book(name: str) -> bool:
    return name == "dropnb.book" or name.startswith("dropnb.book.")


def is_mathematics(name: str) -> bool:
    return name.count(".") == 1 and not is_book(name)


LONGEST_MODULE = 600  # lines: one model or tool a module, read in one sitting


def test_no_module_is_longer_than_six_hundred_lines():
    lengths = {path.relative_to(PACKAGE.parent): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert not {str(path): n for path, n in lengths.items() if n > LONGEST_MODULE}


def test_every_mathematical_module_opens_with_its_model():
    """A module docstring of a few lines at least: the model or tool, and its conventions."""
    short = [name for name in MATHEMATICS
             if len((importlib.import_module(f"dropnb.{name}").__doc__ or "").strip().splitlines()) < 3]
    assert not short


def test_the_package_docstring_names_every_mathematical_module():
    named = set(re.findall(r":mod:`~dropnb\.(\w+)`", dropnb.__doc__))
    assert named == set(MATHEMATICS)


def test_the_book_docstring_names_every_module_of_the_book():
    named = set(re.findall(r":mod:`~dropnb\.book\.(\w+)`", dropnb.book.__doc__))
    assert named == set(BOOK)


def test_the_readme_table_names_every_module():
    named = set(re.findall(r"^\| `dropnb\.([\w.]+)` \|", (ROOT / "README.md").read_text(), re.MULTILINE))
    assert named == set(MATHEMATICS) | {f"book.{name}" for name in BOOK}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (its nodes, the first one repeated at the end), or None."""
    state: dict[str, str] = {}

    def visit(path: list[str]) -> list[str] | None:
        state[path[-1]] = "open"
        for other in sorted(graph[path[-1]]):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state and (cycle := visit(path + [other])):
                return cycle
        state[path[-1]] = "done"
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit([name])):
            return cycle
    return None


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_the_graph_reads_relative_and_absolute_imports():
    assert {"dropnb.checks", "dropnb.book.layout", "dropnb.book.render"} <= GRAPH["dropnb.book.claims"]
    assert "dropnb.book.threads" in GRAPH["dropnb"] and "dropnb.book.timing" in GRAPH["dropnb.book.sphinxext"]
    assert {"dropnb.checks", "dropnb.engine"} <= GRAPH["dropnb.relu_lazy"]


def test_the_book_imports_no_mathematics_but_checks():
    found = {(name, other) for name in FILES if is_book(name) for other in GRAPH[name]
             if is_mathematics(other) and other not in SHARED}
    assert not found, f"modules of dropnb.book import mathematical modules: {sorted(found)}"


def test_no_mathematical_module_imports_the_book():
    found = {(name, other) for name in FILES if is_mathematics(name) for other in GRAPH[name]
             if is_book(other) or other == "dropnb"}
    assert not found, f"mathematical modules import the book's machinery: {sorted(found)}"


def test_the_sphinx_extension_loads_without_torch_or_the_mathematics():
    code = ("import sys, dropnb.book.sphinxext, dropnb.book.bibliography\n"
            "print(' '.join(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.') "
            "or (m.startswith('dropnb.') and m.count('.') == 1 and m not in ('dropnb.book', 'dropnb.checks')))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [], f"loading the Sphinx extension imported {result.stdout.split()}"


def test_the_book_names_one_repository():
    """The repository named in the book's configuration is the one CITATION.cff names."""
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["repository-code"] == url
    assert url in (ROOT / "chapters" / "about.md").read_text()


# One code name per concept: θ is ``retain``, λ = (1 − θ)/θ (the dropout regularizer's weight) is
# ``lam``, a weight decay is ``decay``.
DROPOUT_LAM = {"deep", "dropconnect", "landscape", "linear", "relu_capacity", "rounding", "sensing", "shrinkage"}
WEIGHT_DECAY = {"factorization", "relu_decay", "relu_polar"}


def public_signatures():
    """(module, qualified name, parameter names) of every public function, class and public method of
    the mathematical modules."""
    import importlib
    import inspect
    for stem in MATHEMATICS:
        module = importlib.import_module(f"dropnb.{stem}")
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            members = [(name, value)]
            if inspect.isclass(value):
                members += [(f"{name}.{m}", f) for m, f in vars(value).items()
                            if not m.startswith("_") and inspect.isfunction(f)]
            for qualname, member in members:
                if callable(member):
                    try:
                        parameters = inspect.signature(member).parameters
                    except (TypeError, ValueError):
                        continue
                    yield stem, qualname, member, list(parameters)


def test_one_name_for_the_retain_probability_the_dropout_weight_and_the_weight_decay():
    signatures = list(public_signatures())
    assert [(m, q) for m, q, _, names in signatures if "theta" in names] == []
    assert {m for m, _, _, names in signatures if "lam" in names} <= DROPOUT_LAM
    for module in WEIGHT_DECAY:
        assert any("decay" in names for m, _, _, names in signatures if m == module)
    weight_decay = [(m, q) for m, q, f, names in signatures if "lam" in names and "weight decay" in (f.__doc__ or "")]
    assert weight_decay == []
    for name in ("factorization_gradient", "relu_value", "relu_gradient"):
        names = [names for m, q, _, names in signatures if (m, q) == ("rounding", name)][0]
        assert "decay" in names and "lam" not in names
