"""Claims and errata: comparisons, tolerances, records on disk and failures."""

import json

import numpy as np
import pytest

from dropnb import linear
from dropnb.book.layout import CLAIMS_DIR_VARIABLE
from dropnb.book.claims import ClaimFailed, Claims, Record, holds, load_records, summary
from dropnb.rounding import roundoff_tolerance
from dropnb.masks import Bernoulli

RECORD_FIELDS = {"id", "chapter", "page", "source", "statement", "measured", "target", "comparison",
                 "tolerance", "passed", "profile", "seconds"}


@pytest.fixture
def book(tmp_path):
    return Claims("ch1", "quick", directory=tmp_path)


def claim(book, id="ch1.a", measured=1.0, target=1.0, tolerance=0.5, comparison="close", **extra):
    return book.claim(id, source="Eq. (1)", statement="a statement", measured=measured, target=target,
                      tolerance=tolerance, basis="test", comparison=comparison, **extra)


def erratum(book, measured, printed_target, corrected_target, id="ch1.e", tolerance=0.5):
    return book.erratum(id, source="Thm. 2", printed="λ = θ", corrected="λ = (1 − θ)/θ", measured=measured,
                        printed_target=printed_target, corrected_target=corrected_target,
                        tolerance=tolerance, basis="test")


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- holds ----------------------------------------------------------------------------------------

# Every number below is exactly representable, so the boundaries are exact.
HOLDS_CASES = [
    ("close", 1.0, 1.5, 0.5, True),  # |m − t| = tolerance
    ("close", 2.0, 1.5, 0.5, True),
    ("close", 1.0, 1.5, 0.25, False),
    ("close", 1.0, 1.0, 0.0, True),
    ("at_most", 2.0, 1.5, 0.5, True),  # m = t + tolerance
    ("at_most", 2.25, 1.5, 0.5, False),
    ("at_most", -10.0, 1.5, 0.0, True),
    ("at_least", 1.0, 1.5, 0.5, True),  # m = t − tolerance
    ("at_least", 0.75, 1.5, 0.5, False),
    ("at_least", 10.0, 1.5, 0.0, True),
    ("differs", 1.0, 1.5, 0.5, False),  # |m − t| = tolerance is not a difference
    ("differs", 0.75, 1.5, 0.5, True),
    ("differs", 2.25, 1.5, 0.5, True),
    ("differs", 1.0, 1.0, 0.0, False),
]


@pytest.mark.parametrize("comparison, measured, target, tolerance, expected", HOLDS_CASES)
def test_holds(comparison, measured, target, tolerance, expected):
    assert holds(measured, target, comparison, tolerance) is expected


def test_holds_rejects_unknown_comparison():
    with pytest.raises(ValueError, match="^comparison must"):
        holds(1.0, 1.0, "equal", 0.1)


# --- records on disk ------------------------------------------------------------------------------


def test_passing_claim_returns_and_writes_a_record(book, tmp_path):
    record = claim(book, measured=1.25, target=1.0, tolerance=0.5, seconds=0.5)
    assert isinstance(record, Record) and record.passed
    (written,) = lines(tmp_path / "ch1.jsonl")
    assert RECORD_FIELDS <= set(written)
    expected = {"id": "ch1.a", "chapter": "ch1", "source": "Eq. (1)", "statement": "a statement",
                "measured": 1.25, "target": 1.0, "comparison": "close", "tolerance": 0.5, "passed": True,
                "profile": "quick", "seconds": 0.5}
    assert {key: written[key] for key in expected} == expected


def test_each_claim_appends_one_line(book, tmp_path):
    for k in range(3):
        claim(book, id=f"ch1.c{k}")
    assert [r["id"] for r in lines(tmp_path / "ch1.jsonl")] == ["ch1.c0", "ch1.c1", "ch1.c2"]


def test_seconds_default_to_elapsed_time(book):
    assert claim(book).seconds >= 0


def test_failing_claim_raises_and_is_still_recorded(book, tmp_path):
    with pytest.raises(ClaimFailed, match="ch1.a"):
        claim(book, measured=2.0, target=1.0, tolerance=0.5)
    (written,) = lines(tmp_path / "ch1.jsonl")
    assert written["id"] == "ch1.a" and written["passed"] is False
    assert book.records[-1].passed is False


def test_claim_failed_is_an_assertion_error():
    assert issubclass(ClaimFailed, AssertionError)


@pytest.mark.parametrize("comparison", ["at_most", "at_least", "differs"])
def test_other_comparisons_are_recorded(book, tmp_path, comparison):
    measured = {"at_most": 0.0, "at_least": 2.0, "differs": 3.0}[comparison]
    claim(book, measured=measured, target=1.0, tolerance=0.5, comparison=comparison)
    assert lines(tmp_path / "ch1.jsonl")[0]["comparison"] == comparison


