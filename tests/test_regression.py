"""The regression layer: records against the committed goldens at bands from each claim's basis.

Unit tests of the comparison on synthetic and committed records, then the session's quick build
against the goldens, and a repeated run that must reproduce its records bit for bit.
"""

import copy
import json

import pytest

from dropnb.book.claims import load_records
from dropnb.book.layout import GOLDENS, pages_with_claims
from dropnb.book.notebooks import execute
from dropnb.book.regression import differences, golden_record, main, read_golden, write_golden


def record(id="ch.a", comparison="close", measured=1.0, target=1.0, tolerance=0.5, **extra):
    fields = dict(id=id, kind="claim", profile="quick", seed=7, comparison=comparison, passed=True,
                  basis="5 standard errors, 1000 samples", measured=measured, target=target,
                  tolerance=tolerance, printed_target=None)
    return fields | extra


# --- the comparison -------------------------------------------------------------------------------


def test_identical_records_match():
    golden = [record(), record("ch.b", "at_most", measured=0.1, target=1.0, tolerance=0.0)]
    assert differences(golden, copy.deepcopy(golden)) == []


def test_a_one_sided_value_at_rounding_level_may_change_all_its_digits():
    golden = [record(comparison="at_most", measured=1e-4, target=1.0, tolerance=0.0)]
    assert differences(golden, [record(comparison="at_most", measured=3e-1, target=1.0, tolerance=0.0)]) == []
    assert differences(golden, [record(comparison="at_most", measured=0.9, target=1.0, tolerance=0.0)])


def test_a_computed_bound_of_a_one_sided_claim_may_change_its_digits():
    golden = [record(comparison="at_least", measured=3.0, target=4.8987523314954364e-11, tolerance=0.0)]
    moved = [record(comparison="at_least", measured=3.0, target=4.898752331495432e-11, tolerance=0.0)]
    assert differences(golden, moved) == []


@pytest.mark.parametrize("basis, tolerance, target, golden, measured, matches", [
    ("Bonferroni bound for 4 z-scores at level 1e-06", 0.0, 5.0, 2.0, 2.9, True),   # a statistic: one unit
    ("Bonferroni bound for 4 z-scores at level 1e-06", 0.0, 5.0, 2.0, 3.1, False),
    ("one-sided t test over 10 independent runs", 0.0, 4.5, 9.0, 900.0, False),     # orders of magnitude
    ("rounding bound γ_n‖H‖_F, n = 10p²", 0.25, 0.0, 2.0, 2.9, True),              # half its margin
    ("rounding bound γ_n‖H‖_F, n = 10p²", 0.25, 0.0, 2.0, 0.9, False),
    ("rounding bound γ_n‖H‖_F, n = 10p²", 0.25, 0.0, 0.1, 0.3, True),              # or its tolerance
    ("estimate: the unit is the certificate g²/(2m)", 0.0, 1.0, 5e4, 4.2e4, True),  # a margin of many units
    ("estimate: the unit is the certificate g²/(2m)", 0.0, 1.0, 5e4, 2e4, False),
    ("exact (a strict sign)", 0.0, 0.0, 2.0, 1e6, False),
])
def test_a_one_sided_value_may_move_by_its_band(basis, tolerance, target, golden, measured, matches):
    fields = dict(comparison="at_least", basis=basis, tolerance=tolerance, target=target)
    assert (differences([record(measured=golden, **fields)], [record(measured=measured, **fields)]) == []) is matches


@pytest.mark.parametrize("factor, matches", [(1.9, True), (0.6, True), (2.1, False), (0.4, False)])
def test_a_monte_carlo_tolerance_may_change_by_less_than_a_factor_two(factor, matches):
    """A wrong standard error moves a tolerance by orders of magnitude, rounding by digits."""
    basis = "5 standard errors, 1000 samples"
    assert (differences([record(basis=basis)], [record(basis=basis, tolerance=0.5 * factor)]) == []) is matches


def test_a_rounding_tolerance_may_follow_the_solver_end_point():
    basis = "rounding bound γ_n‖H‖_F, n = 10p²"
    golden = [record(comparison="at_least", basis=basis, target=0.0, measured=-1e-16, tolerance=1.8e-10)]
    assert differences(golden, [record(comparison="at_least", basis=basis, target=0.0, measured=-2e-15,
                                       tolerance=6e-11)]) == []


@pytest.mark.parametrize("measured, matches", [(1.49, True), (0.51, True), (1.51, False), (0.49, False)])
def test_a_two_sided_claim_may_move_by_its_tolerance(measured, matches):
    assert (differences([record()], [record(measured=measured, passed=True)]) == []) is matches


def test_the_residual_moves_with_the_target():
    """A target that moved within its band carries the measured value with it."""
    assert differences([record()], [record(measured=1.4, target=1.4)]) == []


@pytest.mark.parametrize("change", [
    dict(target=1.6),                                       # the target moved out of its band
    dict(basis="4 standard errors, 1000 samples"),          # a changed constant
    dict(passed=False),                                     # the verdict
    dict(comparison="at_least"),
    dict(seed=8),                                           # a run under another seed
    dict(profile="book"),
    dict(kind="erratum"),
])
def test_a_changed_setting_fails(change):
    assert differences([record()], [record(**change)])


def test_printed_targets_of_errata_are_held_to_their_band():
    golden = [record(kind="erratum", printed_target=3.0)]
    assert differences(golden, [record(kind="erratum", printed_target=3.4)]) == []
    assert differences(golden, [record(kind="erratum", printed_target=3.6)])


