#!/usr/bin/env bash
# The test command: set-up, then ruff, mypy and pytest (browser tests use Debian's chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: chromium could not be installed; browser tests will be skipped"
fi
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy
# Two pytest workers, one per core of the CI machine, each taking whole test files (a file's fixtures, such as
# a browser or a server, stay in one process): the suite took 18 minutes on one, about 8 on two.
exec .venv/bin/pytest -q -n "${AQVEN_TEST_WORKERS:-2}" --dist loadfile "$@"
