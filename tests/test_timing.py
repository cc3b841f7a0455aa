"""Timing rows: what a page run cost, how rows merge, which pages a short GPU machine runs first, and
the tables the reproducibility page shows."""

import json
import subprocess
import sys

import pytest

from dropnb.book import timing
from dropnb.book.layout import ROOT, pages_with_claims
from dropnb.book.notebooks import Job, Outcome

PAGES = ["regularizer", "equalization", "structured"]


def make_row(page="regularizer", seconds=10.0, **changes) -> dict:
    expected = timing.ledger_counts()[page]
    r = dict(page=page, profile="full", seed=None, date="2026-11-28T20:00:00+00:00", commit="abc1234",
             seconds=seconds, time_limit=600.0, timed_out=False, returncode=0, device="cuda", device_name="NVIDIA H200",
             torch="2.11.0", python="3.12.3", peak_gpu_bytes=2**30, claims_passed=expected, claims_total=expected,
             claims_expected=expected, slowest_cells=[{"seconds": 4.0, "cell": 7, "first_line": "x = 1"}], error="")
    return r | changes


def test_a_row_is_complete_only_when_every_ledger_claim_held():
    assert timing.complete(make_row())
    assert not timing.complete(make_row(timed_out=True))
    assert not timing.complete(make_row(returncode=1))
    assert not timing.complete(make_row(claims_passed=3))
    assert not timing.complete(make_row(claims_total=3, claims_passed=3))


def test_row_of_an_outcome_reads_the_probe_and_the_records(tmp_path):
    (tmp_path / timing.PROBE_FILE).write_text(json.dumps(
        dict(device_name="NVIDIA H200", torch="2.11.0", python="3.12.3", peak_gpu_bytes=123)))
    records = [{"id": "a", "passed": True, "device": "cuda"}, {"id": "b", "passed": False, "device": "cuda"}]
    job = Job("regularizer", tmp_path, profile="full", timeout=60.0)
    r = timing.row(Outcome(job, -9, 60.4, records, "Traceback\nstopped at the time limit of 60 s", True))
    assert set(r) == set(timing.ROW_KEYS)
    assert (r["page"], r["device"], r["device_name"], r["peak_gpu_bytes"]) == ("regularizer", "cuda", "NVIDIA H200", 123)
    assert (r["claims_passed"], r["claims_total"], r["claims_expected"]) == (1, 2, timing.ledger_counts()["regularizer"])
    assert r["timed_out"] and r["time_limit"] == 60.0 and r["error"] == "stopped at the time limit of 60 s"
    assert not timing.complete(r)


def test_merge_keeps_one_row_a_page_in_ledger_order_and_never_hides_a_measured_time():
    old = [make_row("structured", 100.0), make_row("regularizer", 50.0)]
    merged = timing.merge(old, [make_row("regularizer", 40.0), make_row("structured", 600.0, timed_out=True),
                                make_row("equalization", 600.0, timed_out=True)], PAGES)
    assert [r["page"] for r in merged] == PAGES
    assert [r["seconds"] for r in merged] == [40.0, 600.0, 100.0]
    with pytest.raises(ValueError, match="^rows must be of pages in the ledger"):
        timing.merge([], [make_row("regularizer") | {"page": "no-such-page"}], PAGES)


def test_pages_without_a_complete_row_come_first_cheapest_first():
    rows = [make_row("regularizer"), make_row("equalization", timed_out=True)]
    estimates = {"regularizer": 10.0, "equalization": 300.0, "structured": 200.0}
    assert timing.missing(rows, PAGES) == ["equalization", "structured"]
    assert timing.run_order(PAGES, rows, estimates) == ["structured", "equalization", "regularizer"]
    assert timing.run_order(PAGES, [], {"structured": 5.0}) == ["structured", "regularizer", "equalization"]


def test_the_next_page_is_the_first_whose_estimate_fits():
    order, estimates = ["structured", "equalization", "regularizer"], {"structured": 200.0, "equalization": 300.0}
    assert timing.next_page(order, estimates, 250.0, 600.0) == "structured"
    assert timing.next_page(order[1:], estimates, 250.0, 600.0) is None  # regularizer has no estimate: the limit
    assert timing.next_page(order[2:], estimates, 600.0, 600.0) == "regularizer"


@pytest.mark.parametrize("name, file", [("NVIDIA H200", "full-h200.json"), ("NVIDIA H100 80GB HBM3", "full-h100.json"),
                                        ("NVIDIA A100-SXM4-80GB", "full-a100.json"), ("", "full-cpu.json"),
                                        ("AMD EPYC 7B13, 2 cores", "full-cpu.json")])
def test_results_are_filed_by_profile_and_gpu_model(name, file):
    assert timing.results_file("full", name).name == file


def test_rows_without_every_key_are_refused(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"page": "regularizer"}) + "\n")
    with pytest.raises(ValueError, match="must have the keys"):
        timing.load_rows(path)
    assert timing.load_rows(tmp_path / "none.json") == []


def test_the_full_table_shows_dates_estimates_and_the_pages_still_missing(tmp_path):
    timing.write_rows(tmp_path / "full-h200.json", [make_row("regularizer", 42.0),
                                                    make_row("structured", 600.0, timed_out=True)])
    (tmp_path / "estimates.json").write_text(json.dumps([{"page": p, "seconds": 30.0} for p in PAGES]))
    text = timing.table("full", PAGES, tmp_path)
    assert "`full-h200.json` (NVIDIA H200): 1 of 3 pages" in text
    assert "| regularizer | 30 | 42 | 2026-11-28 |" in text
    assert "| structured | 30 | over 600 |" in text and "| equalization | 30 | not run |" in text
    assert "not yet run to their end at `full` on a GPU: equalization, structured." in text


def test_the_committed_results_are_rows_of_ledger_pages():
    ledger = pages_with_claims()
    for path in sorted(timing.RESULTS.glob("*-*.json")):
        rows = timing.load_rows(path)
        assert rows and {r["page"] for r in rows} <= set(ledger), path.name
    assert set(timing.load_estimates()) == set(ledger)


def test_contributing_shows_the_current_plan():
    plan = subprocess.run([sys.executable, "benchmarks/gpu.py", "plan"], cwd=ROOT, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.strip() in (ROOT / "CONTRIBUTING.md").read_text(), \
        "CONTRIBUTING.md's plan is stale: paste the output of `python benchmarks/gpu.py plan`"
