"""inferx-paged-attention: a generation model's attention calls -> our paged-attention kernels' dispatches.

A generation model built for a CUDA target attends through `inferx::paged_decode_attention`
(decode steps) and `inferx::paged_prefill_attention` (prefill chunks) (frontend/llm/
paged_attention.py), which reach IREE's context as calls of private declarations marked
`inferx.kernel = "paged_decode_attention"` / `"paged_prefill_attention"` (frontend/llm/kernel_calls.py):

    %out = call @inferx_paged_decode_attention_0(%q, %k, %v, %cache, %table, %start, %layer)
    ->
    %acc, %stats, %s:2 = flow.dispatch @inferx_paged_attention_<key>::@entry(%q, %k, %v, %cache, ...)
    %out, %s2:2 = flow.dispatch @inferx_paged_attention_combine_<key>::@entry(%acc, %stats)

The kernels (kernels/triton_paged_attention.py, triton_prefill_attention.py, compiled for the
target's architecture) read the cache through the block table where it lies, only the
positions each sequence has: the decode kernel in splits of them (`inferx.splits`), combined
by a second launch, the prefill kernel as flash attention over the cached and the chunk's own keys.
IREE 3.13 compiled the same attention written out in linalg as serial 2561-wide softmax
reductions, 48 of a Llama-3-8B decode step's 56 ms on an H100, and 54 of a 512-token prefill
chunk's 70 ms (docs/bench/2026-12-07-h100-llama8b-decode-profile). The declarations go once
every call is replaced.

Fails, naming the call, where a call cannot become the kernel (a target that is not a CUDA GPU
of sm_80 or later, no Triton, a shape the kernel does not take): such a call has no other
implementation, and the frontend only writes one where this pass will replace it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

from inferx_compiler.passes.analysis.remarks import remark
from inferx_compiler.passes.infra.base import PassFailure, TargetedPass

KERNEL_ATTR = "inferx.kernel"  # (frontend/llm/kernel_calls.py writes these)
WINDOW_ATTR = "inferx.window"
SPLITS_ATTR = "inferx.splits"
KERNELS = ("paged_decode_attention", "paged_prefill_attention")
ELEMENT_TYPES = {"f16": "f16", "bf16": "bf16"}


@dataclasses.dataclass(frozen=True)
class PagedAttention(TargetedPass):
    """Calls of the paged-attention declaration to our Triton kernel's dispatch (CUDA)."""

    name: ClassVar[str] = "inferx-paged-attention"
    level: ClassVar[str] = "iree"
    # optional: --disable-pass inferx-paged-attention makes the frontend write the attention out
    # in torch ops instead (compiled by IREE), which measures the kernel
    optional: ClassVar[bool] = True
    summary: ClassVar[str] = "decode and prefill attention calls to our paged-attention kernels (Triton, CUDA)"

    @classmethod
    def for_build(cls, build) -> "Optional[PagedAttention]":
        if build.target.backend != "cuda" or build.source != "llm" or not build.runs(cls.name):
            return None
        return cls()

    def run(self, module) -> None:
        declarations = _declarations(module)
        if not declarations:
            return
        target = self.target_of(module)
        for call in _calls(module, declarations):
            self._replace(module, call, declarations[_callee(call)], target)
        for decl in declarations.values():
            decl.erase()

    def _replace(self, module, call, decl, target) -> None:
        from iree.compiler import ir

        from inferx_compiler.passes.support.extern_dispatch import declare, dispatch, is_declared, scratch_types

        spec = kernel_spec(call, decl, target)
        if isinstance(spec, str):
            raise PassFailure(f"the call of @{_callee(call)} cannot run: {spec}", call)
        kernels = external_kernels(spec)
        for kernel in kernels:
            if not is_declared(module, kernel.name):
                declare(module, kernel)
        result = call.results[0]
        with ir.InsertionPoint(call), call.location:
            if _is_decode(spec):  # the splits, then their combine
                f32 = ir.F32Type.get()
                parts = [ir.RankedTensorType.get([spec.batch, spec.heads, spec.splits, n], f32)
                         for n in (spec.head_dim, 2)]
                acc, stats = dispatch(kernels[0], list(call.operands), parts + scratch_types(kernels[0], 2))[:2]
                out = dispatch(kernels[1], [acc, stats], [result.type] + scratch_types(kernels[1], 1))[0]
            else:
                out = dispatch(kernels[0], list(call.operands), [result.type] + scratch_types(kernels[0], 1))[0]
        result.replace_all_uses_with(out)
        what = (f"decode attention: batch {spec.batch}" if _is_decode(spec)
                else f"prefill attention: batch {spec.batch} x {spec.length} tokens")
        how = f", {spec.splits} splits" if _is_decode(spec) else ""
        remark(self.name, call, f"{what}, {spec.heads} heads over {spec.kv_heads} KV heads{how}, "
                                f"{spec.element_type} cache in blocks of {spec.block_size}: our kernel "
                                f"(Triton, sm_{spec.arch})")
        call.erase()


