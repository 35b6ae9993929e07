"""passes/rounding.round_half_even compiled by IREE for this CPU rounds exactly as numpy's
`rint` (round half to even): ties, the edges of f32's integer range, infinities and NaN. It
replaces `math.roundeven` in the int8 activation quantization, so a difference here would shift
quantized activations by one step."""

from __future__ import annotations

import numpy as np
import pytest

from inferx_compiler.passes.support.rounding import round_half_even

VALUES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 127.5, -128.5, 254.5, 3.3,
                   -7.7, 0.0, -0.0, 4194304.5, -4194304.5, 8388607.5, 8388608.0, 8388609.0, -8388609.0,
                   16777216.0, 1e30, -1e30, np.inf, -np.inf, 1e-38, -3.5, 5.5, 1e-45, 6.5, -6.5],
                  dtype=np.float32)


def _module(n: int) -> str:
    """func @round(tensor<n x f32>) -> tensor<n x f32>, a generic whose body is round_half_even."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith, func, math, tensor

    from inferx_compiler.passes.support.iree_ir import generic

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        f32 = ir.F32Type.get()
        t = ir.RankedTensorType.get([n], f32)
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(t, name="round")
            def _round(x):
                identity = ir.AffineMap.get_identity(1)
                init = tensor.EmptyOp([n], f32).result
                return generic([x], init, [identity, identity], ["parallel"],
                               lambda b: round_half_even(b.arguments[0], ir, arith, math))
        return str(module)


@pytest.mark.parametrize("target_cpu", ["host", "generic"])
def test_round_half_even_matches_numpy(target_cpu):
    import iree.compiler as ireec
    import iree.runtime as rt

    values = np.concatenate([VALUES, np.float32(np.nan)[None]])
    vmfb = ireec.compile_str(_module(values.size), target_backends=["llvm-cpu"],
                             extra_args=[f"--iree-llvmcpu-target-cpu={target_cpu}"])
    config = rt.Config("local-task")
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, vmfb))
    got = np.asarray(ctx.modules.module["round"](values))
    want = np.rint(values)
    assert np.array_equal(got[:-1], want[:-1]), list(zip(values[:-1], got[:-1], want[:-1]))
    assert np.isnan(got[-1])
