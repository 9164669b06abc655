#!/usr/bin/env bash
# One device call for the Triton track (issue 16), about 3-4 minutes on the H200:
#
#   bash benchmarks/device/triton_batch.sh          # carry [".whl"] (the judge's wheels: pydantic, pyyaml, ...)
#
# Runs tests/gpu/test_triton_gpu.py: each solutions/triton kernel against cuBLAS / cuDNN (PTXBench's rule),
# triton.testing.do_bench timing, the SASS families of the cubins its calls launched, Nsight Compute counts over
# those kernels only; the dynamic symptom of each Triton control; the judge on solutions and controls once
# `judge_candidate(..., language="triton")` exists (skipped before). Uses the image's torch and triton 3.6.
# Output under $OUT: pytest.log, triton_rows.jsonl (one JSON row per check), ncu/*.txt, env.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/triton-batch-out}; mkdir -p "$OUT/ncu"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || { echo "wheel install failed"; cat "$OUT/pip.log"; exit 3; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PTXBENCH_CACHE_DIR=${PTXBENCH_CACHE_DIR:-/tmp/ptxbench-cache} PTXBENCH_TRITON_OUT=$OUT/triton_rows.jsonl
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: > "$PTXBENCH_TRITON_OUT"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.free --format=csv
  python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"
} 2>&1 | tee "$OUT/env.txt"
python3 -c "import pydantic, yaml" 2>/dev/null || { echo "missing pydantic/pyyaml: carry .whl"; exit 3; }
echo "=== tests $(date +%T)"
timeout ${TRITON_TIMEOUT:-420} python3 -m pytest -q -rA -s -m gpu tests/gpu/test_triton_gpu.py -p no:cacheprovider \
  --basetemp=/tmp/triton-batch-tmp "$@" 2>&1 | tee "$OUT/pytest.log" | grep -E '^\{|PASSED|FAILED|ERROR|SKIPPED|passed|failed'
for f in /tmp/triton-batch-tmp/*/*/ncu.txt; do [ -f "$f" ] && cp "$f" "$OUT/ncu/$(basename "$(dirname "$f")").txt"; done
echo "=== done $(date +%T)"
