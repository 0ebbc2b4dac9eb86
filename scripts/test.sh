#!/usr/bin/env bash
# The project's test command (README and .ci/run): lint, then the offline CPU test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports  # the layers contract in pyproject.toml: env -> rewards -> pipeline
.venv/bin/python -m pytest -q "$@"
