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
ROOT=$PWD
for a in cnn encoder; do  # one process, one batch in flight (from /tmp: the checkout would shadow the package)
  (cd /tmp && python3 -m inferx_compiler.cli.bench $ROOT/.h200/$a.ixa --device cuda --concurrency 128 --duration 3 \
    --pipeline-depth 1 --json) > "$OUT/depth1/$a.json"
  python3 -c "import json; r=json.load(open('$OUT/depth1/$a.json')); print('$a depth1', {k: round(r[k], 2) for k in ('throughput_rps','p50_ms','p99_ms','mean_batch','median_batch_exec_ms')})"
done
