#!/usr/bin/env bash
# Installs everything the test suite needs into .venv (and Prometheus, for the deploy tests), then runs
# ruff, mypy and pytest. This is the README's test command; .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
if [ -x deploy/install-prometheus.sh ] || [ -f deploy/install-prometheus.sh ]; then
  bash deploy/install-prometheus.sh
fi

.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
.venv/bin/mypy
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
