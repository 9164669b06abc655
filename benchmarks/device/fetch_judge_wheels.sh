#!/usr/bin/env bash
# Run HERE (not on the GPU host): put the judge's own wheels for the GPU image (Python 3.12, no network) into
# .carry/judge_whl/. The image has torch, cupy, numpy, pyyaml, typer, rich, cuda-bindings and nvidia-cuda-cupti
# 13.0; the judge adds pydantic (and its parts), tvm_ffi, pyelftools, and cupti-python >= 13.3 with
# cuda-pathfinder (the device meter uses cupti.pm_sampling; cupti-python 13.3 runs over the image's libcupti 13.0,
# see ptxcore/gpu/harness/meter.py). Carry it: run(carry=[".carry/judge_whl", ".carry/bwrap"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry/judge_whl
mkdir -p "$out"
PY=${PYTHON:-.venv/bin/python}
for spec in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
            typing-extensions==4.16.0 apache-tvm-ffi==0.1.15.post2 pyelftools==0.33 cupti-python==13.3.1 \
            cuda-pathfinder==1.9.1; do
  name=${spec%%==*}; stem=${name//-/_}
  if ls "$out/${stem}"-*.whl >/dev/null 2>&1; then echo "have ${name}"; continue; fi
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$out" "$spec"
  echo "fetched ${spec}"
done
du -sh "$out"
