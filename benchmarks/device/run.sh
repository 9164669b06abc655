#!/usr/bin/env bash
# shellcheck disable=SC2317 # the stage functions are called by name (stage_NAME)
# The GPU host's batches, one device call: any stages, in the order given, each with its own timeout and log.
#
#   bash benchmarks/device/run.sh STAGE [STAGE...]          (from anywhere; it works in the repository root)
#   bash benchmarks/device/run.sh env prebuild pytest refs overhead     # the judge's test plan
#   bash benchmarks/device/run.sh env prebuild packs solutions table    # the solution library (29 kernels: about
#   SOL_ARGS=--resume bash benchmarks/device/run.sh solutions table     # 12 min, so a second call goes on from there)
#   bash benchmarks/device/run.sh --list                                # the stages
#
# Carry .carry/judge_whl (the judge's wheels) and, for the service stages, .whl (benchmarks/device/
# fetch_service_wheels.sh fills it); the campaign stages also take .carry/comb (benchmarks/device/
# campaign_site.sh). benchmarks/device/preamble.sh sets up the environment first.
#
# A failed or timed-out stage is recorded and the next one runs. What comes back from the device tool is
# $OUT/summary.txt (one line per stage: exit code, seconds) and $OUT/outputs.tgz (every log and result,
# under outputs/; split into outputs.tgz.part-NN if over 15 MiB). Exit code 0 when every stage passed,
# 1 otherwise, 2 for a bad command line, 3 when the preamble failed.
#
# Knobs (environment): OUT (/tmp/ptxbench-out); BUDGET_S (575: seconds the whole call may take: stage
# timeouts are cut to fit it and stages that no longer fit are skipped, so the summary and the tarball are
# always written inside a device call); <STAGE>_TIMEOUT (e.g. PYTEST_TIMEOUT, SERVICE_PYTEST_TIMEOUT);
# PYTEST_ARGS (added to the pytest stage, split at spaces, e.g. --deselect ...); PYTEST_K (one -k expression
# for it, spaces kept: PYTEST_K="env_hostile and h17"); HOSTILE_K (the same for hostile-controls); GPUS (default: every visible GPU, e.g. 0,1); PREBUILD (files for prebuild: the controls and the
# solutions); OVERHEAD_KERNELS; STAGES_KERNEL; SOL_DIR (/tmp/sol) and SOL_ARGS (e.g. "--server URL", or "--resume": a second
# call on the warm machine goes on where a timed-out solutions stage stopped);
# EVAL ("FILE.cu" or "FILE.cu@problem" ...); SERVICE_TESTS; TOOL_PHASES_ARGS (e.g. a kernel and --repeats 5); DECODE_PROBE_ARGS; BUILD_TIME_ARGS; THROUGHPUT_ARGS, ROLLOUT_ARGS, ENV_STEPS_ARGS and METER_PROBE_ARGS (replace the
# default arguments); BWD_ARGS (added); DIAG_KERNEL and DIAG_PROBLEM; PROFILE_KERNELS ("FILE.cu@problem ..."); CAMPAIGN_ID (demo-h200x2), CAMPAIGN_SLOTS (2),
# PROFILER_PORT (8765); PTXBENCH_TEST_JUDGE_CONFIG (JudgeConfig fields as JSON for the GPU suites, e.g.
# '{"prepare_tools": true}' for hostile-controls: tests/gpu/judge_overrides.py);
# and the preamble's (JUDGE_WHEELS, WHEELS, PYTHON, PTXBENCH_SITE, PTXBENCH_BIN, PTXBENCH_CACHE_DIR).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SELF=$REPO/benchmarks/device/run.sh
cd "$REPO" || exit 3

