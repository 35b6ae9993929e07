"""f32_gemm.c's held panels (the left and convolution entries' column panels a row block runs
over) in the three ways a tile call gets them: from the pool of held buffers (as the tile rule
sizes them, and wider tiles than one buffer takes: several groups a tile), from the worker's
stack when no slot is free (HELD_SLOTS=0), and with one slot shared by more threads than it
(HELD_SLOTS=1: one call holds it, the others fall back, claims and releases race). Each through
tools/bench/conv_kernel_bench.c, whose float64 reference checks the first and the last image: a
panel stored to the wrong columns, a group skipped or a slot used by two calls at once is off by
the size of the values, far above the 1e-5 allowed (the kernel sums in f32: ~1e-7)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from inferx_compiler.kernels import cpu_objects
from inferx_compiler.targets import get_target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "tools", "bench", "conv_kernel_bench.c")
KERNELS = os.path.join(ROOT, "inferx_compiler", "kernels")

pytestmark = [
    pytest.mark.skipif("avx512f" not in get_target("cpu").features, reason="this CPU has no AVX-512 (avx512f)"),
    pytest.mark.skipif(cpu_objects.c_compiler()[0] is None, reason="no C compiler for the kernel"),
]


@pytest.fixture(scope="module", params=[None, 0, 1], ids=["pool", "stack-only", "one-slot"])
def bench(request, tmp_path_factory):
    """The benchmark built with HELD_SLOTS as given (None: the kernel's own)."""
    cc = cpu_objects.c_compiler()[0]
    out = tmp_path_factory.mktemp("held") / "conv_bench"
    slots = [] if request.param is None else [f"-DHELD_SLOTS={request.param}"]
    built = subprocess.run(cc + ["-O2", "-mavx512f", "-mprfchw", "-fopenmp", *slots, "-I", KERNELS, BENCH, "-o",
                                 str(out), "-lm"], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"the C compiler cannot build the benchmark with OpenMP: {built.stderr[-300:]}")
    return str(out)


# (F C H K stride pad, IMAGES, JOINED, MT, NT): 1x1 over 64 channels (24 panels a buffer; 49
# joined panels in 2 tiles of 25: a tile of two groups), a 3x3 over 8 images of 10x10 (gathered,
# joined: 800 columns in one tile of 25 panels over a K block of 72), and the 7x7 3x3 joined
# layer at ResNet-50's width (a K block of 256: 6 panels a buffer; 13 panels in one tile).
SHAPES = [
    ("20 64 28 1 1 0", 2, 1, 28, 800),
    ("12 8 10 3 1 1", 8, 1, 14, 800),
    ("30 512 7 3 1 1", 8, 1, 42, 416),
]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape,images,joined,mt,nt", SHAPES, ids=["1x1", "3x3-gathered", "3x3-k256"])
def test_held_panels_match_the_reference(bench, shape, images, joined, mt, nt, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), IMAGES=str(images), MT=str(mt), NT=str(nt),
               RESIDUAL="1")
    if joined:
        env["JOINED"] = "1"
    run = subprocess.run([bench, *shape.split()], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    error = float(re.search(r"relative L2 (\S+)", run.stdout).group(1))
    assert error < 1e-5, run.stdout


# The pixel-rows layout (pixel_rows_tile: pixels as the rows, its sums in a held buffer or the
# stack's 8K floats): 64 filters over a 7x7 output in one tile (3,136 sums), 256 filters over
# 14x14 in tiles of all 196 pixels x 256 filters (50,176 sums: more than a held buffer's 49,152,
# so two passes from the pool, seven from the stack), and stride 2 over 2 images (the epilogue's
# rows i F.. for image i), each with a residual epilogue.
PIXEL_ROWS_SHAPES = [
    ("64 16 7 3 1 1", 1, 64, 49),
    ("256 16 14 3 1 1", 1, 256, 196),
    ("96 24 15 3 2 1", 2, 32, 30),
]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape,images,mt,nt", PIXEL_ROWS_SHAPES, ids=["7x7", "14x14-passes", "stride2"])
def test_pixel_rows_match_the_reference(bench, shape, images, mt, nt, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), IMAGES=str(images), MT=str(mt), NT=str(nt),
               RESIDUAL="1", PIXEL_ROWS="1")
    run = subprocess.run([bench, *shape.split()], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "pixel rows" in run.stdout, run.stdout
    error = float(re.search(r"relative L2 (\S+)", run.stdout).group(1))
    assert error < 1e-5, run.stdout
