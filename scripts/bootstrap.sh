#!/usr/bin/env bash
# Create ./.venv with KernelRank installed, on a fresh machine.
#   bash scripts/bootstrap.sh         # the service and CLI
#   bash scripts/bootstrap.sh test    # plus the test dependencies
# torch is installed first, from KERNELRANK_TORCH (default: torch==2.13.0, a CPU build on
# machines without a GPU where that wheel is provided); the package's own `torch>=2.5` range
# is then already satisfied, so pip never pulls a multi-GB CUDA build behind your back.
# On a GPU machine: KERNELRANK_TORCH="torch" bash scripts/bootstrap.sh (nvcc from the CUDA toolkit
# for CUDA submissions; Dockerfile.gpu is an image with all of it)
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"
python="${PYTHON:-python3}"
torch_spec="${KERNELRANK_TORCH:-torch==2.13.0}"

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "bootstrap: installing $torch_spec"
  .venv/bin/python -m pip install --quiet "$torch_spec"
fi
if [ "$extra" = "test" ]; then
  .venv/bin/python -m pip install --quiet -e '.[test]'
else
  .venv/bin/python -m pip install --quiet -e .
fi
.venv/bin/python - <<'PY'
import shutil, sys, torch, triton
from torch.utils.cpp_extension import is_ninja_available
print(f"bootstrap: torch {torch.__version__} (cuda: {torch.cuda.is_available()}), triton {triton.__version__}")
# load_inline needs ninja (the `ninja` wheel, a dependency); CUDA submissions need nvcc too
if not is_ninja_available():
    sys.exit("bootstrap: ninja is missing: C++ and CUDA submissions cannot be built")
print(f"bootstrap: ninja {shutil.which('ninja', path=sys.prefix + '/bin') or shutil.which('ninja')}"
      + (f", nvcc {shutil.which('nvcc')}" if torch.cuda.is_available() else ""))
PY
