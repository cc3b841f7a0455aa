"""Planted bugs as forks of one chapter run: what a bug replaces is found, bad input is refused.
(The chapters' planted bugs themselves run in test_chapters.)"""

import pytest

from dropnb.book import planted


def test_a_replaced_function_is_found():
    code = "import dropnb.stats as _S\n_S.streaming_mean = lambda *a, **k: 0.0"
    assert planted.replaced_attributes(code) == [("dropnb.stats", "", "streaming_mean")]


def test_a_replaced_property_is_found_on_its_class():
    code = "import dropnb.masks as _M\n_M.Bernoulli.characteristic = property(lambda self: 0.0)"
    assert ("dropnb.masks", "Bernoulli", "characteristic") in planted.replaced_attributes(code)


def test_finding_what_a_bug_replaces_changes_nothing_here():
    import dropnb.stats

    before = dropnb.stats.streaming_mean
    planted.replaced_attributes("import dropnb.stats as _S\n_S.streaming_mean = None")
    assert dropnb.stats.streaming_mean is before


def test_a_bug_whose_code_fails_is_refused():
    with pytest.raises(RuntimeError, match="failed on its own"):
        planted.replaced_attributes("import dropnb.stats as _S\n_S.no_such_function.x = 1")


def test_an_unknown_chapter_or_empty_code_is_refused(tmp_path):
    with pytest.raises(ValueError, match="name must be a chapter"):
        planted.run([("no-such-chapter", "pass")], tmp_path)
    with pytest.raises(ValueError, match="code"):
        planted.run([("bounds", "")], tmp_path)
