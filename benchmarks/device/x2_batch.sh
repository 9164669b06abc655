#!/bin/bash
# Device calls on the two-GPU host (nvidia-h200-x2), one or more stages per call, logs under $OUT:
#
#   bash benchmarks/device/x2_batch.sh throughput   # carry .whl (+ .carry/site_a): cached vs not, one vs two GPUs
#   bash benchmarks/device/x2_batch.sh campaign     # carry .whl + .carry/site_b: the demo campaign, real judge
#   bash benchmarks/device/x2_batch.sh tests rollout
#   GPUS=0 bash benchmarks/device/x2_batch.sh resume   # fresh machine: carry .carry/comb + .carry/runs_h200
#
# The campaign needs prefect, mlflow, duckdb and litellm, which the GPU image lacks. `resume` (and any fresh
# machine) uses ONE pruned py3.12 tarball built HERE by benchmarks/device/campaign_site.sh (.carry/comb, about
# 57 MB, the judge's wheels inside). `campaign` as run on 2026-11-29 used the unpruned site (81 MB) split in
# two parts carried by two consecutive calls to the same warm machine (/tmp/parts); it also takes .carry/comb.
set -u
OUT=${OUT:-/tmp/ptxbench-out}; mkdir -p "$OUT" /tmp/parts /tmp/bin
cd "$(dirname "$0")/../.."
for d in .carry/site_a .carry/site_b; do [ -d "$d" ] && cp -n "$d"/part.* /tmp/parts/ 2>/dev/null; done
ls -la /tmp/parts | tee "$OUT/parts.txt"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PTXBENCH_CACHE_DIR=/tmp/pcache PATH=/tmp/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
printf '#!/bin/sh\nexec python3 -c "import sys; sys.argv[0] = \\"ptxbench\\"; from flows.cli.main import app; app()" "$@"\n' > /tmp/bin/ptxbench
chmod +x /tmp/bin/ptxbench
nvidia-smi --query-gpu=index,name,driver_version,temperature.gpu,clocks.sm,memory.free --format=csv | tee "$OUT/gpus.txt"

MIX="solutions/gemm_n7168_k5120/wgmma_tma_ws.cu solutions/mha_with_lse_d128_causal/fa3_wgmma_tma.cu
  solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu tests/fixtures/controls/02_gemm_tma.cu@gemm_n7168_k5120
  tests/fixtures/controls/05_gemm_wrong_layout.cu@gemm_n7168_k5120
  tests/fixtures/controls/15_attention_wrong_lse.cu@mha_with_lse_d128_causal"

for stage in "$@"; do
  echo "=== $stage $(date +%T)"
  case $stage in
    throughput)
      timeout "${TP_TIMEOUT:-540}" python3 benchmarks/service_throughput.py --gpus 0 --scale-gpus 0,1 \
        --repeat "${TP_REPEAT:-2}" --candidates $MIX --out "$OUT/throughput.json" 2>&1 | tee "$OUT/throughput.txt" ;;
    campaign|resume)
      # campaign: the site tarball's two parts (/tmp/parts); resume: one pruned tarball (.carry/comb, with the
      # judge's wheels in it) and the interrupted campaign's warehouse (.carry/runs_h200), on a fresh machine.
      if [ "$stage" = resume ]; then
        mkdir -p /tmp/site2 && xz -dc .carry/comb/comb.tar.xz | tar -x -C /tmp/site2 || exit 3
        [ -d .carry/runs_h200/runs ] && cp -rn .carry/runs_h200/runs . 2>/dev/null
        export PYTHONPATH=/tmp/site2:$PWD PREFECT_UI_ENABLED=false
      else
        if [ -f .carry/comb/comb.tar.xz ]; then
          mkdir -p /tmp/site2 && xz -dc .carry/comb/comb.tar.xz | tar -x -C /tmp/site2 || exit 3
          export PREFECT_UI_ENABLED=false
        elif ! PYTHONPATH=/tmp/site:/tmp/site2 python3 -c "import prefect, mlflow, duckdb, litellm" 2>/dev/null; then
          mkdir -p /tmp/site2
          cat /tmp/parts/part.00 /tmp/parts/part.01 | xz -dc | tar -x -C /tmp/site2 || { echo "site parts missing"; exit 3; }
        fi
        export PYTHONPATH=/tmp/site:/tmp/site2:$PWD
      fi
      python3 -c "import prefect, mlflow, duckdb, litellm; print('prefect', prefect.__version__, 'mlflow', mlflow.__version__, 'duckdb', duckdb.__version__)" \
        || exit 3
      setsid ptxbench profiler serve --gpus "${GPUS:-0,1}" --port 8765 --work-dir /tmp/prof --log-level warning \
        > "$OUT/profiler.log" 2>&1 < /dev/null &
      for _ in $(seq 300); do ptxbench profiler health --server http://127.0.0.1:8765 --json 2>/dev/null | grep -q '"ok"' && break; sleep 1; done
      sed -e 's/gpu_slots: {hopper: 1}/gpu_slots: {hopper: 2}/' -e 's/compile: 2/compile: 8/' \
        campaigns/demo.yaml > campaigns/demo-h200x2.yaml
      t0=$(date +%s)
      timeout "${CAMPAIGN_TIMEOUT:-520}" ptxbench campaign run campaigns/demo-h200x2.yaml --campaign-id demo-h200x2 \
        --profiler http://127.0.0.1:8765 2>&1 | tee "$OUT/campaign.log"
      echo "campaign wall time: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/campaign.log"
      ptxbench profiler health --server http://127.0.0.1:8765 > "$OUT/profiler_health.txt" 2>&1
      db=runs/demo-h200x2/warehouse.duckdb
      ptxbench report build demo-h200x2 --db "$db" --out reports/demo-h200x2 > "$OUT/report.log" 2>&1
      COLUMNS=200 ptxbench sql --db "$db" --max-rows 100 "SELECT t.problem, t.turn, t.status, t.target_instruction AS target,
        round(e.latency_ms, 3) AS ms, round(e.reference_latency_ms, 3) AS ref_ms, round(t.speedup, 3) AS speedup,
        round(e.total_stage_s, 1) AS judge_s FROM turns t LEFT JOIN evaluations e
        USING (campaign_id, trajectory_id, turn) ORDER BY t.problem, t.turn" > "$OUT/turns.txt" 2>&1
      cat "$OUT/turns.txt"
      pkill -INT -f "profiler serve --gpus" || true  # free the GPUs for the next stage
      tar czf "$OUT/campaign_runs.tgz" runs reports mlruns 2>/dev/null ;;  # mlruns: check MLflow against the warehouse here
    tests)
      timeout "${TESTS_TIMEOUT:-330}" python3 -m pytest -q -rA -s -m gpu tests/gpu/service/test_service_two_gpus.py \
        -p no:cacheprovider 2>&1 | tee "$OUT/two_gpu_tests.log" ;;
    rollout)
      timeout "${RO_TIMEOUT:-300}" python3 benchmarks/rollout_concurrency.py --gpus 0 --concurrency 4,16,48 \
        --budget-s "${RO_BUDGET:-240}" --candidates solutions/gemm_n7168_k5120/wgmma_tma_ws.cu \
        solutions/mha_with_lse_d128_causal/fa3_wgmma_tma.cu --out "$OUT/rollout.json" 2>&1 | tee "$OUT/rollout.txt" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
echo "=== done $(date +%T)"
