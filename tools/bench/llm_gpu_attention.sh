#!/bin/bash
# Decode attention on a lent GPU (run from the repository root on the device machine): the
# paged-attention kernel alone, then Llama-3-8B-shaped fp16 generation with it and without it
# (--disable-pass inferx-paged-attention), then transformers (PART=torch, a second call on the
# same warm machine: its compile takes minutes); PART=profile: the kernels alone and a kernel profile.
# ARTIFACTS (default "kernel iree") and PROFILE (default kernel) name build/llm-gpu/llama8b_$NAME.ixa. Carries build/wheels (the inferx wheel and the
# cp312 iree-base-runtime wheel) and build/llm-gpu (llama8b config, the two artifacts):
#   python tools/bench/llm_gpu.py config --out build/llm-gpu/llama8b
#   inferx-compile build/llm-gpu/llama8b --target h100 --precision fp16 --weights reference --greedy-only \
#       --prefill-lengths 128,512 --prefill-batch-sizes 1 --batch-sizes 1,8 --max-seq 2560 \
#       [--disable-pass inferx-paged-attention] -o build/llm-gpu/llama8b_{kernel,iree}.ixa
set -e
ROOT=$PWD
OUT=${OUT:-/tmp/out}
pip install -q --no-deps --target /tmp/site build/wheels/*.whl 2>&1 | grep -v "running pip" || true
export PYTHONPATH=/tmp/site
cd /tmp  # the checkout's inferx_compiler/ would shadow the installed package
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
W=/tmp/llama8b-weights
if [ "${PART:-inferx}" = inferx ]; then
  timeout 100 python3 "$ROOT/tools/bench/gpu_paged_attention.py" --json "$OUT/paged_attention.json" || echo "kernel bench failed: $?"
  [ -f $W/model.safetensors.index.json ] || timeout 200 python3 "$ROOT/tools/bench/llm_gpu.py" weights --config "$ROOT/build/llm-gpu/llama8b" --out $W
  for a in ${ARTIFACTS:-kernel iree}; do
    timeout 130 python3 "$ROOT/tools/bench/llm_gpu.py" inferx --artifact "$ROOT/build/llm-gpu/llama8b_$a.ixa" --weights $W \
      --steps ${STEPS:-24} --warmup 4 --rounds 2 --json "$OUT/inferx_$a.json" || echo "inferx $a failed: $?"
  done
elif [ "$PART" = profile ]; then  # the kernels alone, then where a kernel build's decode step spends its time
  timeout 100 python3 "$ROOT/tools/bench/gpu_paged_attention.py" --json "$OUT/paged_attention.json" || echo "kernel bench failed: $?"
  [ -f $W/model.safetensors.index.json ] || timeout 200 python3 "$ROOT/tools/bench/llm_gpu.py" weights --config "$ROOT/build/llm-gpu/llama8b" --out $W
  timeout 150 python3 "$ROOT/tools/bench/llm_gpu.py" profile --artifact "$ROOT/build/llm-gpu/llama8b_${PROFILE:-kernel}.ixa" --weights $W \
    --json "$OUT/profile_kernel.json" --top 14 2>&1 | grep -v "^ *[0-9.]* us  x *[0-9.]*  .*matvec_like" || echo "profile failed: $?"
else
  [ -f $W/model.safetensors.index.json ] || timeout 200 python3 "$ROOT/tools/bench/llm_gpu.py" weights --config "$ROOT/build/llm-gpu/llama8b" --out $W
  timeout 420 python3 "$ROOT/tools/bench/llm_gpu.py" torch --weights $W --steps 40 --warmup 6 --rounds 3 --json "$OUT/torch.json"
fi
