"""The chapter runner: loading chapters, jobs in separate processes and their outcomes."""

import pytest

from dropnb.notebooks import CODE_PATHS, Job, Outcome, chapters_with_claims, execute, load_chapter, run_jobs


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
