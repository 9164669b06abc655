# shellcheck shell=bash
# Sourced, never run: the environment every GPU-host batch starts from (benchmarks/device/run.sh sources it).
#
#   . benchmarks/device/preamble.sh || exit 3
#
# - installs the wheels of $JUDGE_WHEELS (default .carry/judge_whl) and of each folder in $WHEELS (default
#   .whl; space-separated; WHEELS= installs none) into $PTXBENCH_SITE (default /tmp/site) with
#   pip --target --no-index --no-deps, one folder after the other (a later folder's version wins); a missing
#   or empty folder is skipped; pip's output goes to $PIP_LOG (default $OUT/pip.log);
# - exports PYTHONPATH=$PTXBENCH_SITE:<repo>, PYTHONUNBUFFERED=1, PTXBENCH_CACHE_DIR (default /tmp/pcache),
#   PATH with $PTXBENCH_BIN (default /tmp/bin, holding a `ptxbench` shim that runs flows.cli.main of this
#   checkout) and /usr/local/cuda/bin, and NVLink multicast off (NCCL_NVLS_ENABLE=0,
#   TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1: KINDS.md of the device tool says why);
# - puts the carried bubblewrap (.carry/bwrap, from benchmarks/device/fetch_bwrap.sh) where the sandbox's
#   user can reach it (/opt/ptxbench-bwrap) and exports PTXBENCH_BWRAP: every nvcc, candidate child,
#   memcheck and ncu run is sandboxed and refuses to run without it;
# - creates $OUT (default /tmp/ptxbench-out).
# Returns 1 (after printing pip's log) when an install fails. $PYTHON (default python3) is the interpreter.

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  echo "preamble.sh is sourced: . benchmarks/device/preamble.sh" >&2
  exit 2
fi

ptxbench_preamble() {
  local repo dir wheels
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  export OUT=${OUT:-/tmp/ptxbench-out}
  export PYTHON=${PYTHON:-python3}
  export PTXBENCH_SITE=${PTXBENCH_SITE:-/tmp/site}
  export PTXBENCH_BIN=${PTXBENCH_BIN:-/tmp/bin}
  local log=${PIP_LOG:-$OUT/pip.log}
  mkdir -p "$OUT" "$PTXBENCH_SITE" "$PTXBENCH_BIN" "$(dirname "$log")" || return 1
  : > "$log"
  for dir in "${JUDGE_WHEELS-.carry/judge_whl}" ${WHEELS-.whl}; do
    [ -n "$dir" ] || continue
    case $dir in /*) ;; *) dir=$repo/$dir ;; esac
    wheels=("$dir"/*.whl)
    [ -e "${wheels[0]}" ] || continue
    echo "installing ${#wheels[@]} wheels of $dir into $PTXBENCH_SITE" >> "$log"
    if ! "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$PTXBENCH_SITE" "${wheels[@]}" >> "$log" 2>&1; then
      cat "$log" >&2
      echo "preamble: installing the wheels of $dir failed (log above, also in $log)" >&2
      return 1
    fi
  done
  export PYTHONPATH=$PTXBENCH_SITE:$repo PYTHONUNBUFFERED=1
  export PTXBENCH_CACHE_DIR=${PTXBENCH_CACHE_DIR:-/tmp/pcache}
  export PATH=$PTXBENCH_BIN:/usr/local/cuda/bin:$PATH
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  if [ -x "$repo/.carry/bwrap/bwrap" ] && [ -z "${PTXBENCH_BWRAP:-}" ]; then
    rm -rf /opt/ptxbench-bwrap && cp -r "$repo/.carry/bwrap" /opt/ptxbench-bwrap \
      && chmod -R a+rX /opt/ptxbench-bwrap && export PTXBENCH_BWRAP=/opt/ptxbench-bwrap/bwrap
  fi
  local python_path
  python_path=$(command -v "$PYTHON") || { echo "preamble: no interpreter '$PYTHON'" >&2; return 1; }
  printf '#!/bin/sh\nexec %q -c "import sys; sys.argv[0] = \\"ptxbench\\"; from flows.cli.main import app; app()" "$@"\n' \
    "$python_path" > "$PTXBENCH_BIN/ptxbench" && chmod +x "$PTXBENCH_BIN/ptxbench"
}

ptxbench_preamble