def test_a_claim_with_a_wrong_constant_fails(book):
    """A measured value missing the factor λ must not pass for the regularizer λψ₂²."""
    rng = np.random.default_rng(0)
    U, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    retain = 0.8  # λ = 1/4
    target = linear.regularizer(U, V, Bernoulli(4, retain))
    tolerance = 2 * roundoff_tolerance(100) * target  # roundoff of sums of 60 non-negative terms
    right = (1 - retain) / retain * linear.path_norm_squared(U, V)
    claim(book, id="ch1.right", measured=right, target=target, tolerance=tolerance)
    with pytest.raises(ClaimFailed):
        claim(book, id="ch1.wrong", measured=linear.path_norm_squared(U, V), target=target, tolerance=tolerance)


# --- errata ---------------------------------------------------------------------------------------

ERRATUM_CASES = [
    # measured, printed target, corrected target, passes
    (4.0, 1.0, 4.0, True),  # misses the printed statement, matches the correction
    (4.0, 1.0, 2.5, False),  # misses both
    (4.0, 4.0, 1.0, False),  # matches only the printed statement
]


@pytest.mark.parametrize("measured, printed_target, corrected_target, passes", ERRATUM_CASES)
def test_erratum_passes_only_when_the_correction_alone_matches(book, tmp_path, measured, printed_target,
                                                               corrected_target, passes):
    if passes:
        record = erratum(book, measured, printed_target, corrected_target)
        assert record.passed and record.kind == "erratum"
    else:
        with pytest.raises(ClaimFailed):
            erratum(book, measured, printed_target, corrected_target)
    (written,) = lines(tmp_path / "ch1.jsonl")
    assert written["passed"] is passes
    assert written["kind"] == "erratum"
    assert written["printed_target"] == printed_target and written["target"] == corrected_target


@pytest.mark.parametrize("printed_target", [4.0, 3.5, 3.0])
def test_an_erratum_whose_targets_no_measurement_separates_is_refused(book, tmp_path, printed_target):
    """Targets at most two tolerances apart: a measurement matching the correction may match the
    printed statement too (equal targets: every such measurement does), so nothing is recorded."""
    with pytest.raises(ValueError, match="^printed_target and corrected_target must lie more than twice"):
        erratum(book, 4.0, printed_target, 4.0, tolerance=0.5)
    assert not (tmp_path / "ch1.jsonl").read_text()
    assert erratum(book, 4.0, 2.99, 4.0, tolerance=0.5).passed


def test_a_close_tolerance_that_accepts_zero_and_a_differs_tolerance_of_zero_are_refused(book, tmp_path):
    with pytest.raises(ValueError, match=r"^tolerance must be below \|target\|"):
        claim(book, measured=1.0, target=1.0, tolerance=1e6)
    with pytest.raises(ValueError, match="^tolerance must be positive for a 'differs' claim"):
        claim(book, measured=1.0, target=1.0 + 2**-52, tolerance=0.0, comparison="differs")
    assert not (tmp_path / "ch1.jsonl").read_text()
    assert claim(book, measured=0.0, target=0.0, tolerance=1e-9).passed  # a zero target: any tolerance separates


def test_a_measured_value_beyond_the_float_range_is_refused_clearly(book):
    with pytest.raises(ValueError, match="^measured must be a finite number"):
        claim(book, measured=10**400)


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["ch2.a", "CH1.a", "ch1", "ch1 a", "", "ch1.A"])
def test_bad_id_raises(book, bad_id):
    with pytest.raises(ValueError, match="^id "):
        claim(book, id=bad_id)


def test_duplicate_id_raises(book):
    claim(book, id="ch1.a")
    with pytest.raises(ValueError, match="^id "):
        claim(book, id="ch1.a")


@pytest.mark.parametrize("field, value", [("measured", float("nan")), ("measured", "x"), ("target", float("nan")),
                                          ("target", None), ("tolerance", float("nan"))])
def test_non_numbers_raise(book, field, value):
    with pytest.raises(ValueError, match=f"^{field} must"):
        claim(book, **{field: value})


@pytest.mark.parametrize("tolerance", [-0.1, float("inf")])
def test_bad_tolerance_raises(book, tolerance):
    with pytest.raises(ValueError, match="^tolerance must"):
        claim(book, tolerance=tolerance)


def test_unknown_comparison_raises(book):
    with pytest.raises(ValueError, match="^comparison must"):
        claim(book, comparison="equal")


INF = float("inf")


@pytest.mark.parametrize("comparison, field, value", [
    ("at_least", "measured", INF), ("at_most", "measured", -INF), ("close", "measured", INF),
    ("at_most", "target", INF), ("at_least", "target", -INF), ("differs", "target", INF),
])
def test_no_infinite_value_passes_a_claim(book, tmp_path, comparison, field, value):
    """∞ ≥ anything and anything ≤ ∞ would hold: a non-finite measurement or target is refused."""
    with pytest.raises(ValueError, match=f"^{field} must be a finite number, got -?inf"):
        claim(book, comparison=comparison, **{field: value})
    assert (tmp_path / "ch1.jsonl").read_text() == ""


@pytest.mark.parametrize("value", [INF, -INF, float("nan")])
@pytest.mark.parametrize("field", ["measured", "printed_target", "corrected_target"])
def test_no_infinite_value_passes_an_erratum(book, field, value):
    values = dict(measured=4.0, printed_target=1.0, corrected_target=4.0) | {field: value}
    with pytest.raises(ValueError, match=f"^{field} must be a finite number"):
        erratum(book, **values)


