"""How numbers and claim records read: no e-notation, blocks and tables that keep every field."""

import math

import pytest

from dropnb.book.claims import Claims
from dropnb.book.render import NARROW_SPACE, claim_block, claims_table, plain, readable, readable_text

P = f"{NARROW_SPACE}×{NARROW_SPACE}10"


@pytest.mark.parametrize("value, text", [
    (0.0, "0"), (5.0, "5"), (16.0, "16"), (0.125, "0.125"), (-0.5, "−0.5"), (999.6, "1,000"),
    (2140.0, "2,140"), (12345.6, "12,300"), (0.00123, "0.00123"), (9.99e-16, f"9.99{P}⁻¹⁶"),
    (1.23e-4, f"1.23{P}⁻⁴"), (3.0e7, f"3.00{P}⁷"), (-2.5e-9, f"−2.50{P}⁻⁹"), (math.inf, "∞"),
])
def test_readable(value, text):
    assert readable(value) == text


def test_readable_never_writes_e_notation():
    for exponent in range(-20, 21):
        for mantissa in (1.0, 2.5, 9.996, -7.25):
            assert "e" not in readable(mantissa * 10.0**exponent)


@pytest.mark.parametrize("text, expected", [
    ("2.14e+03", "2,140"), ("1.2e-04", "0.00012"), ("1.0e-16", f"1.0{P}⁻¹⁶"),
    ("ratio 3e+06 of 2", f"ratio 3{P}⁶ of 2"), ("v1.2e3x", "v1.2e3x"), ("10.5", "10.5"),
    ("200000 samples, 2018, 0.123456", "200,000 samples, 2018, 0.123456"),
    ("-0.8571 and ≤ -1, rank-2, Figure 3-1", "−0.8571 and ≤ −1, rank-2, Figure 3-1"),
])
def test_readable_text(text, expected):
    assert readable_text(text) == expected


def test_plain_escapes_markdown_but_keeps_math():
    assert plain("γ_n‖U‖²_F, *x* $\\|M\\|_F^2$") == "γ\\_n‖U‖²\\_F, \\*x\\* $\\|M\\|_F^2$"


@pytest.fixture
def records(tmp_path):
    book = Claims("ch1", "quick", directory=tmp_path)
    book.claim("ch1.close", source="Lemma 1", statement="$a = b$", measured=1e-16, target=0.0, tolerance=2e-13,
               basis="forward-error bound γ_n, n = 10")
    book.claim("ch1.bound", source="Thm 2", statement="largest $|z|$", measured=3.0, target=6.07, tolerance=0.0,
               comparison="at_most", basis="Bonferroni bound for 30 z-scores")
    book.erratum("ch1.fix", source="Eq. (3*)", printed="$\\lambda = \\theta$", corrected="$\\lambda = 1/\\theta$",
                 measured=2.0, printed_target=0.5, corrected_target=2.0, tolerance=0.01, basis="exact")
    return book.records


def test_claim_block_reads_at_a_glance(records):
    block = claim_block(records[0])
    assert block.startswith('<div class="claim claim-pass" id="ch1.close">') and block.endswith("</div>")
    assert "**✓ Claim.** $a = b$" in block
    assert f"measured **1.00{P}⁻¹⁶** ≈ **0** within **2.00{P}⁻¹³**" in block
    assert "tolerance: forward-error bound γₙ, n = 10 · *Lemma 1*" in block
    assert "- id: `ch1.close`" in block and "- measured: 1e-16" in block


def test_a_bound_is_named_as_a_bound(records):
    block = claim_block(records[1])
    assert "measured **3** ≤ bound **6.07** · bound: Bonferroni bound for 30 z-scores" in block


def test_erratum_block_gives_both_statements(records):
    block = claim_block(records[2])
    assert "**✓ Erratum.** $\\lambda = 1/\\theta$" in block
    assert "Printed: $\\lambda = \\theta$, which would give **0.5**." in block
    assert "*Eq. (3\\*)*" in block


def test_an_erratum_links_to_the_errata_page_and_back(records):
    page = records[2].page
    assert f'<a class="erratum-list" href="errata.html#errata-{page}">all errata</a>' in claim_block(records[2])
    linked = claim_block(records[2], page_href=f"{page}.html#{records[2].id}")
    assert f'<a class="erratum-page" href="{page}.html#{records[2].id}">on its page</a>' in linked
    assert "erratum-list" not in linked and "erratum-" not in claim_block(records[0])


def test_claims_table_has_a_row_per_record_and_links_ids(records):
    table = claims_table(records, href=lambda r: f"page.html#{r['id']}")
    rows = [line for line in table.splitlines() if line.startswith("| ✓")]
    assert len(rows) == len(records)
    assert '<a class="claim-id" href="page.html#ch1.bound">ch1.bound</a>' in table
    assert "| the bound: Bonferroni bound for 30 z-scores |" in table
    assert table.startswith('<div class="claims-table">')


def test_claims_table_escapes_pipes_in_cells(records):
    assert "largest $\\|z\\|$" in claims_table(records)


def test_numbers_in_statements_and_bases_read_without_e_notation(tmp_path):
    book = Claims("ch1", "quick", directory=tmp_path)
    record = book.claim("ch1.z", source="s", statement="largest $|z|$ at level 1e-06, $10^{-6}$",
                        measured=1.0, target=2.0, tolerance=0.0, comparison="at_most",
                        basis="Bonferroni bound for 30 z-scores at level 1e-06")
    block = claim_block(record)
    assert f"at level 1{P}⁻⁶, $10^{{-6}}$" in block and "1e-06" not in block.split("<details")[0]


def test_an_estimated_tolerance_is_labelled_as_such(tmp_path):
    book = Claims("ch1", "quick", directory=tmp_path)
    record = book.claim("ch1.value", source="Thm 3", statement="$f = f^\\star$", measured=1.0, target=1.0,
                        tolerance=1e-9, basis="estimate: g²/(2m) at the end point")
    block = claim_block(record)
    assert "estimated tolerance: g²/(2m) at the end point · *Thm 3*" in block
    assert f"| 1.00{P}⁻⁹, estimated: g²/(2m) at the end point |" in claims_table([record])


def test_a_numpy_scalar_is_displayed_and_glued_as_a_plain_number():
    """myst-nb glues a value's text/plain form; ``np.float64(638.7)`` breaks every ``{glue:text}`` format."""
    import numpy as np
    from IPython.core.interactiveshell import InteractiveShell

    from dropnb.book.render import show_numpy_scalars_plainly

    shell = InteractiveShell.instance()
    show_numpy_scalars_plainly()
    shown = {value: shell.display_formatter.format(value)[0]["text/plain"]
             for value in (np.float64(638.7), np.int64(3), np.bool_(True), np.float32(0.5))}
    assert list(shown.values()) == ["638.7", "3", "True", "0.5"]
