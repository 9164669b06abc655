#!/usr/bin/env bash
# On the GPU host: one stage of the staged FlashInfer install (parts made by fetch_flashinfer.sh).
#
#   bash benchmarks/device/install_flashinfer.sh .carry/flashinfer/stageN     (carry: that folder)
#
# Copies the stage's parts to /tmp/flashinfer-parts (kept while the machine stays warm). Once every
# part named in the MANIFEST is there, it reassembles the wheel, checks its sha256 and installs it with
# --no-deps into /tmp/site (beside the judge wheels); prints what is still missing otherwise.
# Exit 0: stage stored (and, on the last one, installed); 1: bad stage folder or checksum mismatch.
set -euo pipefail
STAGE=${1:?usage: $0 STAGE_DIR}
PARTS=/tmp/flashinfer-parts
SITE=${SITE:-/tmp/site}
[ -f "$STAGE/MANIFEST" ] || { echo "error: $STAGE/MANIFEST not found (run fetch_flashinfer.sh here first)" >&2; exit 1; }
mkdir -p "$PARTS"
cp "$STAGE"/flashinfer.whl.part-* "$PARTS"/
WHEEL=$(awk '$1 == "wheel" {print $2}' "$STAGE/MANIFEST")
SUM=$(awk '$1 == "sha256" {print $2}' "$STAGE/MANIFEST")
missing=$(awk '$1 == "part" {print $2}' "$STAGE/MANIFEST" | while read -r p; do [ -f "$PARTS/$p" ] || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "stored $(ls "$STAGE" | grep -c part-) part(s); still missing: $(echo "$missing" | tr '\n' ' ')(next stage)"
  exit 0
fi
cat $(awk '$1 == "part" {print "'"$PARTS"'/" $2}' "$STAGE/MANIFEST") > "/tmp/$WHEEL"
echo "$SUM  /tmp/$WHEEL" | sha256sum -c --quiet || { echo "error: reassembled $WHEEL fails its sha256" >&2; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "/tmp/$WHEEL"
PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} python3 -c "import flashinfer; print('installed flashinfer', flashinfer.__version__, 'in $SITE')"
