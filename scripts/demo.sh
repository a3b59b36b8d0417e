#!/usr/bin/env bash
# The main job: the offline demo on simulated models, from launch plan to verdict and finding.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/aqven demo "$@"
