#!/usr/bin/env bash
# The chat engine's threads against the cores: one or two engines at once (bench.ceiling, no
# Triton), with 2 or 1 llama.cpp threads each, with or without a busy loop holding one core, and
# OpenMP's wait policy. Prints one line per case and round (docs/benchmarks.md, "Two versions of
# chat on the same cores"). Usage: bench/engine_threads.sh [ROUNDS]   (default 2; ~5 min a round)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
exec 9>/tmp/shunter-integration.lock
flock 9
hog=""
trap '[ -n "$hog" ] && kill "$hog" 2>/dev/null || true' EXIT

ceiling() {  # one environment assignment (X=1: none), then bench.ceiling's extra arguments
  local assignment=$1
  shift
  env "$assignment" timeout 400 .venv/bin/python -m bench.ceiling --streams 4 --max-tokens 32 "$@" 2>/dev/null \
    | tail -n 1 | sed 's/"completion_tokens": [0-9]*, //g; s/"wall_s": [0-9.]*, //g'
}
pair() {  # the same engine twice at once
  local first second
  first=$(mktemp)
  ceiling "$@" >"$first" &
  local pid=$!
  sleep 0.5
  second=$(ceiling "$@")
  wait "$pid"
  echo "$(cat "$first") $second"
  rm -f "$first"
}
busy_loop() { timeout 600 bash -c 'while :; do :; done' & hog=$!; }
end_busy_loop() { kill "$hog"; wait "$hog" 2>/dev/null || true; hog=""; }

for round in $(seq "$rounds"); do
  echo "round $round | 1 engine, 2 threads | $(ceiling X=1)"
  echo "round $round | 1 engine, 1 thread | $(ceiling X=1 --threads 1)"
  echo "round $round | 1 engine, 2 threads, OMP_WAIT_POLICY=PASSIVE | $(ceiling OMP_WAIT_POLICY=PASSIVE)"
  echo "round $round | 1 engine, 2 threads, GOMP_SPINCOUNT=1000 | $(ceiling GOMP_SPINCOUNT=1000)"
  echo "round $round | 2 engines, 2 threads | $(pair X=1)"
  echo "round $round | 2 engines, 1 thread | $(pair X=1 --threads 1)"
  busy_loop
  echo "round $round | busy loop, 1 engine, 2 threads | $(ceiling X=1)"
  echo "round $round | busy loop, 1 engine, 1 thread | $(ceiling X=1 --threads 1)"
  echo "round $round | busy loop, 1 engine, 2 threads, OMP_WAIT_POLICY=PASSIVE | $(ceiling OMP_WAIT_POLICY=PASSIVE)"
  echo "round $round | busy loop, 1 engine, 2 threads, GOMP_SPINCOUNT=1000 | $(ceiling GOMP_SPINCOUNT=1000)"
  echo "round $round | busy loop, 2 engines, 2 threads | $(pair X=1)"
  echo "round $round | busy loop, 2 engines, 1 thread | $(pair X=1 --threads 1)"
  echo "round $round | busy loop, 2 engines, 2 threads, OMP_WAIT_POLICY=PASSIVE | $(pair OMP_WAIT_POLICY=PASSIVE)"
  end_busy_loop
done