# stage: default timeout (s), what it does
STAGE_TABLE="
env             60  GPU, driver, toolkit and Python package versions
prebuild       240  nvcc -lcuda builds of \$PREBUILD in parallel into the compile cache
pytest         420  pytest tests/gpu -m gpu (service tests excluded), JUnit XML
service-pytest 330  pytest -m gpu \$SERVICE_TESTS (tests/gpu/service: the profiling service, real judge)
controls-jsonl 300  the 15 golden controls alone, every verdict envelope to controls.jsonl
overhead       240  benchmarks/judge_overhead.py per \$OVERHEAD_KERNELS, fresh cache (cold, then warm)
stages         240  benchmarks/judge_stages.py: judge stage times of the GEMM solution (campaign vs eval)
refs           240  benchmarks/device/reference_latencies.py: baseline latency of the primary problems
solutions      540  tools/run_solutions.sh \$SOL_DIR: ptxbench eval --json of every library kernel (--resume in SOL_ARGS goes on)
replay         330  tools/run_solutions.sh \$SOL_DIR --with-replay (library kernels and replay turns)
table           60  tools/solutions_table.py \$SOL_DIR: the README tables from the envelopes
eval           600  ptxbench eval --json of each kernel in \$EVAL (default: the attention-backward kernels)
packs          120  pytest tests/knowledge_packs -m gpu (the GEMM built from the Hopper pack)
throughput     540  benchmarks/service_throughput.py: cached vs not; one vs all GPUs when there are several
rollout        300  benchmarks/rollout_concurrency.py: turns/s vs concurrency 4, 16, 48
env-steps      480  benchmarks/env_steps.py: environment steps/s, p50/p95 step latency, 1 / 4 / 16 environments, one GPU
campaign       560  the demo campaign through ptxbench profiler serve (needs .carry/comb or site parts)
resume         560  campaign, resumed from a carried warehouse (.carry/runs_h200) on a fresh machine
batch          420  benchmarks/device/judge_batch.py: one judge over \$BATCH (default: the library, then every replay turn)
sandbox-check  240  benchmarks/device/sandbox_gpu_check.py: CUDA, IPC, sanitizer, ncu inside the sandbox
hostile        300  pytest tests/gpu/test_hostile_gpu.py: the hostile controls in order, envelopes to hostile.jsonl
hostile-controls 480  the hostile controls, then the 15 golden controls: one ordered pytest run (issue 14)
sandbox-cost   240  benchmarks/judge_sandbox_cost.py: the GEMM judged with and without the sandbox (A B B A)
meter          420  benchmarks/meter_audit.py: the library with and without the device meter, honest claim/busy ratios
latency        480  benchmarks/judge_latency.py \$LATENCY_ARGS: new candidates through a warm service, stage table, per GPU-minute
tool-phases    300  benchmarks/tool_phases.py: where memcheck's and ncu's seconds go (interpreter, imports, CUDA, child, each tool)
build-time     180  benchmarks/build_time.py \$BUILD_TIME_ARGS: the compile stage of new candidates by phase (nvcc, gate, SASS)
audit-probe    240  python -m research.timing.audit_probe: honest candidates' timing audits as warm-up/timed counts and the sanitizer vary
meter-probe    240  python -m research.timing.meter_probe \$METER_PROBE_ARGS: the device meter's coverage of trials of long calls
bwd-precision   90  python -m research.precision.bwd_h200: dS rounding variants vs the judge's cuDNN refs
diag           120  python -m research.precision.diagnose_mha_bwd \$DIAG_KERNEL: candidate vs cuDNN vs float64
bwd-profile    300  python -m research.kernels.mha_bwd.profile_ncu per \$PROFILE_KERNELS: ncu --set full, candidate vs cuDNN
ncu-phases     240  python -m research.timing.ncu_phases \$NCU_PHASES_ARGS: a prestarted ncu run after its request, step by step
decode-probe   120  python -m research.timing.decode_probe \$DECODE_PROBE_ARGS: the meter's sample reader against cupti-python's decode
"

MIX="solutions/gemm_n7168_k5120/wgmma_tma_ws.cu solutions/mha_with_lse_d128_causal/fa3_wgmma_tma.cu
  solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu tests/fixtures/controls/02_gemm_tma.cu@gemm_n7168_k5120
  tests/fixtures/controls/05_gemm_wrong_layout.cu@gemm_n7168_k5120
  tests/fixtures/controls/15_attention_wrong_lse.cu@mha_with_lse_d128_causal"

gpu_list() {  # $GPUS, else every visible GPU as "0,1,...", else 0
  local found
  found=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | paste -sd, -)
  echo "${GPUS:-${found:-0}}"
}

