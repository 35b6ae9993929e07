"""Attention through our paged-attention kernels (CUDA builds of generation models).

What runs without a GPU: the decode and prefill Triton kernels in Triton's interpreter against
their torch definitions (ragged batches, splits, a sliding window, grouped and plain heads, first
and later chunks), the decoder attending through the kernels' ops against its own attention
written out (every family member, a prefill and several decode steps), the op's way through torch.export, torch-mlir and our call rewriting, and an
h100 build whose decode entries dispatch the kernel over the cache in place. The kernel's
numbers on a GPU: tools/bench/gpu_paged_attention.py (docs/bench).
"""

from __future__ import annotations

import json
import zipfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_models import family_configs, save_tiny  # noqa: E402
from inferx_compiler.cli.compile import main as compile_main  # noqa: E402
from inferx_compiler.frontend.llm import paged_attention  # noqa: E402
from inferx_compiler.frontend.llm.decoder import LlamaDecoder, new_cache  # noqa: E402
from inferx_compiler.frontend.llm.paged_attention import KernelAttention, decode_reference  # noqa: E402


def _cache_case(batch, kv_heads, group, head_dim, starts, blocks=12, block=16, width=5, dtype=torch.float16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    cache = torch.randn(3, 2, blocks, kv_heads, block, head_dim, generator=gen).to(dtype)
    table = torch.randint(1, blocks, (batch, width), generator=gen)
    q = (torch.randn(batch, kv_heads * group, head_dim, generator=gen) / head_dim ** 0.5).to(dtype)
    return q, cache, table, torch.tensor(starts), torch.tensor([1], dtype=torch.int32)


# (batch, kv heads, group, head_dim, starts, splits, window): grouped heads in a padded tile, plain
# heads, one split and several (some empty: the short sequence), a window that cuts splits
KERNEL_CASES = [
    (2, 2, 3, 64, [37, 75], 1, 0),
    (2, 2, 3, 64, [37, 75], 3, 0),
    (2, 2, 4, 32, [5, 79], 4, 20),
    (1, 4, 1, 16, [66], 2, 0),
]


# Triton's interpreter must be chosen before Triton is imported: each case runs in its own process
_INTERPRETED = """
import json, sys
import torch
from test_paged_attention import _cache_case
from inferx_compiler.frontend.llm.paged_attention import combine, partials_reference
from inferx_compiler.kernels.triton_paged_attention import PagedAttentionSpec, launch_interpreted
batch, kv_heads, group, head_dim, starts, splits, window = json.loads(sys.argv[1])
q, cache, table, start, layer = _cache_case(batch, kv_heads, group, head_dim, starts)
gen = torch.Generator().manual_seed(9)
k, v = (torch.randn(batch, kv_heads, 1, head_dim, generator=gen).half() for _ in range(2))
spec = PagedAttentionSpec(batch, kv_heads, group, head_dim, 16, table.shape[1], cache.shape[2], cache.shape[0],
                          splits, window)
acc, stats, out = launch_interpreted(spec, q, k, v, cache, table, start, layer)
ref_acc, ref_stats = partials_reference(q, k, v, cache, table, start, layer, splits, window)
ref_out = combine(ref_acc, ref_stats, q.dtype)
print(json.dumps({"acc": (acc - ref_acc).abs().max().item(), "stats": (stats - ref_stats).abs().max().item(),
                  "out": (out.float() - ref_out.float()).abs().max().item(), "nan": bool(torch.isnan(out).any()),
                  "acc_scale": ref_acc.abs().max().item(), "written": bool((stats[..., 1] > 0).any())}))
"""


@pytest.mark.parametrize("case", KERNEL_CASES, ids=lambda c: f"b{c[0]}-g{c[2]}-s{c[5]}-w{c[6]}")
def test_kernel_matches_its_definition_in_the_interpreter(case):
    pytest.importorskip("triton")
    err = _interpret(_INTERPRETED, case)
    # the sums of p.v are O(10): f16 p rounded at another running max differs by ~1e-3; a wrong
    # position, block or mask is off by O(1)
    assert err["written"] and err["acc_scale"] > 1.0 and not err["nan"]
    assert err["stats"] < 1e-4 and err["acc"] < 5e-3 and err["out"] < 2e-3, err


# (batch, kv heads, group, head_dim, chunk length, starts, window): a first chunk (start 0) beside a
# later one, a chunk length that is not a tile multiple, a window shorter than the chunk
PREFILL_CASES = [
    (2, 2, 2, 32, 64, [0, 37], 0),
    (1, 2, 3, 16, 10, [21], 0),
    (2, 1, 2, 16, 64, [50, 5], 12),
]

_PREFILL_INTERPRETED = """
import json, sys
import torch
from test_paged_attention import _cache_case
from inferx_compiler.frontend.llm.paged_attention import prefill_reference
from inferx_compiler.kernels.triton_prefill_attention import PrefillAttentionSpec, launch_interpreted
batch, kv_heads, group, head_dim, length, starts, window = json.loads(sys.argv[1])
_, cache, table, start, layer = _cache_case(batch, kv_heads, group, head_dim, starts, width=9)
gen = torch.Generator().manual_seed(5)
q = (torch.randn(batch, kv_heads * group, length, head_dim, generator=gen) / head_dim ** 0.5).half()
k, v = (torch.randn(batch, kv_heads, length, head_dim, generator=gen).half() for _ in range(2))
spec = PrefillAttentionSpec(batch, length, kv_heads, group, head_dim, 16, table.shape[1], cache.shape[2],
                            cache.shape[0], window)
out = launch_interpreted(spec, q, k, v, cache, table, start, layer)
ref = prefill_reference(q, k, v, cache, table, start, layer, window)
print(json.dumps({"err": (out.float() - ref.float()).abs().max().item(), "nan": bool(torch.isnan(out).any()),
                  "scale": ref.float().abs().max().item()}))
"""


def _interpret(program: str, case) -> dict:
    import os
    import subprocess
    import sys

    here = os.path.dirname(__file__)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", program, json.dumps(case)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", PREFILL_CASES, ids=lambda c: f"b{c[0]}-g{c[2]}-t{c[4]}-w{c[6]}")
