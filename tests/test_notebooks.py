"""The chapter runner: loading chapters, jobs in separate processes and their outcomes."""

import re

import pytest

from dropnb.book.layout import CHAPTERS, CLAIMS_DIR_VARIABLE, pages_with_claims, table_of_contents
from dropnb.book.notebooks import CODE_PATHS, Job, Outcome, execute, load_chapter, run_job, run_jobs


def test_every_ledger_chapter_loads_with_its_parameters_cell():
    for name in pages_with_claims():
        cells = [c for c in load_chapter(name).cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1 and "profile = None" in cells[0].source and "seed = None" in cells[0].source


def test_unknown_chapter_raises():
    with pytest.raises(ValueError, match="^name must be a chapter"):
        load_chapter("no-such-chapter")


def test_unknown_profile_raises(tmp_path):
    with pytest.raises(ValueError, match="^profile must"):
        execute("regularizer", tmp_path / "x.ipynb", profile="fast")


@pytest.mark.parametrize("old", ["no such code", "claims.claim("])
def test_replace_must_name_code_in_exactly_one_cell(old, tmp_path):
    with pytest.raises(ValueError, match="^replace must"):
        execute("regularizer", tmp_path / "x.ipynb", replace=(old, "x"))


@pytest.mark.parametrize("parallel", [0, -1, 1.5, True])
def test_run_jobs_rejects_bad_parallelism(parallel, tmp_path):
    with pytest.raises(ValueError, match="^parallel must"):
        list(run_jobs([Job("regularizer", tmp_path)], parallel))


def test_outcome_lists_the_failed_claims(tmp_path):
    records = [{"id": "a", "passed": True}, {"id": "b", "passed": False}]
    assert Outcome(Job("regularizer", tmp_path), 1, 2.0, records, "").failed_claims == ["b"]


def test_code_paths_differ_from_the_defaults():
    for threads, environment in CODE_PATHS.values():
        assert threads in (1, 2) and "OPENBLAS_CORETYPE" in environment
    assert len({env["OPENBLAS_CORETYPE"] for _, env in CODE_PATHS.values()}) == len(CODE_PATHS) >= 3


OPENING_WORDS = 120  # "at most about 100 words": the question, the answer, the one surprise


def opening_and_rest(page: str) -> tuple[str, str, str]:
    """(title line, the prose of the opening without its code cells, what follows the opening)."""
    body = (CHAPTERS / f"{page}.md").read_text().split("\n---\n", 1)[1].lstrip("\n")
    title, rest = body.split("\n", 1)
    opening, after = rest.split("\n## ", 1)
    prose = re.sub(r"```\{code-cell\}.*?\n```", "", opening, flags=re.S)
    assert 0 < len(prose.split()) <= OPENING_WORDS, f"the opening has {len(prose.split())} words (at most {OPENING_WORDS})"
    return title, prose, "## " + after


def test_every_chapter_ends_with_its_exercises():
    toc = table_of_contents()
    chapters = [c for part in toc["parts"] for c in part["chapters"] if c["file"].removeprefix("chapters/") in
                pages_with_claims()]
    assert len(chapters) == 9
    for chapter in chapters:
        assert chapter["sections"][-1]["file"] == chapter["file"] + "-exercises", chapter["file"]


@pytest.mark.parametrize("page", [p for p in pages_with_claims() if p.endswith("-exercises")])
def test_every_exercise_has_a_solution_checked_by_a_claim(page):
    """The exercise template (CONTRIBUTING.md): a short opening, then "Exercise 1: …", … each with one
    solution in a dropdown and a cell that records a claim, and at the end the claims table."""
    title, _, rest = opening_and_rest(page)
    assert title.startswith("# Exercises: ")
    sections = rest.split("\n## ")
    headings = [s.split("\n", 1)[0].removeprefix("## ") for s in sections]
    assert headings[-1] == "Claims of this chapter" and len(headings) >= 4, headings
    for n, (heading, section) in enumerate(zip(headings[:-1], sections), 1):
        assert heading.startswith(f"Exercise {n}: "), heading
        assert section.count(":::{dropdown} Solution\n") == 1, heading
        assert re.search(r"claims\.(claim|erratum)\(", section), f"{heading}: no claim checks the solution"


@pytest.mark.parametrize("page", [p for p in pages_with_claims() if not p.endswith("-exercises")])
def test_every_page_opens_with_its_idea_and_closes_with_a_summary(page):
    """The chapter template (CONTRIBUTING.md): a short opening under the title, then "The idea" with
    a figure and the "On this page" box; at the end a Summary section and the claims table."""
    text = (CHAPTERS / f"{page}.md").read_text()
    title, _, rest = opening_and_rest(page)
    assert title.startswith("# ") and rest.startswith("## The idea\n"), "the opening is not followed by The idea"
    idea = rest.removeprefix("## The idea\n").split("\n## ", 1)[0]
    assert re.search(r"^    name: fig-", idea, re.MULTILINE), "The idea shows no figure"
    assert re.search(r"```\{admonition\} On this page\n:class: chapter-overview\n", idea)
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings[-2:] == ["Summary", "Claims of this chapter"]


GLUE_IN_MATH = re.compile(r"\$\{glue:\w+\}`[^`]*`\$")  # $…${glue:text}`x`$…$: a role between two formulas


@pytest.mark.parametrize("page", pages_with_claims())
def test_no_glue_sits_between_two_halves_of_a_formula(page):
    """A glued number written as ``$x\\in\\{${glue:text}`v`$\\}$`` splits one formula in two around it (a
    line break there leaves the role's source on the page): the number goes outside the formula."""
    found = GLUE_IN_MATH.findall((CHAPTERS / f"{page}.md").read_text())
    assert not found, found


def test_the_pattern_finds_a_glue_inside_a_formula():
    assert GLUE_IN_MATH.search("$\\nu\\in\\{${glue:text}`radii`$\\}$")
    assert not GLUE_IN_MATH.search("$\\nu =$ {glue:text}`radius:g`, $m = ${glue:text}`width:d`, and more")


@pytest.mark.chapters
def test_a_job_past_its_time_limit_is_stopped_with_its_kernel(tmp_path):
    outcome = run_job(Job("convergence", tmp_path, profile="book", timeout=8.0))
    assert outcome.timed_out and outcome.returncode != 0 and outcome.seconds < 60
    assert outcome.error.endswith("stopped at the time limit of 8 s")
    assert not kernels_writing_to(tmp_path), "the kernel of the stopped job is still running"


def kernels_writing_to(folder) -> list[int]:
    """The Jupyter kernels whose records go to ``folder`` (other work on the machine has kernels too)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if ("ipykernel" in " ".join(process.cmdline())
                    and process.environ().get(CLAIMS_DIR_VARIABLE) == str(folder.resolve())):
                found.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.parametrize("timeout", [0, -1.0, "10"])
def test_a_job_refuses_a_time_limit_that_is_not_positive(timeout, tmp_path):
    with pytest.raises(ValueError, match="^timeout must"):
        Job("regularizer", tmp_path, timeout=timeout)