# ---------------------------------------------------------------------------------------------- stages
stage_env() {
  local rc=0
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu,memory.free,clocks_event_reasons.active \
    --format=csv || rc=1
  nvcc --version | tail -2 || rc=1
  ncu --version | tail -1 || rc=1
  compute-sanitizer --version | tail -1 || rc=1
  "$PYTHON" -c "import torch, cupy, tvm_ffi, pydantic; from cupti import cupti; print('torch', torch.__version__, 'cupy', cupy.__version__, 'tvm_ffi', tvm_ffi.__version__, 'pydantic', pydantic.__version__, 'cupti ok')" \
    || rc=1
  "$PYTHON" -c "import fastapi, uvicorn; print('fastapi', fastapi.__version__, 'uvicorn', uvicorn.__version__)" \
    || echo "(no fastapi/uvicorn: the service stages need the .whl wheels)"
  ls /usr/local/cuda/lib64/stubs/libcuda.so || rc=1
  echo "cublas libraries: $(ldconfig -p | grep -c cublas)"
  # the host CPU: builds and tool start-ups differ by machine (the same tree built 4.6 s and 5.8 s on two of them)
  echo "cpu: $(nproc) x $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
  return "$rc"
}

stage_prebuild() {
  # shellcheck disable=SC2086 # a list of files
  "$PYTHON" benchmarks/device/prebuild.py ${PREBUILD:-tests/fixtures/controls/*.cu solutions/*/*.cu}
}

stage_pytest() {
  local select=()
  [ -n "${PYTEST_K:-}" ] && select=(-k "$PYTEST_K")  # one -k expression, spaces kept
  # shellcheck disable=SC2086 # PYTEST_ARGS is a list of arguments
  PTXBENCH_CONTROLS_OUT=$RUN_OUT/pytest_controls.jsonl PTXBENCH_TEST_CACHE=$PTXBENCH_CACHE_DIR \
    "$PYTHON" -m pytest tests/gpu -m gpu --ignore=tests/gpu/service "${select[@]}" ${PYTEST_ARGS:-} -p no:cacheprovider \
    -q -rA -s --junitxml="$RUN_OUT/pytest.xml"
}

stage_controls_jsonl() {
  PTXBENCH_CONTROLS_OUT=$RUN_OUT/controls.jsonl PTXBENCH_TEST_CACHE=$PTXBENCH_CACHE_DIR \
    "$PYTHON" -m pytest tests/gpu/test_controls.py -m gpu -p no:cacheprovider -q -rA -s \
    --junitxml="$RUN_OUT/controls.xml"
}

stage_overhead() {
  local k rc=0
  for k in ${OVERHEAD_KERNELS:-tests/fixtures/controls/02_gemm_tma.cu}; do
    echo "--- $k"
    "$PYTHON" benchmarks/judge_overhead.py "$k" --cache-dir "$(mktemp -d /tmp/pcache-overhead.XXXXXX)" \
      --json "$RUN_OUT/overhead_$(basename "$k" .cu).json" || rc=1
  done
  return "$rc"
}

stage_stages() {
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/judge_stages.py ${STAGES_KERNEL:-} --json "$RUN_OUT/judge_stages.json"
}

stage_refs() {
  "$PYTHON" benchmarks/device/reference_latencies.py --cache-dir "$PTXBENCH_CACHE_DIR" --json "$RUN_OUT/refs.json"
}

library() {  # library [--with-replay]: judge the library into $SOL_DIR, keep a copy of the envelopes
  local dir=${SOL_DIR:-/tmp/sol} rc
  # shellcheck disable=SC2086
  bash tools/run_solutions.sh "$dir" "$@" ${SOL_ARGS:-}
  rc=$?
  mkdir -p "$RUN_OUT/sol" && cp -r "$dir"/. "$RUN_OUT/sol/"
  return "$rc"
}
stage_solutions() { library; }
stage_replay() { library --with-replay; }

stage_table() {  # also keeps the envelopes it read (a timed-out solutions stage could not copy them)
  "$PYTHON" tools/solutions_table.py "${SOL_DIR:-/tmp/sol}" > "$RUN_OUT/table.md"
  local rc=$?
  [ -d "${SOL_DIR:-/tmp/sol}" ] && mkdir -p "$RUN_OUT/sol" && cp -r "${SOL_DIR:-/tmp/sol}"/. "$RUN_OUT/sol/"
  cat "$RUN_OUT/table.md"
  return "$rc"
}

