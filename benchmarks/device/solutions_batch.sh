#!/bin/bash
# One device call: the solution library and the knowledge-pack GEMM on the H200 (logs under $OUT).
#   bash benchmarks/device/solutions_batch.sh        (carry: .carry)
set -u
OUT=${OUT:-/tmp/ptxbench-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/judge_whl/*.whl > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PTXBENCH_CACHE_DIR=/tmp/pcache PATH=/tmp/bin:/usr/local/cuda/bin:$PATH
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -c "import sys; sys.argv[0] = \\"ptxbench\\"; from flows.cli.main import app; app()" "$@"\n' > /tmp/bin/ptxbench
chmod +x /tmp/bin/ptxbench
STEPS=${STEPS:-"prebuild packs solutions table"}
for step in $STEPS; do
  echo "=== $step $(date +%T)"
  case $step in
    prebuild) timeout 120 python3 benchmarks/device/prebuild.py solutions/*/*.cu 2>&1 | tee "$OUT/prebuild.log" ;;
    solutions) timeout ${SOL_TIMEOUT:-330} bash solutions/run_all.sh /tmp/sol 2>&1 | tee "$OUT/solutions.log" ;;
    replay) timeout ${REPLAY_TIMEOUT:-300} bash solutions/run_all.sh /tmp/sol --with-replay 2>&1 | tee "$OUT/replay.log" ;;
    table) python3 solutions/make_table.py /tmp/sol > "$OUT/table.md" 2>&1; cat "$OUT/table.md" ;;
    packs) timeout 120 python3 -m pytest tests/knowledge_packs -m gpu -p no:cacheprovider -q -rA 2>&1 | tail -30 | tee "$OUT/packs.log" ;;
  esac
done
tar czf "$OUT/sol.tgz" -C /tmp sol 2>/dev/null; echo "=== done $(date +%T)"
