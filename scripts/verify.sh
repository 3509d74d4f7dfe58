#!/usr/bin/env bash
# The main job: installs everything into .venv, then runs the verification battery.
# With --audit it also installs the audit extra (transformers, JAX on the CPU: ~600 MB, once) and audits
# the samplers written elsewhere after the battery (docs/audit.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
for arg in "$@"; do
  if [ "$arg" = "--audit" ]; then
    stamp=.venv/.flashsampling-audit-installed
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
      .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints-cpu.txt -e ".[audit]"
      touch "$stamp"
    fi
  fi
done
exec .venv/bin/python -m verification "$@"
