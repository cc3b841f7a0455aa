"""The chapter runner: loading chapters, jobs in separate processes and their outcomes."""

import re

import pytest

from dropnb.notebooks import (CHAPTERS, CODE_PATHS, Job, Outcome, chapters_with_claims, execute, load_chapter, run_job,
                              run_jobs)


def test_every_ledger_chapter_loads_with_its_parameters_cell():
    for name in chapters_with_claims():
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


@pytest.mark.parametrize("page", chapters_with_claims())
def test_every_page_opens_with_its_idea_and_closes_with_a_summary(page):
    """The chapter template (CONTRIBUTING.md): a short opening under the title, then "The idea" with
    a figure and the "On this page" box; at the end a Summary section and the claims table."""
    text = (CHAPTERS / f"{page}.md").read_text()
    body = text.split("\n---\n", 1)[1].lstrip("\n")
    title, rest = body.split("\n", 1)
    assert title.startswith("# ")
    opening, idea = rest.split("\n## The idea\n", 1)
    prose = re.sub(r"```\{code-cell\}.*?\n```", "", opening, flags=re.S)
    assert "\n## " not in prose and 0 < len(prose.split()) <= OPENING_WORDS, \
        f"the opening has {len(prose.split())} words (at most {OPENING_WORDS}) or a heading"
    idea = idea.split("\n## ", 1)[0]
    assert re.search(r"^    name: fig-", idea, re.MULTILINE), "The idea shows no figure"
    assert re.search(r"```\{admonition\} On this page\n:class: chapter-overview\n", idea)
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings[-2:] == ["Summary", "Claims of this chapter"]


GLUE_IN_MATH = re.compile(r"\$\{glue:\w+\}`[^`]*`\$")  # $…${glue:text}`x`$…$: a role between two formulas


@pytest.mark.parametrize("page", chapters_with_claims())
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
    import psutil

    before = {p.pid for p in psutil.process_iter() if "ipykernel" in " ".join(p.cmdline())}
    outcome = run_job(Job("convergence", tmp_path, profile="book", timeout=8.0))
    assert outcome.timed_out and outcome.returncode != 0 and outcome.seconds < 60
    assert outcome.error.endswith("stopped at the time limit of 8 s")
    after = {p.pid for p in psutil.process_iter() if "ipykernel" in " ".join(p.cmdline())}
    assert after <= before, "the kernel of the stopped job is still running"


@pytest.mark.parametrize("timeout", [0, -1.0, "10"])
def test_a_job_refuses_a_time_limit_that_is_not_positive(timeout, tmp_path):
    with pytest.raises(ValueError, match="^timeout must"):
        Job("regularizer", tmp_path, timeout=timeout)