def kernel_spec(call, decl, target):
    """The kernel spec (PagedAttentionSpec or PrefillAttentionSpec) for `call`, or a string saying
    why there is none. Operands: q, k_new, v_new, cache, table, start, layer."""
    from iree.compiler import ir

    from inferx_compiler.kernels.triton_paged_attention import PagedAttentionSpec
    from inferx_compiler.kernels.triton_prefill_attention import PrefillAttentionSpec
    from inferx_compiler.passes.support import dequant_matvec

    if target.backend != "cuda":
        return f"target '{target.name}' is not a CUDA GPU"
    why = dequant_matvec.declined(target)
    if why:
        return why
    q, _, _, cache, table, _, _ = [v.type for v in call.operands]
    layers, _, blocks, kv_heads, block_size, head_dim = cache.shape
    element = str(cache.element_type)
    if element not in ELEMENT_TYPES:
        return f"a {element} cache (the kernel reads f16 or bf16)"
    window = ir.IntegerAttr(decl.attributes[WINDOW_ATTR]).value if WINDOW_ATTR in decl.attributes else 0
    common = dict(kv_heads=kv_heads, group=q.shape[1] // kv_heads, head_dim=head_dim, block_size=block_size,
                  table_width=table.shape[1], blocks=blocks, layers=layers, window=window,
                  element_type=ELEMENT_TYPES[element], arch=dequant_matvec.triton_arch(target.arch))
    try:
        if ir.StringAttr(decl.attributes[KERNEL_ATTR]).value == "paged_prefill_attention":
            return PrefillAttentionSpec(batch=q.shape[0], length=q.shape[2], **common)
        return PagedAttentionSpec(batch=q.shape[0], splits=ir.IntegerAttr(decl.attributes[SPLITS_ATTR]).value, **common)
    except ValueError as e:
        return str(e)


def _is_decode(spec) -> bool:
    from inferx_compiler.kernels.triton_paged_attention import PagedAttentionSpec

    return isinstance(spec, PagedAttentionSpec)


def external_kernels(spec) -> list:
    """The compiled kernels (extern_dispatch.ExternalKernel, with their report rows): a decode
    step's partials and combine, or a prefill chunk's one kernel."""
    from inferx_compiler.kernels import triton_paged_attention as decode
    from inferx_compiler.kernels import triton_prefill_attention as prefill

    positions = spec.table_width * spec.block_size
    if _is_decode(spec):
        combine = decode.CombineSpec.of(spec)
        return [_external("inferx_paged_attention", spec, decode.compile_kernel(spec), decode.INPUTS, {
                    "loops": [spec.batch, spec.heads, positions + 1, spec.head_dim],
                    "flops": 4 * spec.batch * spec.heads * (positions + 1) * spec.head_dim},
                    f"decode attention b{spec.batch} h{spec.heads}/{spec.kv_heads} d{spec.head_dim}",
                    f"{spec.rows} query rows, {spec.block_n} positions a step, {spec.splits} splits"),
                _external("inferx_paged_attention_combine", combine, decode.compile_kernel(combine),
                          decode.COMBINE_INPUTS, {"loops": [combine.rows, spec.splits, spec.head_dim],
                                                  "flops": 3 * combine.rows * spec.splits * spec.head_dim},
                          f"decode attention combine b{spec.batch} h{spec.heads} s{spec.splits} d{spec.head_dim}",
                          f"a program a (sequence, head), {spec.splits} splits")]
    return [_external("inferx_prefill_attention", spec, prefill.compile_kernel(spec), prefill.INPUTS, {
                "loops": [spec.batch, spec.heads, spec.length, positions + spec.length, spec.head_dim],
                "flops": 4 * spec.batch * spec.heads * spec.length * (positions + spec.length) * spec.head_dim},
                f"prefill attention b{spec.batch} t{spec.length} h{spec.heads}/{spec.kv_heads} d{spec.head_dim}",
                f"{spec.block_m} query rows, {spec.block_n} positions a step")]


def _external(name: str, spec, compiled, inputs: int, sizes: dict, signature: str, config: str):
    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR
    from inferx_compiler.passes.support.extern_dispatch import ExternalKernel

    report = {"root": f"{name} (Triton, sm_{spec.arch})", "kind": "attention", "element_type": spec.element_type,
              **sizes, "linalg_ops": 0, "fused": ["block-table read", "online softmax"]}
    config += f", {spec.warps} warps, {spec.stages} stages" + (f", window {spec.window}" if getattr(spec, "window", 0)
                                                                else "")
    return ExternalKernel(f"{name}_{spec.key()[-16:]}", compiled.name, compiled.ptx, spec.grid, compiled.threads,
                          compiled.shared_bytes, read_only=inputs, written=compiled.parameters - inputs,
                          annotations=((REPORT_ATTR, report), (CONFIG_ATTR, {
                              "source": "rule (inferx-paged-attention)", "signature": signature, "config": config,
                              "candidates": 0})),
                          scratch_bytes=compiled.scratch_bytes)


def _declarations(module) -> dict:
    from iree.compiler import ir

    found = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if (op.name == "func.func" and KERNEL_ATTR in op.attributes
                and ir.StringAttr(op.attributes[KERNEL_ATTR]).value in KERNELS):
            found[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return found


def _calls(module, declarations: dict) -> list:
    from iree.compiler import ir

    calls = []

    def visit(op):
        if op.name == "func.call" and _callee(op) in declarations:
            calls.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return calls


def _callee(call) -> str:
    from iree.compiler import ir

    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value
