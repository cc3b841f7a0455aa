#!/usr/bin/env bash
# Paper scale on a bare GPU machine, with one command: install the GPU kit offline into a scratch
# folder, then run pages at `full` one at a time, each under its own time limit (benchmarks/gpu.py run).
#
#   make gpu-kit                           # first, where the package registry is reachable
#   bash benchmarks/gpu.sh [--budget S] [--limit S] [--out FOLDER] [PAGE ...]
#
# Without pages: those with no complete row in benchmarks/results/full-<gpu>.json first, as many as the
# budget fits by their estimates. FOLDER (default _build/gpu) receives rows.jsonl, one row a page, and
# pages.tar.gz, the executed notebooks and claim records; `python benchmarks/gpu.py merge FOLDER/rows.jsonl`
# puts the rows into benchmarks/results/. Python is $PYTHON (default python3); where it already has the
# notebook stack (a CI runner with the book's environment), no kit is needed. $DROPNB_KIT names another
# kit folder than .gpu-kit.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
kit=${DROPNB_KIT:-.gpu-kit}/py$version
if compgen -G "$kit/*.whl" >/dev/null; then
  site=$(mktemp -d)/site
  "$python" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
    --target "$site" "$kit"/*.whl
  export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
elif "$python" -c 'import papermill, jupytext, ipykernel, myst_nb' 2>/dev/null; then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "gpu.sh: $python lacks the notebook stack and $kit holds no wheels: run 'make gpu-kit GPU_PYTHON=$version'" \
       "where the package registry is reachable, and bring .gpu-kit along" >&2
  exit 2
fi
# One page runs at a time, alone on the machine: its CPU work may use every core.
export DROPNB_THREADS=${DROPNB_THREADS:-$(nproc)}
export PYTHONUNBUFFERED=1
exec "$python" benchmarks/gpu.py run "$@"
