#!/bin/bash
# The judge's GPU test plan in one device call (logs under $OUT):
#   environment -> parallel prebuild of the controls -> overhead benchmark (cold + warm)
#   -> pytest -m gpu (controls, isolation, comparator) -> reference latencies of the primary problems.
# Run from the repository root on the GPU machine: bash benchmarks/device/run_all.sh
set -u
OUT=${OUT:-/tmp/ptxbench-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/judge_whl/*.whl > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PTXBENCH_CACHE_DIR=/tmp/pcache PTXBENCH_TEST_CACHE=/tmp/pcache
export PATH=/usr/local/cuda/bin:$PATH
STEPS=${STEPS:-"env prebuild overhead pytest refs overhead2"}
for step in $STEPS; do
  echo "=== $step $(date +%T)"
  case $step in
    env)
      { nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,clocks_event_reasons.active --format=csv
        nvcc --version | tail -2; ncu --version | tail -1; compute-sanitizer --version | tail -1
        python3 -c "import torch, cupy, tvm_ffi, pydantic; from cupti import cupti; print('torch', torch.__version__, 'cupy', cupy.__version__, 'tvm_ffi', tvm_ffi.__version__, 'pydantic', pydantic.__version__, 'cupti ok')"
        ls /usr/local/cuda/lib64/stubs/libcuda.so 2>&1; ldconfig -p | grep -c cublas
      } 2>&1 | tee "$OUT/env.log" ;;
    prebuild) timeout 240 python3 benchmarks/device/prebuild.py 2>&1 | tee "$OUT/prebuild.log" ;;
    overhead) timeout 240 python3 benchmarks/judge_overhead.py --cache-dir /tmp/pcache-overhead \
                --json "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log" ;;
    overhead2) timeout 200 python3 benchmarks/judge_overhead.py tests/fixtures/controls/01_gemm_cuda_core.cu \
                --cache-dir /tmp/pcache-overhead2 --json "$OUT/overhead2.json" 2>&1 | tee "$OUT/overhead2.log" ;;
    pytest) PTXBENCH_CONTROLS_OUT="$OUT/controls.jsonl" timeout ${PYTEST_TIMEOUT:-420} python3 -m pytest tests/gpu -m gpu \
              --ignore=tests/gpu/service -p no:cacheprovider -q -rA -s 2>&1 | tee "$OUT/pytest.log" ;;
    refs) timeout 240 python3 benchmarks/device/reference_latencies.py --cache-dir /tmp/pcache --json "$OUT/refs.json" \
            2>&1 | tee "$OUT/refs.log" ;;
  esac
done
cat /tmp/pcache/ncu-logs/*.txt 2>/dev/null | head -c 400000 > "$OUT/ncu_raw.txt"
echo "=== done $(date +%T)"
