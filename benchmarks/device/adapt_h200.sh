#!/bin/bash
# The adapt pipeline on the GPU host, in ONE device call, logs under $OUT (issue 15, item 8):
#   source campaign (replay/demo: compile error -> runtime error -> numerical error -> generic kernel ->
#   TMA + wgmma kernel) judged by the real profiling service
#   -> ptxbench adapt build campaigns/adapt/demo-fixit.yaml   (replay teacher = our wgmma kernels; pairs need
#      dynamic target evidence from ncu; replay synthesizer)
#   -> ptxbench adapt build campaigns/adapt/demo-kernelgen.yaml
#   -> benchmarks/device/adapt_check.py: both Parquet files loaded with datasets and pyarrow
#
# Prepare HERE:  bash benchmarks/device/campaign_site.sh && bash benchmarks/device/fetch_adapt_wheels.sh
# Run:           kind nvidia-h200-x2, carry [".carry/comb", ".carry/adapt_whl", ".carry/bwrap"], command
#                bash benchmarks/device/adapt_h200.sh
# The judge's own wheels (tvm_ffi, cupti-python, pyelftools: .carry/judge_whl) do not fit beside comb in one
# call's 64 MiB. Install them in an EARLIER call on the same warm machine (any run.sh or generalization.sh call
# carrying .carry/judge_whl puts them in /tmp/site); this script adds $JUDGE_SITE (default /tmp/site) to the
# path and stops at once when tvm_ffi is not importable.
# On one H200:   GPUS=0 PROBLEMS=gemm_n7168_k5120 bash benchmarks/device/adapt_h200.sh
# Expected: about 4-5 min on two GPUs with the two default problems (the source campaign's 8 GPU turns take
# most of it; the repairs re-judge kernels the service has already built, sanitized and profiled).
set -u
OUT=${OUT:-/tmp/ptxbench-out}; mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
GPUS=${GPUS:-0,1}
PROBLEMS=${PROBLEMS:-gemm_n7168_k5120,mha_with_lse_d128}
NGPU=$(echo "$GPUS" | tr ',' '\n' | wc -l)
mkdir -p /tmp/site2 /tmp/site3 /tmp/bin
xz -dc .carry/comb/comb.tar.xz | tar -x -C /tmp/site2 || { echo "missing .carry/comb"; exit 3; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site3 .carry/adapt_whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 3; }
# The preamble without wheels: the carried bubblewrap (the judge sandboxes every candidate), PATH, the shim.
JUDGE_WHEELS= WHEELS= PTXBENCH_SITE=/tmp/site2 . benchmarks/device/preamble.sh || exit 3
JUDGE_SITE=${JUDGE_SITE:-/tmp/site}
export PYTHONPATH=/tmp/site2:/tmp/site3:$JUDGE_SITE:$PWD PYTHONUNBUFFERED=1 PTXBENCH_CACHE_DIR=/tmp/pcache PATH=/tmp/bin:$PATH
export PREFECT_UI_ENABLED=false HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 HF_DATASETS_CACHE=/tmp/hfcache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
printf '#!/bin/sh\nexec python3 -c "import sys; sys.argv[0] = \\"ptxbench\\"; from flows.cli.main import app; app()" "$@"\n' > /tmp/bin/ptxbench
chmod +x /tmp/bin/ptxbench
python3 -c "import tvm_ffi, cupti" 2>/dev/null || {
  echo "the judge's wheels are not in $JUDGE_SITE: install .carry/judge_whl in an earlier call (see the header)"; exit 3; }
python3 -c "import prefect, mlflow, duckdb, litellm, datasets, bm25s; print('prefect', prefect.__version__, 'duckdb', duckdb.__version__, 'datasets', datasets.__version__)" \
  | tee "$OUT/versions.txt" || exit 3
nvidia-smi --query-gpu=index,name,driver_version,temperature.gpu,clocks.sm --format=csv | tee "$OUT/gpus.txt"
t0=$(date +%s)
setsid ptxbench profiler serve --gpus "$GPUS" --port 8765 --work-dir /tmp/prof --log-level warning \
  > "$OUT/profiler.log" 2>&1 < /dev/null &
SERVER=$!
for _ in $(seq 300); do
  ptxbench profiler health --server http://127.0.0.1:8765 --json 2>/dev/null | grep -q '"ok"' && break
  kill -0 "$SERVER" 2>/dev/null || { echo "the profiling service exited:"; tail -20 "$OUT/profiler.log"; exit 3; }
  sleep 1
done
URL=http://127.0.0.1:8765
DB=runs/adapt-h200/warehouse.duckdb
sed -e "s/^problems: primary/problems: [${PROBLEMS}]/" -e "s/gpu_slots: {hopper: 1}/gpu_slots: {hopper: ${NGPU}}/" \
    -e 's/compile: 2/compile: 8/' campaigns/demo.yaml > campaigns/adapt-h200-source.yaml
echo "=== source campaign $(date +%T)"
timeout "${CAMPAIGN_TIMEOUT:-300}" ptxbench campaign run campaigns/adapt-h200-source.yaml --campaign-id demo \
  --warehouse "$DB" --profiler "$URL" 2>&1 | tee "$OUT/source_campaign.log"
for recipe in demo-fixit demo-kernelgen; do
  echo "=== adapt build $recipe $(date +%T)"
  timeout "${BUILD_TIMEOUT:-200}" ptxbench adapt build "campaigns/adapt/$recipe.yaml" --warehouse "$DB" \
    --profiler "$URL" --out "$OUT/adapt/$recipe" 2>&1 | tee "$OUT/build_$recipe.log"
done
echo "=== check $(date +%T)"
python3 benchmarks/device/adapt_check.py --warehouse "$DB" "$OUT"/adapt/demo-fixit/demo-fixit.parquet \
  "$OUT"/adapt/demo-kernelgen/demo-kernelgen.parquet 2>&1 | tee "$OUT/adapt_check.txt"
echo "wall time: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/adapt_check.txt"
pkill -INT -f "profiler serve --gpus" || true
tar czf "$OUT/adapt_runs.tgz" runs 2>/dev/null
echo "=== done $(date +%T)"
