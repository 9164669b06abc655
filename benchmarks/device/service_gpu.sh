#!/usr/bin/env bash
# The profiling service on the GPU host, one stage per device `run` call (each fits in 10 minutes):
#
#   benchmarks/device/service_gpu.sh tests        # pytest -m gpu tests/gpu/service (real judge)
#   benchmarks/device/service_gpu.sh throughput   # benchmarks/service_throughput.py (cached vs not)
#   benchmarks/device/service_gpu.sh rollout      # benchmarks/rollout_concurrency.py (4 -> 48)
#
# Call it with carry [".whl"] (fill .whl first, here: benchmarks/device/fetch_service_wheels.sh, plus
# the judge's wheels). Logs and JSON go to $OUT. GPUS=0,1 to use two GPUs; extra arguments after the
# stage go to the benchmark script.
set -uo pipefail
stage=${1:-tests}; shift || true
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/service-gpu-out}; mkdir -p "$OUT"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 3; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PTXBENCH_CACHE_DIR=${PTXBENCH_CACHE_DIR:-/tmp/ptxbench-cache}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
GPUS=${GPUS:-0}
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.sm,memory.free --format=csv | tee "$OUT/gpus.txt"
python3 -c "import fastapi, uvicorn, pydantic, torch; print('fastapi', fastapi.__version__, 'torch', torch.__version__)" \
  || { echo "missing packages: carry .whl"; exit 3; }
case "$stage" in
  tests)
    python3 -m pytest -q -rA -m gpu tests/gpu/service -p no:cacheprovider "$@" 2>&1 | tee "$OUT/service_gpu_tests.log" ;;
  throughput)
    python3 benchmarks/service_throughput.py --gpus "$GPUS" --out "$OUT/service_throughput.json" "$@" 2>&1 \
      | tee "$OUT/service_throughput.txt" ;;
  rollout)
    python3 benchmarks/rollout_concurrency.py --gpus "$GPUS" --out "$OUT/rollout_concurrency.json" "$@" 2>&1 \
      | tee "$OUT/rollout_concurrency.txt" ;;
  *) echo "stage must be tests, throughput or rollout"; exit 2 ;;
esac
