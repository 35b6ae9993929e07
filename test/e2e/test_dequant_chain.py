"""The one-launch int4 chain kernel (inferx_compiler/kernels/triton_chain.py), which
inferx-dequant-chain builds for one-row int4 layer chains on CUDA targets.

No GPU here. The layers' arithmetic and the hand-off of each layer's result to the next go
through Triton's interpreter against numpy in float64 (one program: the interpreter runs programs
one after another, so a grid barrier between several would never open); the barrier itself is
checked in the PTX (who spins, with what ordering) and on a GPU by tools/bench/gpu_chain_sweep.py
(528 programs, against float64) and tools/bench/gpu.py (the built model against onnxruntime).
"""

from __future__ import annotations

import pytest

from helpers import triton_interpreter

pytest.importorskip("triton")

from inferx_compiler.kernels import triton_chain  # noqa: E402
from inferx_compiler.kernels.triton_matmul import Epilogue, EpilogueInput, Offsets  # noqa: E402

_CHAIN = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from inferx_compiler.kernels.triton_chain import ChainLayer, ChainSpec, kernel_function
from inferx_compiler.kernels.triton_matmul import Epilogue, EpilogueInput, Offsets
from inferx_compiler.quantization import pack_int4
sizes, group, x_type = json.loads(sys.argv[1])
rng = np.random.default_rng(4)
x = rng.standard_normal((1, sizes[0])).astype(np.float16 if x_type == "f16" else np.float32)
h = x.astype(np.float64)
layers, args = [], [torch.from_numpy(x)]
for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
    last = i == len(sizes) - 2
    q = rng.integers(-7, 8, (n, k)).astype(np.int8)
    w = pack_int4(q).view(np.int8).reshape(n, k // 2)
    s = ((rng.random((n, k // group)) * 0.5 + 0.75) * 1.5 / (4.3 * np.sqrt(k))).astype(np.float16)
    b = (rng.standard_normal(n) * 0.1).astype(np.float32)
    out_t = "f32" if last else "f16"
    body = (("v0", "add", ("acc", "x0")), ("z", "const", ("0.0", "f32")), ("v1", "max", ("v0", "z")),
            ("v2", f"cast:{out_t}", ("v1",)))
    ep = Epilogue((EpilogueInput("f32", Offsets((), ((1, n, 1),))),), body, "v2", out_t, Offsets((), ((1, n, 1),)))
    layers.append(ChainLayer(n, k, group, ep))
    args += [torch.from_numpy(w), torch.from_numpy(s), torch.from_numpy(b)]
    deq = q.astype(np.float64) * np.repeat(s.astype(np.float64), group, axis=1)
    h = np.maximum(h.astype(np.float16).astype(np.float64) @ deq.T + b, 0.0)
    if not last:
        h = h.astype(np.float16).astype(np.float64)
spec = ChainSpec(tuple(layers), 1, x_type, fast=False)
bar = torch.zeros(1, dtype=torch.int32)
out = torch.full((1, sizes[-1]), float("nan"), dtype=torch.float32)
act = torch.full((spec.scratch_elements,), float("nan"), dtype=torch.float16)
kernel_function(spec)[spec.grid](*args, bar, out, act)
got = out.numpy().astype(np.float64)
print(json.dumps({"err": float(np.linalg.norm(got - h) / np.linalg.norm(h)), "finite": bool(np.isfinite(got).all()),
                  "arrivals": int(bar[0])}))
"""


@pytest.mark.parametrize("case", [([256, 128, 256, 100], 64, "f32"), ([512, 256, 96], 128, "f16")],
                         ids=["three-layers-f32-input", "two-layers-f16-input"])
def test_chain_matches_numpy_in_the_interpreter(case):
    """Every element of the last layer written and right to the f16 rounding of the products and
    of each layer's result (a layer reading the wrong part of the scratch, or a stale one, gives
    errors of order 1); the counter counts one arrival a layer but the last."""
    result = triton_interpreter(_CHAIN, case)
    assert result["finite"], "some output elements were never written"
    assert result["err"] <= 2e-3, result
    assert result["arrivals"] == len(case[0]) - 2


def _relu_f16(n: int, out: str = "f16") -> Epilogue:
    body = (("v0", "add", ("acc", "x0")), ("z", "const", ("0.0", "f32")), ("v1", "max", ("v0", "z")),
            ("v2", f"cast:{out}", ("v1",)))
    return Epilogue((EpilogueInput("f32", Offsets((), ((1, n, 1),))),), body, "v2", out, Offsets((), ((1, n, 1),)))


def _mlp_chain(layers=8, width=4096, programs=528, **kw) -> triton_chain.ChainSpec:
    return triton_chain.ChainSpec(tuple(triton_chain.ChainLayer(width, width, 128, _relu_f16(width, "f32" if i == layers - 1
                                                                                               else "f16"))
                                        for i in range(layers)), programs, **kw)


def test_each_program_takes_one_tile_a_layer():
    spec = _mlp_chain()
    assert [spec.block_n(i) for i in range(8)] == [8] * 8  # 4096 rows over 528 programs
    assert spec.scratch_elements == 7 * 4096
    assert spec.input_bindings == 1 + 8 * 3
    assert triton_chain.registers_for(4, 4) == 128 and triton_chain.registers_for(1, 8) == 255


@pytest.mark.parametrize("change, message", [
    (dict(programs=64), "64 rows of 4096 int4 values a program exceed"),
    (dict(layers=1), "at least two layers"),
    (dict(barrier="spin"), "barrier spin"),
])
def test_chains_the_kernel_cannot_hold_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        _mlp_chain(**change)


def test_a_layer_whose_result_is_not_f16_ends_a_chain():
    layers = (triton_chain.ChainLayer(256, 256, 64, _relu_f16(256, "f32")),
              triton_chain.ChainLayer(256, 256, 64, _relu_f16(256, "f32")))
    with pytest.raises(ValueError, match="layer 0: its result .f32. is not the f16"):
        triton_chain.ChainSpec(layers, 4)


def test_ptx_barrier_one_poller_with_acquire_and_a_register_cap(tmp_path):
    """Between layers: a release add after a CTA barrier, then thread 0 alone spinning on acquire
    loads and a CTA barrier after it; .maxnreg keeps 4 programs of 4 warps resident on a SM."""
    spec = _mlp_chain(layers=3, width=1024, max_registers=triton_chain.registers_for(4, 4))
    ptx = triton_chain.compile_kernel(spec, cache_dir=str(tmp_path)).ptx.decode()
    assert ptx.count("atom.global.gpu.release.add") == 2
    assert ptx.count("ld.acquire.gpu.global.b32") == 2
    assert ptx.count("mov.u32 t, %tid.x") == 2  # the poller is thread 0
    assert ".maxnreg 128" in ptx
    again = triton_chain.compile_kernel(spec, cache_dir=str(tmp_path / "again")).ptx.decode()
    assert again == ptx
