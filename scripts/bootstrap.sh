#!/usr/bin/env bash
# Create ./.venv with KernelRank installed, on a fresh machine.
#   bash scripts/bootstrap.sh         # the service and CLI
#   bash scripts/bootstrap.sh test    # plus the test dependencies
#
# 1. System tools: a C++ compiler and Python's headers (C++ submissions are built by
#    torch.utils.cpp_extension.load_inline); on Debian, as root, missing ones are apt-installed,
#    elsewhere the script names them and stops.
# 2. torch first, so that the package's own `torch>=2.5` range is already met and pip never pulls
#    a build this machine cannot use: without a GPU, PyTorch's CPU build (from PyTorch's CPU wheel
#    index, KERNELRANK_TORCH_INDEX; where that index cannot be reached, the pinned version from the
#    default index); with a GPU (nvidia-smi sees one), the default index's CUDA build.
#    KERNELRANK_TORCH overrides the requirement (default torch==2.13.0); an existing torch is kept.
#    GPU hosts need nvcc from the CUDA toolkit for CUDA submissions (Dockerfile.gpu has all of it).
# 3. The package (editable), with the test extras for `test` and on a GPU host the gpu extra; then a
#    check that ninja is usable.
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"
python="${PYTHON:-python3}"
torch_spec="${KERNELRANK_TORCH:-torch==2.13.0}"
cpu_index="${KERNELRANK_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"

say() { echo "bootstrap: $*"; }
die() { echo "bootstrap: $*" >&2; exit 1; }

# -- 1. system tools ---------------------------------------------------------------------------
command -v "$python" >/dev/null || die "$python not found: install Python 3.11 or newer (or set PYTHON)"
missing_tools() {
  local need=()
  command -v c++ >/dev/null || command -v g++ >/dev/null || need+=(g++)
  "$python" - <<'PY' || need+=(python3-dev)
import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
  "$python" -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
  echo "${need[@]:-}"
}
need="$(missing_tools)"
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing $need (apt)"
    apt-get update -qq
    # shellcheck disable=SC2086 # a list of package names
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
    need="$(missing_tools)"
  fi
  [ -z "$need" ] || die "missing: $need (a C++ compiler and $python's headers build C++ submissions; \
Debian/Ubuntu: apt-get install g++ python3-dev python3-venv, or install the headers of the Python in use)"
fi

# -- 2. torch for this machine ---------------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
pip() { .venv/bin/python -m pip "$@"; }
pip install --quiet --upgrade pip
has_gpu() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if has_gpu || [ -n "${KERNELRANK_TORCH:-}" ] || [ -z "$cpu_index" ]; then
    say "installing $torch_spec"
    pip install --quiet "$torch_spec"
  else
    say "no GPU seen: installing $torch_spec, PyTorch's CPU build"
    # a short timeout, no retries: an index that cannot be reached costs seconds, then the fallback
    if ! pip install --quiet --timeout 20 --retries 0 --index-url "$cpu_index" "$torch_spec" 2>/tmp/bootstrap-torch.$$; then
      say "PyTorch's CPU index could not be used ($(grep -m1 -i 'error' /tmp/bootstrap-torch.$$ || echo 'no answer')); installing $torch_spec from the default index"
      pip install --quiet "$torch_spec"
    fi
    rm -f /tmp/bootstrap-torch.$$
  fi
fi

# -- 3. the package ------------------------------------------------------------------------------
# a GPU host also takes the gpu extra (the CUDA driver's bindings the device slots use)
gpu_extra=""
if has_gpu; then gpu_extra=",gpu"; fi
if [ "$extra" = "test" ]; then
  pip install --quiet -e ".[test$gpu_extra]"
else
  pip install --quiet -e ".${gpu_extra:+[gpu]}"
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
if not torch.cuda.is_available() and "+cpu" not in torch.__version__ and torch.version.cuda:
    print(f"bootstrap: note: torch {torch.__version__} is a CUDA build on a machine without a GPU "
          "(PyTorch's CPU index could not be reached); it works on the CPU, only larger")
PY
