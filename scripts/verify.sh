#!/usr/bin/env bash
# The main job: installs everything into the checkout's .venv, then runs the verification battery.
# With --audit it also installs the audit extra (transformers, JAX on the CPU: ~600 MB, once) and audits
# the samplers written elsewhere after the battery (docs/audit.md).
# `verify.sh check mypkg.samplers:my_sampler ...` checks one sampler of yours (docs/verify-your-sampler.md).
# Python runs in the folder you call this from: your modules import from there, and --out (default report/)
# is relative to it; the installation happens in the checkout, and nothing else is written there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
(cd "$root" && bash scripts/setup-env.sh)
for arg in "$@"; do
  if [ "$arg" = "--audit" ]; then
    stamp="$root/.venv/.flashsampling-audit-installed"
    if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
      (cd "$root" && .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints-cpu.txt -e ".[audit]")
      touch "$stamp"
    fi
  fi
done
exec "$root/.venv/bin/python" -m verification "$@"
