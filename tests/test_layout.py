"""The book's places and lists: its top folder, the claims folder, the table of contents, the ledger."""

import json

import pytest
import yaml

from dropnb.book import layout


# --- the book's top folder ------------------------------------------------------------------------


def test_book_root_finds_parent_with_config(tmp_path):
    (tmp_path / "_config.yml").write_text("title: test\n")
    start = tmp_path / "chapters" / "part"
    start.mkdir(parents=True)
    assert layout.book_root(start) == tmp_path.resolve()


def test_book_root_prefers_the_nearest_config(tmp_path):
    (tmp_path / "_config.yml").write_text("title: outer\n")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "_config.yml").write_text("title: inner\n")
    assert layout.book_root(tmp_path / "inner") == (tmp_path / "inner").resolve()


def test_book_root_defaults_to_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "_config.yml").write_text("title: test\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert layout.book_root() == tmp_path.resolve()


def test_book_root_without_config_is_the_start(tmp_path):
    start = tmp_path / "nowhere"
    start.mkdir()
    if any((folder / "_config.yml").is_file() for folder in start.resolve().parents):
        pytest.skip("a parent of the temporary folder holds a _config.yml")
    assert layout.book_root(start) == start.resolve()


def test_config_file_must_be_a_file(tmp_path):
    (tmp_path / "outer").mkdir()
    (tmp_path / "outer" / "_config.yml").write_text("title: outer\n")
    (tmp_path / "outer" / "inner" / "_config.yml").mkdir(parents=True)  # a folder, not a file
    assert layout.book_root(tmp_path / "outer" / "inner") == (tmp_path / "outer").resolve()


def test_the_package_lies_in_the_book():
    assert (layout.ROOT / "_config.yml").is_file() and layout.CHAPTERS == layout.ROOT / "chapters"
    assert layout.LEDGER.is_file() and layout.TOC.is_file() and layout.GOLDENS.is_dir()


# --- the claims folder ----------------------------------------------------------------------------


def test_claims_dir_defaults_to_the_book_build_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(layout.CLAIMS_DIR_VARIABLE, raising=False)
    (tmp_path / "_config.yml").write_text("title: test\n")
    (tmp_path / "chapters").mkdir()
    monkeypatch.chdir(tmp_path / "chapters")
    assert layout.claims_dir() == tmp_path.resolve() / "_build" / "claims"


def test_claims_dir_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(layout.CLAIMS_DIR_VARIABLE, str(tmp_path / "records"))
    assert layout.claims_dir() == tmp_path / "records"


def test_claims_dir_from_a_start_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(layout.CLAIMS_DIR_VARIABLE, raising=False)
    (tmp_path / "_config.yml").write_text("title: test\n")
    assert layout.claims_dir(tmp_path) == tmp_path.resolve() / "_build" / "claims"


# --- the table of contents and the ledger ---------------------------------------------------------


def test_pages_follow_the_table_of_contents():
    toc = yaml.safe_load(layout.TOC.read_text())
    pages = layout.pages()
    assert pages[0] == toc["root"] and len(pages) == len(set(pages))
    assert all((layout.ROOT / f"{page}.md").is_file() for page in pages)
    chapters = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert [p for p in pages if p in chapters] == chapters


def test_the_ledger_is_read_once_and_copied():
    committed = json.loads(layout.LEDGER.read_text())
    assert layout.ledger() == committed and layout.pages_with_claims() == list(committed)
    layout.ledger()["regularizer"].append("changed")
    layout.pages_with_claims().append("changed")
    assert layout.ledger() == committed and layout.claim_ids("regularizer") == committed["regularizer"]


def test_pages_with_claims_are_in_reading_order():
    pages = [p.removeprefix("chapters/") for p in layout.pages()]
    with_claims = layout.pages_with_claims()
    assert set(with_claims) <= set(pages)
    assert sorted(with_claims, key=pages.index) == with_claims


def test_claim_ids_of_an_unknown_page_are_refused():
    with pytest.raises(ValueError, match="page must be a page of the ledger"):
        layout.claim_ids("no-such-page")
