#!/bin/bash
# One device call: diagnose the causal attention-backward mismatch, then the profiling service's GPU tests.
set -u
OUT=${OUT:-/tmp/ptxbench-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PTXBENCH_CACHE_DIR=/tmp/pcache
echo "=== diag $(date +%T)"
timeout ${DIAG_TIMEOUT:-120} python3 benchmarks/device/diagnose_mha_bwd.py solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu \
  2>&1 | tee "$OUT/diag.log" | tail -40
echo "=== service tests $(date +%T)"
PTXBENCH_CACHE_DIR=/tmp/ptxbench-cache timeout ${SERVICE_TIMEOUT:-300} bash benchmarks/device/service_gpu.sh tests 2>&1 | tail -40
echo "=== done $(date +%T)"
