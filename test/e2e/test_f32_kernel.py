"""f32 products through our AVX-512 kernel on this CPU (inferx_compiler/kernels/f32_gemm.c,
inferx-f32-matmul, built for the x86-avx512 target whose record has it on), on shapes that reach
its edges: K = 1024 (rows 4 KiB apart: packed per K block by the register transpose; K blocks of
256), K = 96 and 100 (one K block), columns not a multiple of its 32-column panels (the weight
zero-padded at load, the result's own columns stored: its last panel's padded lanes masked), a weight stored transposed (Gemm transB=1), rows below and above its 14-row
register tile and its workgroups' rows, columns past one workgroup tile (the last partial), the
static functions (batch 1 and 5) and the dynamic one. The references are onnxruntime in f32 (the
kernel sums in f32 too, in k order: only rounding differs) and the same build with the pass
disabled (IREE's own f32 code)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferx_compiler
from e2e_models import _model, _w
from helpers import artifact_json, onnxruntime_outputs, rel_l2, save
from inferx_compiler.cli.compile import main as compile_main
from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

pytestmark = [
    pytest.mark.skipif("avx512f" not in get_target("cpu").features, reason="this CPU has no AVX-512 (avx512f)"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]

# f32 sums in another order than onnxruntime's: ~1e-7 here. A misplaced panel, row, K block or
# column is off by the size of the values (> 1e-1).
TOLERANCE = 1e-5


def f32_chain(seed=7, d_in=1024, d_mid=96, d_hidden=100, d_out=40):
    """x [B, 1024] -> MatMul 1024x96 + bias -> Relu (K = 1024: packed rows, 4 K blocks of 256)
    -> MatMul 96x100 + bias -> Relu (K = 96; 100 columns padded to 128) -> Gemm transB=1 against
    a stored 40x100 weight, with bias (K = 100; 40 columns padded to 64)."""
    rng = np.random.default_rng(seed)
    inits = {"w0": _w(rng, d_in, d_mid), "b0": _w(rng, d_mid, scale=0.1),
             "w1": _w(rng, d_mid, d_hidden), "b1": _w(rng, d_hidden, scale=0.1),
             "w2t": _w(rng, d_out, d_hidden, scale=1.0 / np.sqrt(d_hidden)), "b2": _w(rng, d_out, scale=0.1)}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h0"], name="fc0"),
             helper.make_node("Add", ["h0", "b0"], ["h1"], name="fc0_bias"),
             helper.make_node("Relu", ["h1"], ["r0"], name="relu0"),
             helper.make_node("MatMul", ["r0", "w1"], ["h2"], name="fc1"),
             helper.make_node("Add", ["h2", "b1"], ["h3"], name="fc1_bias"),
             helper.make_node("Relu", ["h3"], ["r1"], name="relu1"),
             helper.make_node("Gemm", ["r1", "w2t", "b2"], ["y"], transB=1, name="fc2")]
    return _model(nodes, "f32_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d_out])], inits)


def wide_projection(seed=9, d_in=64, d_out=300):
    """x [B, 64] -> MatMul 64x300 (padded to 320 columns: more than one workgroup tile of
    columns, 128 or 256, the last one partial)."""
    rng = np.random.default_rng(seed)
    inits = {"w": _w(rng, d_in, d_out)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="wide")]
    return _model(nodes, "wide_projection", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d_out])], inits)


def _build(path, out, *extra):
    # x86-avx512 (an Intel core: the kernel on; see test_kernel_follows_the_target_record) runs on
    # any AVX-512 machine
    assert compile_main([str(path), "--target", "x86-avx512", "--batch-sizes", "1,5", "--no-measure", "-o", str(out), "-q",
                         *extra]) == 0
    return artifact_json(out)


def _f32_dispatches(report) -> list[str]:
    return [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith("inferx_f32_")]


def _shapes(dispatches) -> set[tuple[str, str, str]]:
    """(M, N, K) of `inferx_f32_MxNxK` ("D": dynamic rows)."""
    return {tuple(d[len("inferx_f32_"):].split("x")) for d in dispatches}


@pytest.fixture(scope="module")
def chain_builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("f32_kernel")
    path = save(f32_chain(), root / "chain.onnx")
    kernel = _build(path, root / "kernel.ixa")
    iree = _build(path, root / "iree.ixa", "--disable-pass", "inferx-f32-matmul")
    return path, root / "kernel.ixa", kernel, root / "iree.ixa", iree


def _batches(model, path, batches=(1, 5, 3, 150)):
    """(batch, output, onnxruntime's) for each batch: 1 and 5 the static functions, 3 and 150 the
    dynamic one (150 rows: more than one workgroup of rows, the last partial)."""
    name, out = model.inputs[0].name, model.outputs[0].name
    for batch in batches:
        x = np.random.default_rng(100 + batch).standard_normal([batch] + list(model.inputs[0].shape[1:]))
        x = x.astype(np.float32)
        yield batch, model.run({name: x})[out], onnxruntime_outputs(str(path), {name: x})[out]


def test_f32_kernel_matches_onnxruntime(chain_builds):
    path, artifact, (manifest, report), _, _ = chain_builds
    used = _f32_dispatches(report)
    # every product of the chain, in the batch-1, batch-5 and dynamic functions, on the kernel
    # (the 100- and 40-column products: their weights padded to 128 and 64 columns, their
    # results 100 and 40 wide)
    assert _shapes(used) == {(m, n, k) for m in ("1", "5", "D") for n, k in (("96", "1024"), ("100", "96"), ("40", "100"))}
    assert "f32_gemm.c" in manifest["compiler"]["c_kernels"]
    for d in report["dispatches"]:
        if d["dispatch"] in used:
            assert d["root"] == "inferx_f32 (C, AVX-512)"
            assert d["config_source"] == "rule (inferx-f32-matmul)"
    decisions = [d["decision"] for d in report["decisions"] if d["pass"] == "inferx-f32-matmul"]
    assert decisions and not [d for d in decisions if "declined" in d], decisions
    model = inferx_compiler.load(str(artifact), device="cpu")
    for batch, got, want in _batches(model, path):
        assert got.shape == want.shape
        assert rel_l2(got, want) <= TOLERANCE, (batch, rel_l2(got, want))


def test_disabled_pass_leaves_iree_code_that_agrees(chain_builds):
    path, artifact, _, reference_artifact, (manifest, report) = chain_builds
    assert not _f32_dispatches(report)
    assert "f32_gemm.c" not in manifest["compiler"].get("c_kernels", {})
    kernel = inferx_compiler.load(str(artifact), device="cpu")
    iree = inferx_compiler.load(str(reference_artifact), device="cpu")
    name, out = kernel.inputs[0].name, kernel.outputs[0].name
    for batch in (1, 5, 3):
        x = np.random.default_rng(200 + batch).standard_normal([batch, 1024]).astype(np.float32)
        got, want = kernel.run({name: x})[out], iree.run({name: x})[out]
        assert rel_l2(got, want) <= TOLERANCE, (batch, rel_l2(got, want))


def test_columns_past_one_workgroup_tile(tmp_path):
    """300 columns (the weight padded to 320): the workgroups must cover them all (a floor
    division of the columns by the tile left the last, partial tile uncomputed: 256..299
    garbage), the result stored 300 wide (the last panel's 20 padded lanes masked off)."""
    path = save(wide_projection(), tmp_path / "wide.onnx")
    _, report = _build(path, tmp_path / "wide.ixa")
    assert _shapes(_f32_dispatches(report)) == {("1", "300", "64"), ("5", "300", "64"), ("D", "300", "64")}
    model = inferx_compiler.load(str(tmp_path / "wide.ixa"), device="cpu")
    for batch, got, want in _batches(model, path, batches=(1, 5, 3)):
        assert rel_l2(got[:, 256:], want[:, 256:]) <= TOLERANCE, (batch, "columns 256..299")
        assert rel_l2(got, want) <= TOLERANCE, (batch, rel_l2(got, want))


def conv_bottleneck(seed=11, c=24, mid=40, out=48, size=14):
    """x [B, 24, 14, 14] -> 1x1 conv 24->40 + bias, Relu -> 3x3 conv 40->40 pad 1 + bias, Relu (40
    channels, off the 16-channel blocks: im2col, K = 360 in blocks of 180) -> 1x1 conv 40->24 +
    bias, + x, Relu (the residual in the epilogue) -> 1x1 conv 24->48 stride 2 (a subsampled
    copy first; no bias: a zero init). As matmuls the weight is on the left: 24 to 48 rows (not a
    multiple of the 14-row tile), 196 or 49 pixels (the last 32-column panel masked)."""
    rng = np.random.default_rng(seed)
    inits = {"w0": _w(rng, mid, c, 1, 1, scale=c ** -0.5), "b0": _w(rng, mid, scale=0.1),
             "w1": _w(rng, mid, mid, 3, 3, scale=(9 * mid) ** -0.5), "b1": _w(rng, mid, scale=0.1),
             "w2": _w(rng, c, mid, 1, 1, scale=mid ** -0.5), "b2": _w(rng, c, scale=0.1),
             "w3": _w(rng, out, c, 1, 1, scale=c ** -0.5)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="reduce"),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="spatial"),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="expand"),
             helper.make_node("Add", ["c2", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["y"], strides=[2, 2], name="downsample")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", c, size, size])
    return _model(nodes, "conv_bottleneck", [x],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", out, size // 2, size // 2])], inits)


# (the --conv-algorithms of a build, its kernel dispatches' shapes by batch-1 and batch-2 function)
CONV_ROUTES = {
    # every convolution on the convolution entry: 1x1 ones too (their 196 and 49 pixels fill the
    # entry's lanes), at batch 1 reading the image as the product's operand, at batch 2 image by
    # image (no transposes), the strided one gathering its columns
    "auto": ("auto", {"1x24x14x14_k1x1_s1x1_d1x1_p0x0", "1x40x14x14_k3x3_s1x1_d1x1_p1x1",
                      "1x40x14x14_k1x1_s1x1_d1x1_p0x0", "1x24x14x14_k1x1_s2x2_d1x1_p0x0",
                      "2x24x14x14_k1x1_s1x1_d1x1_p0x0", "2x40x14x14_k3x3_s1x1_d1x1_p1x1",
                      "2x40x14x14_k1x1_s1x1_d1x1_p0x0", "2x24x14x14_k1x1_s2x2_d1x1_p0x0"}),
    # without the convolution entry: each convolution a matmul w[F, K] x columns[K, pixels] on
    # the left-weight entry (the 3x3 one after im2col, K = 360 in blocks of 180)
    "matmuls": ("matmul,im2col,nchwc", {"40x196x24", "40x196x360", "24x196x40", "48x49x24",
                                        "40x392x24", "40x392x360", "24x392x40", "48x98x24"}),
}
# the batch-1 function's dispatch of each convolution, per route
CONV_NODES = {"auto": {"reduce": "1x24x14x14_k1x1_s1x1_d1x1_p0x0", "spatial": "1x40x14x14_k3x3_s1x1_d1x1_p1x1",
                       "expand": "1x40x14x14_k1x1_s1x1_d1x1_p0x0", "downsample": "1x24x14x14_k1x1_s2x2_d1x1_p0x0"},
              "matmuls": {"reduce": "40x196x24", "spatial": "40x196x360", "expand": "24x196x40",
                          "downsample": "48x49x24"}}


@pytest.mark.parametrize("route", list(CONV_ROUTES))
def test_convolutions_on_the_kernel_entries(tmp_path, route):
    """The bottleneck's convolutions on the kernel's convolution entry (implicit im2col,
    test_conv_kernel.py) or, without it, as matmuls on its left-weight entry; at batch 1 the
    bias, residual add and ReLU after each in its generated epilogue. Against onnxruntime at f32
    rounding: a bias, residual or row block read at the wrong place is off by the size of the
    values."""
    algorithms, expected = CONV_ROUTES[route]
    path = save(conv_bottleneck(), tmp_path / "conv.onnx")
    # x86-avx512 (an Intel core: the left-weight rewrite on) runs on any AVX-512 machine; the
    # dynamic-batch function's loops of static convolutions (test_conv_image_loop.py) left out:
    # they would add dispatches of these shapes with epilogues of their own
    assert compile_main([str(path), "--target", "x86-avx512", "--batch-sizes", "1,2", "--no-measure",
                         "--conv-algorithms", algorithms, "--disable-pass", "inferx-conv-image-loop",
                         "-o", str(tmp_path / "conv.ixa"), "-q"]) == 0
    manifest, report = artifact_json(tmp_path / "conv.ixa")
    left = {d["dispatch"]: d for d in report["dispatches"] if d["dispatch"].startswith(("inferx_f32l_", "inferx_f32c_"))}
    shapes = {name[len("inferx_f32l_"):].split("_e")[0] for name in left}
    assert shapes == expected, shapes
    fused = {name[len("inferx_f32l_"):].split("_e")[0]: d["fused"] for name, d in left.items() if "_e" in name}
    node = CONV_NODES[route]
    # batch 1: the bias (the init) in each epilogue but the last's (a zero init, only reshapes after
    # it); the ReLU after the 3x3 one and, on the convolution entry, after the first too (its
    # result is padded next, but the 3x3 convolution's kernel reads it unpadded; as matmuls it
    # stays IREE's, written into the padded buffer im2col reads); the residual add and ReLU
    # after the third
    assert {node["reduce"], node["spatial"], node["expand"]} <= set(fused), fused
    assert node["downsample"] not in fused, fused
    assert fused[node["expand"]].count("linalg.generic") == 2, fused
    assert "linalg.generic" in fused[node["spatial"]], fused
    assert ("linalg.generic" in fused[node["reduce"]]) == (route == "auto"), fused
    # each generated variant's object in the manifest (a rebuild with another C compiler can differ)
    kernels = manifest["compiler"]["c_kernels"]
    tags = {name.rsplit("_e", 1)[1] for name in left if "_e" in name}
    assert {f"f32_gemm_{tag}.c (generated)" for tag in tags} <= set(kernels), (tags, sorted(kernels))
    assert all(len(kernels[f"f32_gemm_{tag}.c (generated)"]["object_sha256"]) == 64 for tag in tags)
    model = inferx_compiler.load(str(tmp_path / "conv.ixa"), device="cpu")
    for batch, got, want in _batches(model, path, batches=(1, 2, 3)):
        assert got.shape == want.shape
        assert rel_l2(got, want) <= TOLERANCE, (batch, rel_l2(got, want))


def test_kernel_follows_the_target_record(tmp_path):
    """On a target whose record has f32_kernel off (x86-avx512-vnni, which names Zen 4 too, and the
    host record on an AMD core: measured no faster there) the matmuls stay IREE's, each with a
    remark saying why; on one with it on (the host record on an Intel core), on the kernel."""
    path = save(conv_bottleneck(), tmp_path / "conv.onnx")
    for target in ("cpu", "x86-avx512-vnni"):
        out = tmp_path / f"{target}.ixa"
        assert compile_main([str(path), "--target", target, "--batch-sizes", "1", "--no-measure", "-o", str(out),
                             "-q"]) == 0
        _, report = artifact_json(out)
        left = [d["dispatch"] for d in report["dispatches"] if d["dispatch"].startswith(("inferx_f32l_", "inferx_f32c_"))]
        declined = [d for d in report["decisions"] if d["pass"] == "inferx-f32-matmul"
                    and "Target.f32_kernel" in d["decision"] and d["function"] == "main$b1"]
        if get_target(target).f32_kernel:
            assert left and not declined, (target, left, declined)
        else:  # (the 3x3 convolution never reaches the pass there: im2col, a fourth matmul)
            assert not left and len(declined) == 4, (target, left, declined)
