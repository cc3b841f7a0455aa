# Set up the environment, build the book, run the tests. Needs Python 3.11 and the package
# registries only; everything installs into .venv from requirements.txt.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.installed

.PHONY: book test goldens clean

$(READY): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -r requirements.txt
	touch $@

book: $(READY)  ## build the book into _build/html (profile: $$DROPNB_PROFILE, default book)
	$(BIN)/jupyter-book build -W -n --keep-going .

test: $(READY)  ## unit tests, chapters at the quick profile, notebook regression, book build
	$(BIN)/python -m pytest

goldens: $(READY)  ## refresh the notebook-regression goldens in tests/golden/
	$(BIN)/python -m dropnb.notebooks goldens

clean:  ## remove the built book, the execution cache and the claim records
	rm -rf _build