def test_prefill_kernel_matches_the_decoder_attention_in_the_interpreter(case):
    """The prefill kernel's f16 output against the decoder's own attention (f16 products, f32
    softmax): an element or two of f16 rounding apart; a wrong mask or key is off by O(0.1)."""
    pytest.importorskip("triton")
    err = _interpret(_PREFILL_INTERPRETED, case)
    assert not err["nan"] and err["scale"] > 0.5
    assert err["err"] < 4e-3, err


def test_splits_combine_to_the_softmax_over_every_visible_key():
    """The two launches' definition (the splits, the step's own key in split 0, their combine)
    equals a float64 softmax over the visible cached keys and the new one, whatever the splits
    (so splits are only a schedule)."""
    from inferx_compiler.frontend.llm.attention import read_blocks

    q, cache, table, start, layer = _cache_case(2, 2, 3, 64, [37, 75], dtype=torch.float32)
    k_new, v_new = torch.randn(2, 2, 1, 64), torch.randn(2, 2, 1, 64)
    keys = torch.cat([read_blocks(cache[1, 0], table), k_new], 2).double()
    values = torch.cat([read_blocks(cache[1, 1], table), v_new], 2).double()
    scores = torch.matmul(q.double().view(2, 2, 3, 64), keys.transpose(-1, -2))
    positions = torch.arange(keys.shape[2] - 1)
    for window in (0, 30):
        visible = positions[None, :] < start[:, None]
        if window:
            visible &= positions[None, :] > start[:, None] - window
        visible = torch.cat([visible, torch.ones(2, 1, dtype=torch.bool)], 1)[:, None, None]
        want = torch.matmul(torch.softmax(scores.masked_fill(~visible, float("-inf")), -1), values).reshape(2, 6, 64)
        for splits in (1, 2, 5):
            got = decode_reference(q, k_new, v_new, cache, table, start, layer, splits, window).double()
            assert torch.allclose(got, want, atol=1e-5), (window, splits)


@pytest.mark.parametrize("family", sorted(family_configs()))
def test_the_decoder_attends_the_same_through_the_kernel_op(family, tmp_path):
    """Every family member (Mistral with its sliding window shorter than the text): decode steps
    through the kernel's op give the logits of the decoder's own attention, in f32 (~1e-7 apart;
    a wrong mask, split or combine is off by O(0.1))."""
    from inferx_compiler.frontend.llm.source import open_source

    class_name, config = family_configs()[family]
    save_tiny(tmp_path, class_name, config)
    source = open_source(str(tmp_path))
    state = source.read_weights()
    cfg = source.config
    table = torch.tensor([[3, 1, 5, 2, 9], [4, 6, 7, 8, 10]])
    logits = []
    for kernel in (None, KernelAttention(sms=3)):
        model = LlamaDecoder.from_state(cfg, state)
        model.kernel_attention = kernel
        cache = new_cache(cfg, 11, 4)
        tokens = torch.randint(3, 300, (2, 7), generator=torch.Generator().manual_seed(1))
        model.step(tokens, torch.tensor([0, 0]), torch.tensor([7, 5]), table, cache)
        start, steps = torch.tensor([7, 5]), []
        for i in range(8):
            token = torch.randint(3, 300, (2, 1), generator=torch.Generator().manual_seed(10 + i))
            steps.append(model.step(token, start, torch.tensor([1, 1]), table, cache))
            start = start + 1
        logits.append(torch.stack(steps))
    assert torch.allclose(logits[0], logits[1], atol=1e-5), (logits[0] - logits[1]).abs().max()
    assert logits[0].abs().max() > 0.1