@pytest.mark.parametrize("ids, message", [(["ch.a"], "missing ['ch.b']"), (["ch.b", "ch.a"], "order changed"),
                                          (["ch.a", "ch.b", "ch.c"], "unexpected ['ch.c']")])
def test_ids_must_be_the_golden_ones_in_order(ids, message):
    golden = [record("ch.a"), record("ch.b")]
    problems = differences(golden, [record(i) for i in ids])
    assert problems and message in problems[0]


def test_write_and_read_a_golden(tmp_path):
    records = [record() | {"statement": "s", "seconds": 1.0}]
    write_golden("ch", records, tmp_path)
    assert read_golden("ch", tmp_path) == [golden_record(records[0])]
    with pytest.raises(ValueError, match="records"):
        write_golden("ch", [], tmp_path)
    with pytest.raises(ValueError, match="no golden"):
        read_golden("other", tmp_path)


# --- on the committed goldens ---------------------------------------------------------------------

MONTE_CARLO = "regularizer.lemma-a1.monte-carlo.gaussian"


def test_every_chapter_has_a_golden_at_quick():
    for chapter in pages_with_claims():
        golden = read_golden(chapter)
        assert {g["profile"] for g in golden} == {"quick"} and all(g["passed"] for g in golden)


def test_a_changed_constant_in_a_chapter_fails_it():
    """The regularizer with 4 instead of 5 standard errors in its Monte-Carlo claims."""
    golden = read_golden("regularizer")
    changed = copy.deepcopy(golden)
    for r in changed:
        if r["basis"].startswith("5 standard errors"):
            r["tolerance"] *= 4 / 5
            r["basis"] = r["basis"].replace("5 standard errors", "4 standard errors")
    assert any("basis" in p for p in differences(golden, changed))


@pytest.mark.parametrize("shift, matches", [(0.9, True), (1.1, False)])
def test_a_monte_carlo_estimate_may_move_by_its_tolerance_only(shift, matches):
    golden = read_golden("regularizer")
    moved = copy.deepcopy(golden)
    estimate = next(r for r in moved if r["id"] == MONTE_CARLO)
    estimate["measured"] += shift * estimate["tolerance"]
    assert (differences(golden, moved) == []) is matches


def test_a_statistic_moved_by_orders_of_magnitude_fails_its_golden():
    """A z-score ten times its golden value still clears its critical value; the golden catches it."""
    golden = read_golden("bounds-networks")
    moved = copy.deepcopy(golden)
    shifted = next(r for r in moved if r["id"] == "bounds.prop6.shifted-misses")
    shifted["measured"] *= 10
    assert shifted["measured"] >= shifted["target"] and differences(golden, moved)


def test_rounding_level_values_may_change_their_digits():
    """Every value of a one-sided claim at a third of its golden size, and the errors of exact identities
    (target 0) halved: what another BLAS or thread count could give."""
    golden = read_golden("landscape-networks")
    moved = copy.deepcopy(golden)
    for r in moved:
        if r["comparison"] in ("at_most", "at_least") and r["target"] == 1 and abs(r["measured"]) < 1:
            r["measured"] /= 3
        elif r["comparison"] == "close" and r["target"] == 0:
            r["measured"] /= 2
    assert differences(golden, moved) == []


# --- the chapters as they are ---------------------------------------------------------------------


@pytest.mark.chapters
@pytest.mark.parametrize("chapter", pages_with_claims())
def test_the_quick_build_matches_the_golden(chapter, quick_build):
    records = load_records(quick_build.claims, [chapter]).get(chapter, [])
    assert differences(read_golden(chapter), records) == []


@pytest.mark.chapters
def test_a_chapter_run_with_a_changed_constant_fails_its_golden(tmp_path):
    """The regularizer run with 4 instead of 5 standard errors: every claim still holds, the golden catches it."""
    execute("regularizer", tmp_path / "changed.ipynb", profile="quick", claims_dir=tmp_path,
            replace=("z_bound = 5.0", "z_bound = 4.0"))
    records = load_records(tmp_path, ["regularizer"])["regularizer"]
    assert all(r["passed"] for r in records)
    problems = differences(read_golden("regularizer"), records)
    assert problems and all("basis" in p for p in problems)


@pytest.mark.chapters
def test_a_repeated_run_reproduces_its_records_bit_for_bit(quick_build, tmp_path):
    """Same machine, same settings, same seed: every field but the timing is identical."""
    chapter = "regularizer"
    execute(chapter, tmp_path / f"{chapter}.ipynb", profile="quick", claims_dir=tmp_path)
    def strip(records):
        return [json.dumps({k: v for k, v in r.items() if k != "seconds"}, sort_keys=True) for r in records]
    again = load_records(tmp_path, [chapter])[chapter]
    assert strip(again) == strip(load_records(quick_build.claims, [chapter])[chapter])


def test_goldens_folder_holds_only_ledger_chapters():
    assert sorted(p.stem for p in GOLDENS.glob("*.json")) == sorted(pages_with_claims())


@pytest.mark.parametrize("order", [["compare", "--records", "{}", "regularizer"],
                                   ["--records", "{}", "compare", "regularizer"],
                                   ["compare", "regularizer", "--records", "{}"]])
def test_the_command_takes_its_options_anywhere(order, tmp_path, capsys):
    golden = read_golden("regularizer")
    (tmp_path / "regularizer.jsonl").write_text("".join(json.dumps(r) + "\n" for r in golden))
    assert main([part.format(tmp_path) for part in order]) == 0
    assert "regularizer: matches its golden" in capsys.readouterr().out
