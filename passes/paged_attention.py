"""inferx-paged-attention: a generation model's attention calls -> our paged-attention kernels' dispatches.

A generation model built for a CUDA target attends through `inferx::paged_attention_partials`
(decode steps) and `inferx::paged_prefill_attention` (prefill chunks) (frontend/llm/
paged_attention.py), which reach IREE's context as calls of private declarations marked
`inferx.kernel = "paged_attention"` / `"paged_prefill_attention"` (frontend/llm/kernel_calls.py):

    %acc, %stats = call @inferx_paged_attention_0(%q, %cache, %table, %start, %layer)
    ->
    %acc, %stats, %scratch:2 = flow.dispatch @inferx_paged_attention_<key>::@entry(%q, %cache, ...)

The kernels (kernels/triton_paged_attention.py, triton_prefill_attention.py, compiled for the
target's architecture) read the cache through the block table where it lies, only the
positions each sequence has: the decode kernel in splits of them (the results' third
dimension), the prefill kernel as flash attention over the cached and the chunk's own keys.
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
KERNELS = ("paged_attention", "paged_prefill_attention")
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
        kernel = external_kernel(spec)
        if not is_declared(module, kernel.name):
            declare(module, kernel)
        outputs = len(call.results)
        with ir.InsertionPoint(call), call.location:
            results = dispatch(kernel, list(call.operands),
                               [r.type for r in call.results] + scratch_types(kernel, outputs))
        for old, new in zip(list(call.results), results):
            old.replace_all_uses_with(new)
        what = (f"decode attention: batch {spec.batch}" if _is_decode(spec)
                else f"prefill attention: batch {spec.batch} x {spec.length} tokens")
        how = f", {spec.splits} splits" if _is_decode(spec) else ""
        remark(self.name, call, f"{what}, {spec.heads} heads over {spec.kv_heads} KV heads{how}, "
                                f"{spec.element_type} cache in blocks of {spec.block_size}: our kernel "
                                f"(Triton, sm_{spec.arch})")
        call.erase()


def kernel_spec(call, decl, target):
    """The kernel spec (PagedAttentionSpec or PrefillAttentionSpec) for `call`, or a string saying
    why there is none."""
    from iree.compiler import ir

    from inferx_compiler.kernels.triton_paged_attention import PagedAttentionSpec
    from inferx_compiler.kernels.triton_prefill_attention import PrefillAttentionSpec
    from inferx_compiler.passes.support import dequant_matvec

    if target.backend != "cuda":
        return f"target '{target.name}' is not a CUDA GPU"
    why = dequant_matvec.declined(target)
    if why:
        return why
    types = [v.type for v in call.operands]
    q, cache, table = types[0], types[-4], types[-3]
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
        return PagedAttentionSpec(batch=q.shape[0], splits=call.results[0].type.shape[2], **common)
    except ValueError as e:
        return str(e)


def _is_decode(spec) -> bool:
    return hasattr(spec, "splits")


def external_kernel(spec):
    """The compiled kernel as an extern_dispatch.ExternalKernel, with its report rows."""
    from inferx_compiler.kernels import triton_paged_attention, triton_prefill_attention
    from inferx_compiler.passes.infra.attributes import CONFIG_ATTR, REPORT_ATTR
    from inferx_compiler.passes.support.extern_dispatch import ExternalKernel

    module = triton_paged_attention if _is_decode(spec) else triton_prefill_attention
    compiled = module.compile_kernel(spec)
    positions = spec.table_width * spec.block_size
    queries = 1 if _is_decode(spec) else spec.length
    name = "inferx_paged_attention" if _is_decode(spec) else "inferx_prefill_attention"
    report = {"root": f"{name} (Triton, sm_{spec.arch})",
              "kind": "attention", "element_type": spec.element_type,
              "loops": [spec.batch, spec.heads, queries, positions + queries - 1, spec.head_dim],
              "flops": 4 * spec.batch * spec.heads * queries * (positions + queries) * spec.head_dim,
              "linalg_ops": 0, "fused": ["block-table read", "online softmax"]}
    if _is_decode(spec):
        signature = f"decode attention b{spec.batch} h{spec.heads}/{spec.kv_heads} d{spec.head_dim}"
        config = f"{spec.rows} query rows, {spec.block_n} positions a step, {spec.splits} splits"
    else:
        signature = f"prefill attention b{spec.batch} t{spec.length} h{spec.heads}/{spec.kv_heads} d{spec.head_dim}"
        config = f"{spec.block_m} query rows, {spec.block_n} positions a step"
    config += f", {spec.warps} warps, {spec.stages} stages" + (f", window {spec.window}" if spec.window else "")
    return ExternalKernel(f"{name}_{spec.key()[-16:]}", compiled.name, compiled.ptx,
                          spec.grid, compiled.threads, compiled.shared_bytes, read_only=module.INPUTS,
                          written=compiled.parameters - module.INPUTS,
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
