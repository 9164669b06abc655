#!/usr/bin/env bash
# The candidate sandbox on the GPU host, in ONE device call (about 6-8 minutes):
#   1. benchmarks/device/sandbox_gpu_check.py   CUDA, IPC, libcuda preload, sanitizer and ncu inside bwrap
#   2. benchmarks/sandbox_cost.py --repeats 3   GEMM solution build: direct vs unsandboxed vs sandboxed
# Carry [".carry/bwrap", ".carry/judge_whl"] (fill them here first: benchmarks/device/fetch_bwrap.sh, and the
# judge's wheels as for tools/run_solutions.sh). Logs and JSON go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/sandbox-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/judge_whl/*.whl > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 3; }
# nobody must reach bwrap for the unprivileged mode: copy it out of the (possibly private) checkout
rm -rf /opt/ptxbench-bwrap && cp -r .carry/bwrap /opt/ptxbench-bwrap && chmod -R a+rX /opt/ptxbench-bwrap
export PTXBENCH_BWRAP=/opt/ptxbench-bwrap/bwrap PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export PATH=/usr/local/cuda/bin:$PATH PTXBENCH_CACHE_DIR=/tmp/pcache-sandbox
"$PTXBENCH_BWRAP" --version | tee "$OUT/bwrap.txt"
timeout 300 python3 benchmarks/device/sandbox_gpu_check.py --out "$OUT" 2>&1 | tee "$OUT/sandbox_gpu_check.log"
timeout 280 python3 benchmarks/sandbox_cost.py --repeats 3 --json "$OUT/sandbox_cost.json" 2>&1 \
  | tee "$OUT/sandbox_cost.log"
echo "=== done"