def test_kernel_ops_become_calls_and_lower(tmp_path):
    """torch.export keeps the op (one a layer); torch-mlir's import writes torch.operator; our
    rewrite makes each a call of one declaration per signature, and the lowering leaves no
    torch op."""
    from inferx_compiler.frontend.llm import kernel_calls
    from inferx_compiler.frontend.llm.decoder import CacheGeometry
    from inferx_compiler.frontend.llm.export import EntrySpec, export_entry, import_entries
    from inferx_compiler.frontend.llm.source import open_source
    from inferx_compiler.log import BuildLog
    from inferx_compiler.mlir_contexts import new_context
    from torch_mlir import ir

    class_name, config = family_configs()["mistral_window_6"]
    save_tiny(tmp_path, class_name, config)
    cfg = open_source(str(tmp_path)).config
    geometry = CacheGeometry(blocks=9, block_size=16, table_width=4)
    spec = EntrySpec("decode", 2, output="greedy")
    program = export_entry(cfg, spec, geometry, dtype=torch.float16, kernel_attention=KernelAttention(sms=8))
    ctx = new_context("graph")
    module_op = import_entries({spec.name: (program, [])}, ctx)
    with ctx:
        assert len(kernel_calls.operators(module_op)) == cfg.layers
        assert kernel_calls.to_calls(module_op) == cfg.layers
        kernel_calls.lower(module_op, "builtin.module(torchdynamo-export-to-torch-backend-pipeline,"
                                      "torch-backend-to-linalg-on-tensors-backend-pipeline)", BuildLog(quiet=True))
        body = module_op.regions[0].blocks[0].operations
        decls = [op for op in body if kernel_calls.KERNEL_ATTR in op.operation.attributes]
        assert len(decls) == 1
        assert ir.IntegerAttr(decls[0].operation.attributes[kernel_calls.WINDOW_ATTR]).value == cfg.sliding_window
        splits = KernelAttention(sms=8).splits(2, cfg.kv_heads, 64)
        assert ir.IntegerAttr(decls[0].operation.attributes[kernel_calls.SPLITS_ATTR]).value == splits
        assert f"-> tensor<2x{cfg.heads}x{cfg.head_dim}xf16>" in str(decls[0].operation.attributes["function_type"])


def test_which_builds_use_the_kernel(tmp_path):
    from inferx_compiler.build import resolve_build
    from inferx_compiler.frontend.llm.config import DecoderConfig
    from inferx_compiler.options import CompileOptions

    def decision(target, head_dim=64, dtype="float16", int8=False, disabled=()):
        build = resolve_build(CompileOptions(target=target, disabled_passes=tuple(disabled)), source="llm")
        cfg = DecoderConfig(family="llama", vocab=64, hidden=4 * head_dim, intermediate=64, layers=1, heads=4,
                            kv_heads=2, head_dim=head_dim, rms_eps=1e-5, rope_theta=1e4, max_positions=64)
        return paged_attention.for_build(build, cfg, dtype, int8)

    pytest.importorskip("triton")
    kernel, _ = decision("h100")
    assert kernel is not None and kernel.sms == 132
    assert decision("cpu") == (None, "target 'cpu' is not a CUDA GPU")
    assert decision("h100", disabled=["inferx-paged-attention"])[1] == "--disable-pass inferx-paged-attention"
    assert "int8" in decision("h100", int8=True)[1]
    assert "head_dim 80" in decision("h100", head_dim=80)[1]
    assert "f32" in decision("h100", dtype="float32")[1]


def test_an_h100_build_dispatches_the_kernel_over_the_cache_in_place(tmp_path):
    """A tiny Llama built for h100 (no GPU needed): each decode and prefill entry dispatches its
    kernel once a layer, binds the caller's cache in place and copies none of it."""
    pytest.importorskip("triton")
    class_name, config = family_configs()["llama3_rope_untied"]
    save_tiny(tmp_path, class_name, config)
    out = tmp_path / "m.ixa"
    assert compile_main([str(tmp_path), "--target", "h100", "--precision", "fp16", "--prefill-lengths", "8",
                         "--batch-sizes", "2", "--max-seq", "64", "--greedy-only", "-q", "-o", str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        report = json.loads(z.read("report.json"))
        manifest = json.loads(z.read("manifest.json"))
    assert manifest["generation"]["attention"].startswith("inferx paged-attention kernels")
    decisions = [d for d in report["decisions"] if d["pass"] == "inferx-paged-attention"]
    for entry, what in (("decode_b2", "decode attention"), ("prefill_b2_t8", "prefill attention")):
        mine = [d for d in decisions if d["function"] == entry]
        assert len(mine) == config.num_hidden_layers and all(d["decision"].startswith(what) for d in mine), mine
    kernels = {d["root"].split()[0] for d in report["dispatches"] if d.get("config_source") == "rule (inferx-paged-attention)"}
    assert kernels == {"inferx_paged_attention", "inferx_paged_attention_combine", "inferx_prefill_attention"}
    cache = manifest["generation"]["cache"]
    cache_bytes = 2 * config.num_hidden_layers * 2 * cache["blocks"] * config.num_key_value_heads \
        * cache["block_size"] * cache["row"]
    for entry in ("decode_b2", "prefill_b2_t8"):
        step = report["functions"][entry]
        assert step["in_place_bytes"] == cache_bytes
        assert step["largest_copy_bytes"] < cache_bytes // (4 * config.num_hidden_layers), step
