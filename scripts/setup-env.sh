#!/usr/bin/env bash
# Create .venv (once) and install flashsampling with its test, verify, notebook and integration extras.
# CPU pins (torch==2.13.0 CPU build, triton==3.6.0, numpy<2.4) come from constraints-cpu.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.flashsampling-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-cpu.txt -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 -c constraints-cpu.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints-cpu.txt -e ".[test,verify,notebooks,integrations]"
  touch "$stamp"
fi
