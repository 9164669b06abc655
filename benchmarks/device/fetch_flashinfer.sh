#!/usr/bin/env bash
# Run HERE (not on the GPU host): bring FlashInfer onto the GPU image (Python 3.12, torch 2.11 + CUDA 13,
# no network) as wheels under .carry/flashinfer/, split into stages that each fit one device call.
#
#   bash benchmarks/device/fetch_flashinfer.sh            # default FLASHINFER_VERSION=0.7.2.post1
#
# What `import flashinfer` and its prefill / decode wrappers need beyond the image (KINDS.md, "Python
# packages already there"): only flashinfer-python itself and apache-tvm-ffi (<0.2, >=0.1.11; already
# carried in .carry/judge_whl). Checked by importing the wheel here with --no-deps next to the image's
# packages: click, einops, ninja, numpy, nvidia-ml-py, packaging, requests, tabulate, torch, tqdm are on
# the image; cuda-python, cuda-tile, nccl-extensions, nccl4py, nvidia-cudnn-frontend and
# nvidia-cutlass-dsl are imported lazily by kernels we do not use (cuDNN / CuTe-DSL / NCCL backends),
# so they are not carried (the warm script reports any import they would have served).
#
# The wheel is ~59 MiB: with the repository (~4 MiB) and the judge wheels (~7 MiB) it exceeds the
# 64 MiB a device call may carry, so it is split into STAGE_MIB parts, one per stage folder:
#   .carry/flashinfer/stage1/flashinfer.whl.part-aa, .carry/flashinfer/stage2/...part-ab, ...
#   .carry/flashinfer/stage*/MANIFEST (wheel file name, sha256, part names)
# benchmarks/device/install_flashinfer.sh reassembles them on the device under /tmp (see there).
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=${FLASHINFER_VERSION:-0.7.2.post1}
STAGE_MIB=${STAGE_MIB:-40}
PY=${PYTHON:-/work/main/.venv/bin/python}
[ -x "$PY" ] || PY=python3
DEST=.carry/flashinfer
grep -qx '/.carry/' .gitignore 2>/dev/null || grep -qx '/.carry/' .git/info/exclude 2>/dev/null \
  || echo '/.carry/' >> "$(git rev-parse --git-path info/exclude)"
mkdir -p "$DEST/download"
WHEEL=$(ls "$DEST"/download/flashinfer_python-"$VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHEEL" ]; then
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$DEST/download" "flashinfer-python==$VERSION"
  WHEEL=$(ls "$DEST"/download/flashinfer_python-"$VERSION"-*.whl | head -1)
fi
echo "wheel: $WHEEL ($(du -m "$WHEEL" | cut -f1) MiB)"
# Requirements the wheel declares (extras skipped), for the record.
unzip -p "$WHEEL" '*.dist-info/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' | sed 's/^/  /'

rm -rf "$DEST"/stage* "$DEST/parts"
mkdir -p "$DEST/parts"
split -b "${STAGE_MIB}M" -d -a 2 "$WHEEL" "$DEST/parts/flashinfer.whl.part-"
SUM=$(sha256sum "$WHEEL" | cut -d' ' -f1)
PARTS=$(cd "$DEST/parts" && ls)
n=0
for part in $PARTS; do
  n=$((n + 1))
  mkdir -p "$DEST/stage$n"
  mv "$DEST/parts/$part" "$DEST/stage$n/"
done
rmdir "$DEST/parts"
for d in "$DEST"/stage*; do
  { echo "wheel $(basename "$WHEEL")"; echo "sha256 $SUM"; echo "stages $n"; for p in $PARTS; do echo "part $p"; done; } > "$d/MANIFEST"
done
du -sh "$DEST"/stage*
echo "device calls: one per stage, in order, each with carry [.carry/judge_whl, $DEST/stageN]:"
for i in $(seq 1 "$n"); do echo "  bash benchmarks/device/install_flashinfer.sh $DEST/stage$i"; done
echo "then: python3 benchmarks/device/flashinfer_warm.py (after the last stage, same warm machine)"
