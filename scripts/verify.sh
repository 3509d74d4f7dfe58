#!/usr/bin/env bash
# The main job: installs everything into .venv, then runs the verification battery.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
exec .venv/bin/python -m verification "$@"
