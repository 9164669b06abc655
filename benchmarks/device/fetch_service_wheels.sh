#!/usr/bin/env bash
# Run HERE (not on the GPU host): put the wheels the profiling service needs on the GPU image
# (Python 3.12, no network) into .whl/, beside the judge's. Skips a package already present there.
# FastAPI 0.150 imports opentelemetry-api at import time, hence the last two.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl
PY=${PYTHON:-.venv/bin/python}
for spec in fastapi==0.150.0 starlette==1.10.0 uvicorn==0.54.0 typing-inspection==0.4.5 \
            opentelemetry-api==1.45.2 importlib-metadata==8.9.0; do
  name=${spec%%==*}; stem=${name//-/_}
  if ls .whl/"${stem}"-*.whl >/dev/null 2>&1; then echo "have ${name}"; continue; fi
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$spec"
  echo "fetched ${spec}"
done
