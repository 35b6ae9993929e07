#!/bin/bash
# Serving figures on a lent H200 (run from the repository root on the device machine).
# Carries: .whl/ (inferx wheel + iree-base-runtime cp312 wheel), .h200/{cnn,encoder}.{onnx,ixa} and
# .h200/t/trivial.ixa built here for --target h200 --batch-sizes 1,2,4,8,16,32,64.
set -e
pip install -q --no-deps --target /tmp/site .whl/*.whl 2>&1 | grep -v "running pip as" || true
export PYTHONPATH=/tmp/site
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/depth1"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
# results through the reused output buffers (@main$into) against onnxruntime
python3 tools/h200/check_artifacts.py .h200 --batches 1,7,64 --rounds 5 --out "$OUT/check.json" | tail -8
python3 tools/serving_figures.py .h200/cnn.ixa .h200/encoder.ixa --device cuda --trivial .h200/t/trivial.ixa \
  --duration ${DURATION:-3} --processes ${PROCESSES:-1,2,4,8} --out "$OUT" 2>&1 | tee "$OUT/log.txt" | grep -v "^    rate"
