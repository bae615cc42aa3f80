#!/usr/bin/env bash
# The GPU check in one command, on a machine with an NVIDIA GPU (at most 8 minutes on an H100/H200
# once ./.venv exists; a first run installs it with scripts/bootstrap.sh, which takes longer).
#   bash scripts/gpu-check.sh [--out REPORT.md]
# Exit 0: every step passed; 1: a step failed (the report says which and why); 3: no GPU here.
# Keep the report under docs/gpu-checks/ with what it changed (docs/gpu-checks/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-check: no GPU to check here (nvidia-smi finds none); nothing was run"
  exit 3
fi
# The Python to check with: ./.venv; else a python3 that already has KernelRank and a CUDA torch (a
# GPU image without network, the checkout installed with `pip install --no-deps -e .`); else bootstrap.
if [ -x .venv/bin/python ]; then
  py=.venv/bin/python
elif python3 -c 'import kernelrank.runner.host.gpucheck, torch; assert torch.version.cuda' 2>/dev/null; then
  py=python3
else
  bash scripts/bootstrap.sh test
  py=.venv/bin/python
fi
exec "$py" -m kernelrank.runner.host.gpucheck "$@"
