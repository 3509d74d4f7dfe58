#!/usr/bin/env bash
# The test command: installs everything into .venv, checks style, then runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
.venv/bin/ruff check flashsampling verification proofs tests benchmarks notebooks examples
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
