#!/bin/bash
# One device call: judge the attention-backward kernels again, then the service throughput benchmark.
set -u
OUT=${OUT:-/tmp/ptxbench-out}; mkdir -p "$OUT" /tmp/sol2 /tmp/bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PTXBENCH_CACHE_DIR=/tmp/pcache PATH=/tmp/bin:$PATH
printf '#!/bin/sh\nexec python3 -c "import sys; sys.argv[0] = \\"ptxbench\\"; from flows.cli.main import app; app()" "$@"\n' > /tmp/bin/ptxbench
chmod +x /tmp/bin/ptxbench
echo "=== prebuild $(date +%T)"
timeout 90 python3 benchmarks/device/prebuild.py solutions/mha_bwd_d128*/*.cu 2>&1 | tail -5
echo "=== precision diagnostic $(date +%T)"
timeout 90 python3 -m tests.solutions.bwd_precision_h200 2>&1 | tail -25 | tee "$OUT/bwd_precision.txt"
for k in solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu solutions/mha_bwd_d128_causal/fa2_mma.cu \
         solutions/mha_bwd_d128/wgmma_tma_ws.cu solutions/mha_bwd_d128/fa2_mma.cu; do
  p=$(basename "$(dirname "$k")"); n=$(basename "$k" .cu)
  echo "=== eval $p $n $(date +%T)"
  timeout 150 ptxbench eval "$k" --problem "$p" --json > "/tmp/sol2/${p}__${n}.json" 2> "/tmp/sol2/${p}__${n}.stderr"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d.get("performance") or {}; print(d["status"], d["reason"][:200], p.get("latency_ms"), p.get("speedup_factor"), d["target_instruction"]["status"])' "/tmp/sol2/${p}__${n}.json"
done
tar czf "$OUT/sol2.tgz" -C /tmp sol2
echo "=== throughput $(date +%T)"
timeout ${TP_TIMEOUT:-230} python3 benchmarks/service_throughput.py --gpus 0 --per-problem 1 --repeat 1 \
  --out "$OUT/throughput.json" 2>&1 | tail -30 | tee "$OUT/throughput.txt"
echo "=== done $(date +%T)"
