#!/bin/bash
# Time CPU artifacts against onnxruntime on the lent GPU machine's host CPU (an Intel Xeon with
# AVX-512 and AMX: the device tool's nvidia-h200), interleaved, through tools/bench/knobs.py.
# That machine has no IREE and no network: carry the cp312 runtime wheel, the model and the
# artifacts (64 MiB a call in all) in an ignored folder, e.g. .devcarry/:
#
#   here:  pip download iree-base-runtime==3.13.0 --python-version 3.12 --only-binary :all: \
#              --platform manylinux_2_28_x86_64 --no-deps -d .devcarry
#          python tools/bench/resnet_half.py .devcarry/resnet_half.onnx
#          inferx-compile .devcarry/resnet_half.onnx --target x86-avx512 --batch-sizes 1 --no-measure \
#              [--disable-pass inferx-f32-matmul] -o .devcarry/NAME.ixa
#   there: run(command="bash tools/bench/device_cpu_ab.sh .devcarry MODEL.onnx NAME=ART.ixa ...",
#              carry=[".devcarry"])
#
# Prints the table for 2 threads, then 1 thread. THREADS="2 1", ROUNDS=11 and BATCH=1 by default.
set -e
CARRY=$1; MODEL=$2; shift 2
R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$CARRY"/*.whl
# the source tree as the installed package lays it out (pyproject's package-dir)
for d in runtime passes dialects; do ln -sfn "$R/$d" "$R/inferx_compiler/$d"; done
export PYTHONPATH=$R:/tmp/site
lscpu | grep -E "Model name" ; lscpu | grep Flags | tr ' ' '\n' | grep -E '^(avx512f|avx512_vnni|avx512_bf16|amx_tile)$' | tr '\n' ' '; echo
ARTS=()
for a in "$@"; do ARTS+=(--artifact "${a%%=*}=$R/${a#*=}"); done
cd /tmp
for t in ${THREADS:-2 1}; do
  python3 "$R/tools/bench/knobs.py" "$R/$MODEL" --batch "${BATCH:-1}" --threads "$t" "${ARTS[@]}" --rounds "${ROUNDS:-11}" --cache /tmp/kc 2>&1 | tail -6
done
