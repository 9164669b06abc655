#!/usr/bin/env bash
# Run HERE (not on the GPU host): pack what a campaign needs on the GPU image (Python 3.12, no network;
# it lacks prefect, mlflow, duckdb, litellm and the judge's wheels) into ONE xz tarball that fits a device
# call's 64 MiB carry beside the working tree:
#
#   bash benchmarks/device/campaign_site.sh            # -> .carry/comb/comb.tar.xz (about 57 MB)
#   GPUS=0 bash benchmarks/device/run.sh resume        # on the device, carry [".carry/comb", ...]
#
# Steps: resolve the py3.12 manylinux closure of the pinned campaign packages; drop what the GPU image
# already holds (KINDS.md's package list); install the rest with --target; prune what a campaign never
# imports (AWS SDK, docker, git, apprise, the Prefect and LiteLLM web UIs, type stubs), strip native
# libraries; add the judge's wheels (.whl/); tar + xz -9. Checked on 2026-11-29 with Python 3.12 here
# (import + the demo campaign against a --fake profiling service) and on the H200 (the demo campaign).
# On the device set PREFECT_UI_ENABLED=false (the UI assets are pruned).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
WORK=${WORK:-/tmp/ptxbench-campaign-site}
PLATFORMS=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux1_x86_64)
PINS=(prefect==3.9.1 mlflow-skinny==3.17.2 duckdb==2.0.1 litellm==1.110.2 sqlalchemy==2.1.9 alembic==1.20.1)
# On the GPU image already (KINDS.md, "Python packages already there"); cachetools is NOT there.
IMAGE="aiohttp aiosignal anyio attrs certifi charset-normalizer click cloudpickle frozenlist fsspec h11 httpcore
httpx idna jinja2 markupsafe markdown-it-py mdurl multidict numpy packaging pandas propcache protobuf psutil pyarrow
pygments python-dateutil pyyaml regex requests rich shellingham six tiktoken tokenizers typer typing-extensions
urllib3 uvloop werkzeug yarl zipp huggingface-hub filelock hf-xet tqdm aiohappyeyeballs colorama prometheus-client
grpcio humanize markdown pluggy"
PRUNE="boto3 boto3-* botocore botocore-* s3transfer s3transfer-* docker docker-* git gitpython-* apprise apprise-*
prefect/server/ui prefect/server/ui-v2 litellm/proxy/_experimental litellm/proxy/swagger/*.js
litellm/proxy/swagger/*.css litellm/litellm_core_utils/tokenizers/deepseek_tokenizer.json litellm-*.dist-info/sboms"

rm -rf "$WORK" && mkdir -p "$WORK/whl" "$WORK/site"
"$PY" -m pip install -q --dry-run --ignore-installed --report "$WORK/report.json" "${PLATFORMS[@]}" \
  --target "$WORK/x" "${PINS[@]}"
IMAGE="$IMAGE" "$PY" - "$WORK/report.json" > "$WORK/specs.txt" <<'EOF'
import json, os, sys
have = set(os.environ["IMAGE"].split())
for item in json.load(open(sys.argv[1]))["install"]:
    name = item["metadata"]["name"].lower().replace("_", "-")
    if name not in have:
        print(f"{name}=={item['metadata']['version']}")
EOF
"$PY" -m pip download -q --no-deps "${PLATFORMS[@]}" -d "$WORK/whl" -r "$WORK/specs.txt"
"$PY" -m pip install -q --no-deps --no-compile "${PLATFORMS[@]}" --target "$WORK/site" "$WORK"/whl/*.whl
[ -d .whl ] && "$PY" -m pip install -q --no-deps --no-compile "${PLATFORMS[@]}" --target "$WORK/judge" .whl/*.whl
(cd "$WORK/site" && for p in $PRUNE; do rm -rf $p; done)
find "$WORK/site" -name "*.pyi" -delete
find "$WORK/site" -name "__pycache__" -prune -exec rm -rf {} +
find "$WORK/site" -name "*.so" -exec strip --strip-unneeded {} \; 2>/dev/null || true
if [ -d "$WORK/judge" ]; then
  for e in "$WORK"/judge/*; do [ -e "$WORK/site/$(basename "$e")" ] || cp -a "$e" "$WORK/site/"; done
fi
mkdir -p .carry/comb
tar -C "$WORK/site" -cf - . | xz -9 -T0 > .carry/comb/comb.tar.xz
ls -la .carry/comb/comb.tar.xz
