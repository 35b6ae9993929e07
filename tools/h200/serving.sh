#!/bin/bash
# Serving figures on a lent H200 (run from the repository root on the device machine).
# Carries: .whl/ (inferx wheel + iree-base-runtime cp312 wheel), .h200/{cnn,encoder}.{onnx,ixa} and
# .h200/t/trivial.ixa built here for --target h200 --batch-sizes 1,2,4,8,16,32,64.
# Parts, each on unless set to 0: CHECK (results vs onnxruntime), FIGURES (tools/serving_figures.py
# with PROCESSES=1,2,4,8 and LOAD_STEPS clients per process as multiples of the max batch), HTTP (inferx-serve + tools/http_load.py for MODELS, with WORKERS server
# processes, HTTP_CONCURRENCY clients in HTTP_PROCS processes). Results under $OUT.
#   CHECK=0 HTTP=0 PROCESSES=1,4,12 MODELS=cnn bash tools/h200/serving.sh    (docs/serving/h200/cnn/)
#   CHECK=0 HTTP=0 PROCESSES=1,4,12 MODELS=encoder bash tools/h200/serving.sh (docs/serving/h200/encoder/)
#   FIGURES=0 CHECK=0 WORKERS=6 HTTP_CONCURRENCY=192 bash tools/h200/serving.sh   (docs/serving/http/)
set -e
pip install -q --no-deps --target /tmp/site .whl/*.whl 2>&1 | grep -v "running pip as" || true
export PYTHONPATH=/tmp/site
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/depth1"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
# results through the reused output buffers (@main$into) against onnxruntime
[ "${CHECK:-1}" = 1 ] && python3 tools/h200/check_artifacts.py .h200 --batches 1,7,64 --rounds 5 --out "$OUT/check.json" | tail -8
[ "${FIGURES:-1}" = 1 ] && python3 tools/serving_figures.py $(for a in ${MODELS:-cnn encoder}; do echo .h200/$a.ixa; done) \
  --device cuda --trivial .h200/t/trivial.ixa --duration ${DURATION:-3} --processes ${PROCESSES:-1,2,4,8} \
  --load-steps ${LOAD_STEPS:-0.5,1,1.5,2} --out "$OUT" 2>&1 | tee "$OUT/log.txt" | grep -v "^    rate"
# HTTP: inferx-serve on the GPU, closed-loop clients in 8 processes (binary tensors), batching on / off
ROOT=$PWD
serve() {  # artifact port extra-args...; from /tmp: the checkout's inferx_compiler/ would shadow the package
  (cd /tmp && exec python3 -c "import sys; sys.path.pop(0); from inferx_compiler.cli.serve import main; sys.exit(main())" \
    "$ROOT/${ARTIFACTS:-.h200}/$1.ixa" --device ${DEVICE:-cuda} --port "$2" --workers ${WORKERS:-1} "${@:3}") \
    > "$OUT/serve_$2.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 60); do grep -q serving "$OUT/serve_$2.log" && return; sleep 1; done
}
[ "${HTTP:-1}" = 1 ] && for a in ${MODELS:-cnn encoder}; do
  for mode in batching no-batching; do
    port=$((8200 + RANDOM % 700))
    if [ $mode = batching ]; then serve $a $port; else serve $a $port --no-batching; fi
    python3 tools/http_load.py http://127.0.0.1:$port $a --concurrency ${HTTP_CONCURRENCY:-64} --duration 5 \
      --procs ${HTTP_PROCS:-8} | tee "$OUT/http_${a}_${mode}_w${WORKERS:-1}.json"
    kill $SERVER_PID; wait $SERVER_PID || true
  done
done
