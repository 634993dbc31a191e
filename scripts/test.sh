#!/usr/bin/env bash
# Static checks, then the whole test suite (unit tests first, then integration tests that start
# real Triton workers and the gateway). Assumes scripts/setup.sh has run (make test does that).
set -euo pipefail
cd "$(dirname "$0")/.."
V=.venv/bin
echo "[test] ruff";        $V/ruff check .
echo "[test] mypy";        $V/mypy scheduling settings control gateway python_backends simulator cli bench
echo "[test] import contracts"; $V/lint-imports --no-cache
echo "[test] pytest";      $V/python -m pytest -q -p no:cacheprovider --durations=10 "$@"
