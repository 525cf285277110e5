#!/usr/bin/env bash
# The CUDA checks of the torch band engine in one run, for a machine with a GPU: the CUDA tests
# (they skip elsewhere) and benchmark P10 with its GPU rows; figures go to benchmarks/README.md.
#
#   scripts/gpu_checks.sh [OUT_DIR]      # PYTHON=... picks the interpreter (default: python)
#
# Needs a Python with mixfold's dependencies (numpy, scipy, ml_dtypes, click, pytest) and a CUDA
# build of torch. P10_ROWS / GPU_ROWS / ERROR_ROWS / FIT_ROWS size the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT=${1:-.}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - <<'PYEOF'
import torch
assert torch.cuda.is_available(), "no CUDA device: these checks need one"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0), "capability",
      torch.cuda.get_device_capability(0))
PYEOF
"$PY" -m pytest -q -rs -p no:cacheprovider tests/compute/test_linear_torch.py \
    tests/precision/test_emulation.py -k "cuda or gpu or fp8" 2>&1 | tee "$OUT/gpu_tests.txt"
"$PY" benchmarks/precision.py --p10-rows "${P10_ROWS:-1000000}" --gpu-rows "${GPU_ROWS:-10000000}" \
    --error-rows "${ERROR_ROWS:-20000}" --fit-rows "${FIT_ROWS:-200000}" --rows 20000 \
    --workers 1000 --json "$OUT/p10.json" 2>&1 | tee "$OUT/p10.txt"
