#!/usr/bin/env bash
# Judge every kernel of the solution library on this host's GPU with `ptxbench eval --json`.
#
#   tools/run_solutions.sh OUT_DIR [--with-replay] [--server URL] [--resume]
#
# Writes OUT_DIR/<problem>__<kernel>.json (one JudgeResult envelope each) and, with --with-replay, every
# turn of the replay/demo trajectories as OUT_DIR/replay__<problem>__turn<i>_<EXPECTED>.json (the kernels
# are exported to OUT_DIR/replay_kernels/). A non-PASSED verdict is a result, not a failure: the loop
# goes on; exit codes are kept in OUT_DIR/exit_codes.tsv. Each envelope is written whole or not at all (an eval cut
# off by a time limit leaves only its .part file); --resume skips every kernel whose envelope is already there, so
# a second call on the same machine goes on where a cut-off one stopped. Then build the README table with
#   python tools/solutions_table.py OUT_DIR --readme solutions/README.md
set -uo pipefail

usage() { echo "usage: $0 OUT_DIR [--with-replay] [--server URL] [--resume]" >&2; exit 2; }
[ $# -ge 1 ] || usage
OUT=$1; shift
WITH_REPLAY=0
RESUME=0
SERVER_ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --with-replay) WITH_REPLAY=1 ;;
    --resume) RESUME=1 ;;
    --server) [ $# -ge 2 ] || usage; SERVER_ARGS=(--server "$2"); shift ;;
    *) usage ;;
  esac
  shift
done

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
SOLUTIONS=$REPO/solutions
mkdir -p "$OUT"
[ "$RESUME" = 1 ] || : > "$OUT/exit_codes.tsv"

judge() {  # judge KERNEL PROBLEM OUTPUT_JSON
  local kernel=$1 problem=$2 out=$3 rc
  if [ "$RESUME" = 1 ] && [ -s "$out" ]; then
    printf '%-70s already judged\n' "$problem ${kernel#"$REPO"/}"
    return 0
  fi
  printf '%-70s ' "$problem ${kernel#"$REPO"/}"
  ptxbench eval "$kernel" --problem "$problem" --arch hopper --json "${SERVER_ARGS[@]}" > "$out.part" \
    2> "${out%.json}.stderr"
  rc=$?
  mv -f "$out.part" "$out"
  printf '%s\t%s\t%s\n' "$problem" "${kernel#"$REPO"/}" "$rc" >> "$OUT/exit_codes.tsv"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d.get("performance") or {}; t=d["target_instruction"];
print(d["status"], "%.4f ms" % p["latency_ms"] if p else "", "x%.3f" % p["speedup_factor"] if p else "", "target=" + t["status"])' \
    "$out" 2>/dev/null || echo "no JSON envelope (exit $rc, see ${out%.json}.stderr)"
}

for kernel in "$SOLUTIONS"/*/*.cu; do
  problem=$(basename "$(dirname "$kernel")")
  name=$(basename "$kernel" .cu)
  judge "$kernel" "$problem" "$OUT/${problem}__${name}.json"
done

if [ "$WITH_REPLAY" = 1 ]; then
  python3 "$HERE/build_replay.py" --export "$OUT/replay_kernels" || exit 1
  for kernel in "$OUT"/replay_kernels/*/*.cu; do
    problem=$(basename "$(dirname "$kernel")")
    name=$(basename "$kernel" .cu)
    judge "$kernel" "$problem" "$OUT/replay__${problem}__${name}.json"
  done
fi
echo "results in $OUT; table: python tools/solutions_table.py $OUT --readme solutions/README.md"