def test_erratum_nan_printed_target_raises(book):
    with pytest.raises(ValueError, match="^printed_target must"):
        erratum(book, 1.0, float("nan"), 1.0)


@pytest.mark.parametrize("page", ["Ch1", "", "ch 1", "-ch", None])
def test_bad_page_raises(tmp_path, page):
    with pytest.raises(ValueError, match="^page must"):
        Claims(page, "quick", directory=tmp_path)


@pytest.mark.parametrize("prefix", ["Ch1", "", "ch 1", 3])
def test_bad_prefix_raises(tmp_path, prefix):
    with pytest.raises(ValueError, match="^prefix must"):
        Claims("ch1", "quick", directory=tmp_path, prefix=prefix)


def test_a_page_records_ids_of_its_prefix_in_its_own_file(tmp_path):
    page = Claims("ch1-part", "quick", directory=tmp_path, prefix="ch1")
    record = claim(page, id="ch1.a")
    assert (record.chapter, record.page) == ("ch1", "ch1-part")
    assert lines(tmp_path / "ch1-part.jsonl")[0]["page"] == "ch1-part"
    assert not (tmp_path / "ch1.jsonl").exists()
    with pytest.raises(ValueError, match="starting with 'ch1.'"):
        claim(page, id="ch1-part.b")


def test_the_prefix_defaults_to_the_page(book):
    assert book.prefix == book.page == "ch1"
    assert claim(book, id="ch1.a").chapter == "ch1"


def test_rejected_input_writes_nothing(book, tmp_path):
    with pytest.raises(ValueError):
        claim(book, measured=float("nan"))
    assert (tmp_path / "ch1.jsonl").read_text() == ""


# --- files and tables -----------------------------------------------------------------------------


def test_new_claims_empty_the_chapter_file(tmp_path):
    claim(Claims("ch1", "quick", directory=tmp_path))
    assert (tmp_path / "ch1.jsonl").read_text() != ""
    Claims("ch1", "quick", directory=tmp_path)
    assert (tmp_path / "ch1.jsonl").read_text() == ""


def test_a_second_open_claims_for_a_page_is_refused_and_erases_nothing(tmp_path):
    first = Claims("ch1", "quick", directory=tmp_path)
    claim(first, id="ch1.a")
    with pytest.raises(ValueError, match="already has open claims.*restart=True"):
        Claims("ch1", "quick", directory=tmp_path)
    claim(first, id="ch1.b")
    assert [r["id"] for r in load_records(tmp_path)["ch1"]] == ["ch1.a", "ch1.b"]


def test_a_restart_retires_the_earlier_claims(tmp_path):
    """What re-running a notebook's setup cell does: the new object owns the page's records."""
    first = Claims("ch1", "quick", directory=tmp_path)
    claim(first, id="ch1.a")
    second = Claims("ch1", "quick", directory=tmp_path, restart=True)
    with pytest.raises(RuntimeError, match="newer Claims"):
        claim(first, id="ch1.b")
    claim(second, id="ch1.a")
    assert [r["id"] for r in load_records(tmp_path)["ch1"]] == ["ch1.a"]


def test_new_claims_leave_other_chapters_alone(tmp_path):
    claim(Claims("ch1", "quick", directory=tmp_path))
    Claims("ch2", "quick", directory=tmp_path)
    assert len(lines(tmp_path / "ch1.jsonl")) == 1


def test_load_records_round_trip(tmp_path):
    first = Claims("ch1", "quick", directory=tmp_path)
    second = Claims("ch2", "book", directory=tmp_path)
    written = [claim(first, id="ch1.a"), claim(first, id="ch1.b", measured=1.5)]
    other = claim(second, id="ch2.a")
    loaded = load_records(tmp_path)
    assert loaded == {"ch1": [vars(r) for r in written], "ch2": [vars(other)]}
    assert load_records(tmp_path, ["ch2", "missing"]) == {"ch2": [vars(other)]}


def test_summary_counts_and_tabulates_every_record(book):
    records = [claim(book, id="ch1.a"), claim(book, id="ch1.b", comparison="at_most"),
               erratum(book, 4.0, 1.0, 4.0)]
    text = summary(records)
    assert "2 claims and 1 erratum; all hold" in text
    assert text.count("\n| ✓ |") == len(records)
    assert "**Erratum.**" in text


def test_summary_accepts_loaded_records(book, tmp_path):
    claim(book, id="ch1.a")
    assert summary(load_records(tmp_path)["ch1"]) == summary(book.records)


def test_summary_marks_failures(book):
    with pytest.raises(ClaimFailed):
        claim(book, measured=3.0)
    assert "1 fail" in summary(book.records) and "**✗ FAIL**" in summary(book.records)


def test_claims_dir_variable_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv(CLAIMS_DIR_VARIABLE, str(tmp_path / "records"))
    book = Claims("ch1", "quick")
    claim(book)
    assert book.path == tmp_path / "records" / "ch1.jsonl"
    assert len(lines(tmp_path / "records" / "ch1.jsonl")) == 1
