#!/usr/bin/env bash
# The test command: set-up, then ruff, mypy and pytest (browser tests use Debian's chromium, the store's
# PostgreSQL tests a private cluster of Debian's postgresql that the tests start and stop themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
can_apt() { [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; }
apt_updated=
apt_install() {  # Debian packages, the package lists updated once
  if [ -z "$apt_updated" ]; then
    apt-get update -qq || return 1
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
if ! command -v chromium >/dev/null 2>&1 && can_apt; then
  echo "installing Debian's chromium for the browser tests..."
  apt_install chromium || echo "warning: chromium could not be installed; browser tests will be skipped"
fi
# PostgreSQL's server programs, as tests/support/postgres.py looks for them (a client alone is not enough).
has_initdb() {
  command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null \
    || { command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; }
}
if [ "${AQVEN_TEST_NO_POSTGRES:-0}" = "0" ] && ! has_initdb; then
  if can_apt; then
    echo "installing Debian's postgresql for the store's PostgreSQL tests (they run their own private cluster)..."
    apt_install postgresql || echo "warning: postgresql could not be installed; the PostgreSQL tests will fail saying so"
  elif [ -z "${AQVEN_TEST_POSTGRES:-}" ]; then
    echo "warning: no PostgreSQL server programs (initdb) here, and not root to install Debian's postgresql:" \
      "the PostgreSQL tests will fail saying so (set AQVEN_TEST_POSTGRES to a server of yours, or" \
      "AQVEN_TEST_NO_POSTGRES=1 to skip them)"
  fi
fi
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy
# Two pytest workers, one per core of the CI machine, each taking whole test files (a file's fixtures, such as
# a browser or a server, stay in one process): 1,781 tests take about 14 minutes on two (a third worker made timing
# tests fail on two cores).
exec .venv/bin/pytest -q -n "${AQVEN_TEST_WORKERS:-2}" --dist loadfile "$@"
