#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with AQVEN, its dev tools and its PostgreSQL driver
# (the extra `postgres`: the test suite runs the store on both backends) and DBOS (the extra `cluster`: `aqven worker`) installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.aqven-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup.sh -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
  .venv/bin/python -m pip install --quiet -e ".[dev,postgres,cluster]"
  touch "$stamp"
fi