stage_eval() {
  local spec kernel problem name rc=0
  mkdir -p "$RUN_OUT/eval"
  for spec in ${EVAL:-solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu solutions/mha_bwd_d128_causal/fa2_mma.cu
                     solutions/mha_bwd_d128/wgmma_tma_ws.cu solutions/mha_bwd_d128/fa2_mma.cu}; do
    kernel=${spec%@*}; problem=$(basename "$(dirname "$kernel")"); name=$(basename "$kernel" .cu)
    [ "$spec" != "$kernel" ] && problem=${spec##*@}
    echo "--- $problem $kernel $(date +%T)"
    ptxbench eval "$kernel" --problem "$problem" --json > "$RUN_OUT/eval/${problem}__${name}.json" \
      2> "$RUN_OUT/eval/${problem}__${name}.stderr" || rc=1
    "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d.get("performance") or {}; print(d["status"], d["reason"][:200], p.get("latency_ms"), p.get("speedup_factor"), d["target_instruction"]["status"])' \
      "$RUN_OUT/eval/${problem}__${name}.json" || tail -5 "$RUN_OUT/eval/${problem}__${name}.stderr"
  done
  return "$rc"
}

stage_batch() {  # BATCH: "FILE.cu@problem ..." (default: every solution kernel); BATCH_REPLAY=0 leaves out the
  # replay-turn kernels that follow; BATCH_FROM: envelopes of an earlier call (not judged again)
  local specs=() k
  if [ -n "${BATCH:-}" ]; then
    read -r -a specs <<< "$BATCH"
  else
    for k in solutions/*/*.cu; do specs+=("$k@$(basename "$(dirname "$k")")"); done
  fi
  if [ "${BATCH_REPLAY:-1}" = 1 ]; then
    "$PYTHON" tools/build_replay.py --export /tmp/replay_kernels > /dev/null || return 3
    for k in /tmp/replay_kernels/*/*.cu; do specs+=("$k@$(basename "$(dirname "$k")")"); done
  fi
  mkdir -p "$RUN_OUT/batch"
  [ -n "${BATCH_FROM:-}" ] && cp -r "$BATCH_FROM"/. "$RUN_OUT/batch/"
  "$PYTHON" benchmarks/device/judge_batch.py --out "$RUN_OUT/batch" \
    --deadline-s $((STAGE_TIMEOUT_S - SECONDS - 60)) "${specs[@]}"
}

stage_sandbox_check() {
  "$PYTHON" benchmarks/device/sandbox_gpu_check.py --out "$RUN_OUT"
}

stage_hostile() {
  PTXBENCH_HOSTILE_OUT=$RUN_OUT/hostile.jsonl \
    "$PYTHON" -m pytest tests/gpu/test_hostile_gpu.py -m gpu -p no:cacheprovider -q -rA -s \
    --junitxml="$RUN_OUT/hostile.xml"
}

stage_hostile_controls() {
  # the controls built first, in parallel (cached ones in a second): on 2026-12-02 unbuilt controls took 115 s more
  # of the stage, one at a time inside pytest, and its last two tests did not fit
  "$PYTHON" benchmarks/device/prebuild.py tests/fixtures/controls/*.cu || return
  local select=()
  [ -n "${HOSTILE_K:-}" ] && select=(-k "$HOSTILE_K")  # a subset of the run, in the same order
  PTXBENCH_HOSTILE_OUT=$RUN_OUT/hostile.jsonl PTXBENCH_CONTROLS_OUT=$RUN_OUT/controls.jsonl \
    PTXBENCH_TEST_CACHE=$PTXBENCH_CACHE_DIR "$PYTHON" -m pytest tests/gpu/test_hostile_gpu.py tests/gpu/test_controls.py \
    "${select[@]}" -m gpu -p no:cacheprovider -q -rA -s --junitxml="$RUN_OUT/hostile_controls.xml"
}

stage_meter() {
  # shellcheck disable=SC2086 # METER_ARGS is a list of arguments
  "$PYTHON" benchmarks/meter_audit.py --json "$RUN_OUT/meter_audit.json" ${METER_ARGS:-}
}

stage_latency() {
  need_service_packages || return
  # shellcheck disable=SC2086 # LATENCY_ARGS is a list of arguments
  "$PYTHON" benchmarks/judge_latency.py --gpus "$(gpu_list | cut -d, -f1)" --out "$RUN_OUT/judge_latency.json" ${LATENCY_ARGS:-}
}

stage_tool_phases() {
  # shellcheck disable=SC2086 # TOOL_PHASES_ARGS is a list of arguments
  "$PYTHON" benchmarks/tool_phases.py --json "$RUN_OUT/tool_phases.json" ${TOOL_PHASES_ARGS:-}
}

stage_build_time() {
  # the base configuration is this tree too (no git history on the device): the phases, and any --flags arms
  # shellcheck disable=SC2086 # BUILD_TIME_ARGS is a list of arguments
  "$PYTHON" benchmarks/build_time.py --base "$REPO" --json "$RUN_OUT/build_time.json" ${BUILD_TIME_ARGS:---variants 2 --nvcc-phases}
}

stage_audit_probe() {
  "$PYTHON" -m research.timing.audit_probe --out "$RUN_OUT/audit_probe.json"
}

stage_meter_probe() {
  # shellcheck disable=SC2086 # METER_PROBE_ARGS is split at spaces on purpose
  "$PYTHON" -m research.timing.meter_probe --out "$RUN_OUT" ${METER_PROBE_ARGS:-}
}

stage_decode_probe() {
  # shellcheck disable=SC2086 # DECODE_PROBE_ARGS is split at spaces on purpose
  "$PYTHON" -X faulthandler -m research.timing.decode_probe --out "$RUN_OUT" ${DECODE_PROBE_ARGS:-}
}

stage_sandbox_cost() {
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/judge_sandbox_cost.py ${SANDBOX_COST_ARGS:-} --json "$RUN_OUT/judge_sandbox_cost.json"
}

stage_packs() {
  "$PYTHON" -m pytest tests/knowledge_packs -m gpu -p no:cacheprovider -q -rA --junitxml="$RUN_OUT/packs.xml"
}

need_service_packages() {
  "$PYTHON" -c "import fastapi, uvicorn" 2>/dev/null && return 0
  echo "fastapi/uvicorn missing: carry .whl (filled here by benchmarks/device/fetch_service_wheels.sh)"
  return 3
}

stage_service_pytest() {
  need_service_packages || return
  # shellcheck disable=SC2086
  "$PYTHON" -m pytest -m gpu ${SERVICE_TESTS:-tests/gpu/service} -p no:cacheprovider -q -rA -s \
    --junitxml="$RUN_OUT/service_pytest.xml"
}

stage_throughput() {  # THROUGHPUT_ARGS replaces "--repeat 2 --candidates $MIX"
  local gpus scale=()
  need_service_packages || return
  gpus=$(gpu_list)
  [ "$gpus" != "${gpus%%,*}" ] && scale=(--scale-gpus "$gpus")
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/service_throughput.py --gpus "${gpus%%,*}" "${scale[@]}" \
    ${THROUGHPUT_ARGS:---repeat 2 --candidates $MIX} --out "$RUN_OUT/throughput.json"
}

stage_rollout() {  # ROLLOUT_ARGS replaces "--concurrency 4,16,48 --candidates GEMM causal-MHA-fwd"
  local gpus
  need_service_packages || return
  gpus=$(gpu_list)
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/rollout_concurrency.py --gpus "${gpus%%,*}" --budget-s $((STAGE_TIMEOUT_S - SECONDS - 60)) \
    ${ROLLOUT_ARGS:---concurrency 4,16,48 --candidates solutions/gemm_n7168_k5120/wgmma_tma_ws.cu
                     solutions/mha_with_lse_d128_causal/fa3_wgmma_tma.cu} --out "$RUN_OUT/rollout.json"
}

stage_env_steps() {  # ENV_STEPS_ARGS replaces "--concurrency 1,4,16 --window-s 60 --warmup-s 15"
  local gpus
  need_service_packages || return
  gpus=$(gpu_list)
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/env_steps.py --gpu "${gpus%%,*}" \
    ${ENV_STEPS_ARGS:---concurrency 1,4,16 --window-s 60 --warmup-s 15} --out "$RUN_OUT/env_steps.json"
}

campaign_site() {  # campaign_site MODE: put prefect, mlflow, duckdb, litellm on PYTHONPATH
  local site=/tmp/site2 d
  mkdir -p "$site" /tmp/parts
  for d in .carry/site_a .carry/site_b; do [ -d "$d" ] && cp -n "$d"/part.* /tmp/parts/ 2>/dev/null; done
  ls -la /tmp/parts > "$RUN_OUT/parts.txt"
  if [ -f .carry/comb/comb.tar.xz ]; then  # ONE pruned tarball with the judge's wheels (campaign_site.sh)
    xz -dc .carry/comb/comb.tar.xz | tar -x -C "$site" || return 3
    export PREFECT_UI_ENABLED=false
  elif [ "$1" = resume ]; then
    echo "resume needs .carry/comb/comb.tar.xz (benchmarks/device/campaign_site.sh)"; return 3
  elif ! PYTHONPATH=$PTXBENCH_SITE:$site "$PYTHON" -c "import prefect, mlflow, duckdb, litellm" 2>/dev/null; then
    cat /tmp/parts/part.00 /tmp/parts/part.01 | xz -dc | tar -x -C "$site" || { echo "site parts missing"; return 3; }
  fi
  export PYTHONPATH=$PTXBENCH_SITE:$site:$REPO
  "$PYTHON" -c "import prefect, mlflow, duckdb, litellm; print('prefect', prefect.__version__, 'mlflow', mlflow.__version__, 'duckdb', duckdb.__version__)"
}

stop_profiler() {  # stop_profiler PID: the service started by this stage (its own session), and its workers
  kill -INT -- "-$1" 2>/dev/null || kill -INT "$1" 2>/dev/null || return 0
  local _
  for _ in $(seq 30); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done
  kill -KILL -- "-$1" 2>/dev/null
}

campaign_run() {  # campaign_run campaign|resume
  local id=${CAMPAIGN_ID:-demo-h200x2} port=${PROFILER_PORT:-8765} pid t0 db rc server
  campaign_site "$1" || return 3
  if [ "$1" = resume ] && [ -d .carry/runs_h200/runs ]; then cp -rn .carry/runs_h200/runs . 2>/dev/null; fi
  server=http://127.0.0.1:$port
  setsid ptxbench profiler serve --gpus "$(gpu_list)" --port "$port" --work-dir /tmp/prof --log-level warning \
    > "$RUN_OUT/profiler.log" 2>&1 < /dev/null &
  pid=$!
  # shellcheck disable=SC2064 # this pid, now
  trap "stop_profiler $pid" EXIT
  # shellcheck disable=SC2064
  trap "stop_profiler $pid; exit 143" TERM INT
  t0=$(date +%s)
  until ptxbench profiler health --server "$server" --json 2>/dev/null | grep -q '"ok"'; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "the profiling service exited:"; tail -20 "$RUN_OUT/profiler.log"; return 3; fi
    if (( $(date +%s) - t0 > 240 )); then echo "the profiling service was not healthy within 240 s"; return 3; fi
    sleep 1
  done
  sed -e "s/gpu_slots: {hopper: 1}/gpu_slots: {hopper: ${CAMPAIGN_SLOTS:-2}}/" -e 's/compile: 2/compile: 8/' \
    campaigns/demo.yaml > "campaigns/$id.yaml"
  t0=$(date +%s)
  timeout $((STAGE_TIMEOUT_S - SECONDS - 40)) ptxbench campaign run "campaigns/$id.yaml" --campaign-id "$id" --profiler "$server"
  rc=$?
  echo "campaign wall time: $(( $(date +%s) - t0 )) s"
  ptxbench profiler health --server "$server" > "$RUN_OUT/profiler_health.txt" 2>&1
  db=runs/$id/warehouse.duckdb
  ptxbench report build "$id" --db "$db" --out "reports/$id" > "$RUN_OUT/report.log" 2>&1
  COLUMNS=200 ptxbench sql --db "$db" --max-rows 100 "SELECT t.problem, t.turn, t.status, t.target_instruction AS target,
    round(e.latency_ms, 3) AS ms, round(e.reference_latency_ms, 3) AS ref_ms, round(t.speedup, 3) AS speedup,
    round(e.total_stage_s, 1) AS judge_s FROM turns t LEFT JOIN evaluations e
    USING (campaign_id, trajectory_id, turn) ORDER BY t.problem, t.turn" > "$RUN_OUT/turns.txt" 2>&1
  cat "$RUN_OUT/turns.txt"
  tar czf "$RUN_OUT/campaign_runs.tgz" runs reports mlruns 2>/dev/null  # mlruns: MLflow vs the warehouse, here
  return "$rc"
}
stage_campaign() { campaign_run campaign; }
stage_resume() { campaign_run resume; }

stage_bwd_precision() {
  # shellcheck disable=SC2086
  "$PYTHON" -m research.precision.bwd_h200 ${BWD_ARGS:-}
}

stage_diag() {
  "$PYTHON" -m research.precision.diagnose_mha_bwd "${DIAG_KERNEL:-solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu}" \
    --problem "${DIAG_PROBLEM:-mha_bwd_d128_causal}"
}

stage_ncu_phases() {
  # shellcheck disable=SC2086 # NCU_PHASES_ARGS is a list of arguments
  "$PYTHON" -m research.timing.ncu_phases --out "$RUN_OUT/ncu_phases.json" ${NCU_PHASES_ARGS:-}
}

stage_bwd_profile() {  # PROFILE_KERNELS: "FILE.cu@problem ..."; each into $RUN_OUT/bwd_profile/<problem>
  local item rc=0
  for item in ${PROFILE_KERNELS:-solutions/mha_bwd_d128/wgmma_tma_ws.cu@mha_bwd_d128 solutions/mha_bwd_d128_causal/wgmma_tma_ws.cu@mha_bwd_d128_causal}; do
    "$PYTHON" -m research.kernels.mha_bwd.profile_ncu --kernel "${item%@*}" --problem "${item#*@}" \
      --out "$RUN_OUT/bwd_profile/${item#*@}" || rc=1
  done
  return "$rc"
}

# ---------------------------------------------------------------------------------------------- driver
stage_names() { awk 'NF {print $1}' <<< "$STAGE_TABLE"; }
stage_default_timeout() { awk -v s="$1" '$1 == s {print $2}' <<< "$STAGE_TABLE"; }

usage() {
  sed -n '3,/^set -uo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'
  echo "Stages (default timeout in seconds):"
  sed '/^$/d; s/^/  /' <<< "$STAGE_TABLE"
}

now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN {print b - a}'; }

record() {  # record NAME RC SECONDS [NOTE]
  local note=${4:-}
  [ "$2" = 124 ] && note="timed out${note:+; $note}"
  printf '%-15s rc=%-4s %7.1f s%s\n' "$1" "$2" "$3" "${note:+  ($note)}" | tee -a "$OUT/summary.txt" >> "$SUMMARY_LINES"
  [ "$2" = 0 ] || FAILED=1
}

run_stage() {  # run_stage NAME: its function in a child bash, under its timeout, output teed to its log
  local name=$1 var limit left t0 rc
  var=$(tr 'a-z-' 'A-Z_' <<< "$name")_TIMEOUT
  limit=${!var:-$(stage_default_timeout "$name")}
  left=$(( BUDGET_S - SECONDS - 20 ))  # 20 s kept for the tarball
  echo "=== $name $(date +%T)"
  if (( left < 5 )); then
    echo "skipped: the call's budget (BUDGET_S=$BUDGET_S) is spent"
    record "$name" skip 0 "no time left in BUDGET_S"
    return
  fi
  (( left < limit )) && limit=$left
  t0=$(now)
  CURRENT=$name CURRENT_T0=$t0
  # in the background, so that a signal to run.sh is handled at once (interrupted) rather than after the stage
  STAGE_TIMEOUT_S=$limit timeout -k 10 "$limit" bash "$SELF" __stage "$name" > >(tee "$RUN_OUT/$name.log") 2>&1 &
  STAGE_PID=$!
  wait "$STAGE_PID"
  rc=$?
  wait  # the tee of the log
  STAGE_PID=
  record "$name" "$rc" "$(elapsed "$t0")" "log outputs/$name.log"
}

interrupted() {  # run.sh got TERM or INT (the device call's limit): stop the stage, keep what there is
  echo "run.sh: interrupted"
  if [ -n "${STAGE_PID:-}" ]; then
    kill -TERM "$STAGE_PID" 2>/dev/null
    wait "$STAGE_PID"
    record "$CURRENT" 143 "$(elapsed "$CURRENT_T0")" "interrupted; log outputs/$CURRENT.log"
  fi
  FAILED=1
  finish
}

outputs() {  # everything but summary.txt into ONE tarball (parts of 15 MiB when larger)
  local t0 rc size note
  t0=$(now)
  if [ -d "${PTXBENCH_CACHE_DIR:-/nonexistent}/ncu-logs" ]; then
    cat "$PTXBENCH_CACHE_DIR"/ncu-logs/*.txt 2>/dev/null | head -c 400000 > "$RUN_OUT/ncu_raw.txt"
  fi
  rm -f "$OUT"/outputs.tgz "$OUT"/outputs.tgz.part-*
  tar -czf "$OUT/outputs.tgz" -C "$OUT" outputs
  rc=$?
  if [ "$rc" = 0 ]; then
    rm -rf "$RUN_OUT"
    size=$(wc -c < "$OUT/outputs.tgz")
    note="outputs.tgz, $(( size / 1024 )) KiB"
    if (( size > ${OUTPUTS_PART_BYTES:=15728640} )); then  # the device tool returns files of 16 MiB at most
      split -b "$OUTPUTS_PART_BYTES" -d -a 2 "$OUT/outputs.tgz" "$OUT/outputs.tgz.part-" && rm -f "$OUT/outputs.tgz"
      note="$note, split: cat outputs.tgz.part-* > outputs.tgz"
    fi
  fi
  record outputs "$rc" "$(elapsed "$t0")" "$note"
}

finish() {
  trap - TERM INT
  outputs
  echo "=== summary $(date +%T)"
  cat "$SUMMARY_LINES"
  rm -f "$SUMMARY_LINES"
  exit "$FAILED"
}

main() {
  case ${1:-} in
    -h|--help) usage; exit 0 ;;
    "") echo "run.sh: name at least one stage (bash benchmarks/device/run.sh --help)" >&2; exit 2 ;;
    --list) stage_names; exit 0 ;;
  esac
  local name
  for name in "$@"; do
    stage_names | grep -qx -- "$name" || {
      echo "run.sh: unknown stage '$name' (stages: $(stage_names | paste -sd' ' -))" >&2; exit 2; }
  done
  export OUT=${OUT:-/tmp/ptxbench-out} BUDGET_S=${BUDGET_S:-575}
  export RUN_OUT=$OUT/outputs
  if ! { mkdir -p "$OUT" && rm -rf "$RUN_OUT" && mkdir -p "$RUN_OUT"; }; then
    echo "run.sh: cannot write OUT=$OUT" >&2; exit 2
  fi
  FAILED=0
  SUMMARY_LINES=$(mktemp)
  echo "# bash benchmarks/device/run.sh $* ($(date -u '+%F %T') UTC, $(hostname))" > "$OUT/summary.txt"
  STAGE_PID=
  trap interrupted TERM INT
  local t0
  t0=$(now)
  # shellcheck source=benchmarks/device/preamble.sh
  PIP_LOG=$RUN_OUT/pip.log . "$REPO/benchmarks/device/preamble.sh"
  local rc=$?
  record preamble "$rc" "$(elapsed "$t0")" "log outputs/pip.log"
  if [ "$rc" != 0 ]; then FAILED=3; finish; fi
  for name in "$@"; do run_stage "$name"; done
  finish
}

if [ "${1:-}" = __stage ]; then  # the child of run_stage: the environment came with it
  "stage_$(tr '-' '_' <<< "$2")"
  exit $?
fi
main "$@"
