#!/usr/bin/env bash
# One device call for the Triton track (issue 16), under 4 minutes on the H200 with the default TRITON_TESTS=judge:
#
#   bash benchmarks/device/triton_batch.sh          # carry [".carry/judge_whl", ".carry/bwrap"]
#
# TRITON_TESTS=judge (default): every solutions/triton kernel and every Triton control through the judge
#   (`judge_candidate(..., language="triton")`: validator on the GPU host, child session in mode triton, memcheck
#   over the session's Triton cache, CUPTI timing, foreign-kernel rule, cubin SASS + ncu on the launched kernels);
#   expected: solutions PASSED with target executed, controls as tests/fixtures/controls/triton/expected.json says.
# TRITON_TESTS=all: also the standalone checks of tests/gpu/test_triton_gpu.py (do_bench timing against the
#   baseline, SASS of the launched cubins, ncu with the kernel filter, each control's dynamic symptom): about 3
#   more minutes, so raise TRITON_TIMEOUT and the device call's limit.
# PTXBENCH_TRITON_SANITIZER=0 drops the memcheck gate from the judge tests (faster; the protocol's default is on).
# Output under $OUT: env.txt, pip.log, pytest.log, triton_rows.jsonl (one JSON row per check, the judge rows with
# status / target / ncu counts / latency / speedup / stage seconds), verdicts.md (the judge rows as a table),
# ncu/*.txt (raw Nsight Compute pages of the judge's runs). Uses the image's torch 2.11 and triton 3.6.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/triton-batch-out}; mkdir -p "$OUT/ncu"
# the common GPU-host environment: the judge's wheels (.carry/judge_whl) into /tmp/site, PYTHONPATH, PATH, and the
# carried bubblewrap (.carry/bwrap) as PTXBENCH_BWRAP: the Triton child, memcheck and ncu run in the sandbox
WHEELS= PIP_LOG=$OUT/pip.log . benchmarks/device/preamble.sh || { echo "preamble failed"; exit 3; }
export PTXBENCH_CACHE_DIR=${PTXBENCH_CACHE_DIR:-/tmp/ptxbench-cache} PTXBENCH_TRITON_OUT=$OUT/triton_rows.jsonl
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: > "$PTXBENCH_TRITON_OUT"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.free --format=csv
  ncu --version | tail -1; compute-sanitizer --version | tail -1
  python3 -c "import torch, triton, cupy, pydantic; from cupti import cupti; print('torch', torch.__version__, 'triton', triton.__version__, 'cupy', cupy.__version__, 'pydantic', pydantic.__version__, 'cupti ok')"
} 2>&1 | tee "$OUT/env.txt"
python3 -c "import pydantic, yaml; from cupti import cupti" 2>/dev/null || { echo "missing pydantic/pyyaml/cupti: carry .carry/judge_whl"; exit 3; }
SELECT=(-k judge)
[ "${TRITON_TESTS:-judge}" = all ] && SELECT=()
echo "=== tests (${TRITON_TESTS:-judge}) $(date +%T)"
timeout "${TRITON_TIMEOUT:-215}" python3 -m pytest -q -rA -s -m gpu tests/gpu/test_triton_gpu.py -p no:cacheprovider \
  --basetemp=/tmp/triton-batch-tmp ${SELECT[@]+"${SELECT[@]}"} "$@" 2>&1 | tee "$OUT/pytest.log" \
  | grep -E '^\{|PASSED|FAILED|ERROR|SKIPPED|passed|failed'
for f in /tmp/triton-batch-tmp/*/*/ncu.txt /tmp/triton-batch-tmp/*/judge/ncu-logs/*.txt; do
  [ -f "$f" ] && cp "$f" "$OUT/ncu/$(basename "$(dirname "$f")")-$(basename "$f")"
done
python3 - "$PTXBENCH_TRITON_OUT" > "$OUT/verdicts.md" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print("| candidate | status | target | speedup | latency ms | memcheck | reason |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    if r.get("check") != "judge":
        continue
    name = r.get("control") or f"{r.get('problem')}/{r.get('kernel')}"
    speed = f"{r['speedup']:.3f}" if r.get("speedup") else ""
    lat = f"{r['latency_ms']:.4f}" if r.get("latency_ms") else ""
    mem = "" if not r.get("memcheck") else f"{r['memcheck']['ran']} run, {r['memcheck']['errors']} errors"
    print(f"| {name} | {r['status']} | {r['target']} | {speed} | {lat} | {mem} | {r['reason'][:120]} |")
EOF
cat "$OUT/verdicts.md"
echo "=== done $(date +%T)"
