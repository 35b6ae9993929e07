#!/bin/bash
# Serving figures on a lent H200 (run from the repository root on the device machine).
# Carries: .whl/ (inferx wheel + iree-base-runtime cp312 wheel), .h200/{cnn,encoder}.ixa and
# .h200/t/trivial.ixa built here for --target h200 --batch-sizes 1,2,4,8,16,32,64.
set -e
pip install -q --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/depth1" "$OUT/depth2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 tools/serving_figures.py .h200/cnn.ixa .h200/encoder.ixa --device cuda --trivial .h200/t/trivial.ixa \
  --duration ${DURATION:-3} --out "$OUT/depth2" 2>&1 | tee "$OUT/depth2/log.txt"
ROOT=$PWD
for a in cnn encoder; do  # from /tmp: the checkout's inferx_compiler/ would shadow the installed one
  (cd /tmp && python3 -m inferx_compiler.cli.bench $ROOT/.h200/$a.ixa --device cuda --concurrency 128 --duration 3 \
    --pipeline-depth 1 --json) > "$OUT/depth1/$a.json"
  python3 -c "import json; r=json.load(open('$OUT/depth1/$a.json')); print('$a depth1', {k: r[k] for k in ('throughput_rps','p50_ms','p99_ms','mean_batch','median_batch_exec_ms')})"
done
