#!/usr/bin/env bash
# The test command: installs everything into .venv, checks style (ruff check and ruff format, pinned in pyproject.toml),
# then runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
PY_TREES=(flashsampling verification proofs tests benchmarks notebooks examples scripts)
.venv/bin/ruff check "${PY_TREES[@]}"
.venv/bin/ruff format --check "${PY_TREES[@]}"
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
if [ "$#" -eq 0 ]; then
  # The newest triton pyproject allows, with the numpy it needs (triton 3.6's interpreter fails on numpy 2.4):
  # installed beside .venv's packages (PYTHONPATH), the argument checks, the kernel-twin replays and the bad-input
  # table run on it too.  About 2.5 minutes on 2 idle cores (35 s of it the install, once).
  TRITON39_PINS=(triton==3.9.0 "numpy>=2.4,<2.5")
  if [ ! -f .triton39/.installed ]; then
    rm -rf .triton39
    .venv/bin/python -m pip install -q --disable-pip-version-check --target .triton39 "${TRITON39_PINS[@]}"
    touch .triton39/.installed
  fi
  PYTHONPATH="$PWD/.triton39" .venv/bin/python -m pytest -q -n 2 --dist loadfile -p no:cacheprovider \
    tests/test_validation.py tests/test_replay.py tests/test_bad_inputs.py
fi
