"""Where the one-row int4 kernel's memory operations fall in its machine code, without a GPU.

    python tools/bench/sass_loads.py "" "max_registers=128" "words=1,ahead=1,max_registers=128"

Each argument is a form (tools/bench/gpu_chain_sweep.py's --forms syntax: DequantSpec overrides
of the build's one-row spec for a 4096 x 4096 layer in groups of 128 with the MLP's epilogue).
For each, the PTX Triton makes here is assembled for sm_90a with the ptxas Triton ships and
disassembled; printed: the registers, the instruction count, and the position of every global
load (LDG: W a 16-byte weight load, u16 a half, g32 a 32-bit word), shared-memory access and
barrier, and store. A tile whose weight loads come one or two at a time between its products
waits for memory several times; the order here is ptxas's, which the driver's JIT (what IREE
uses) follows closely but not necessarily exactly.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_chain_sweep import apply_form, gelu_epilogue  # noqa: E402

from inferx_compiler.kernels.triton_dequant import compile_kernel  # noqa: E402
from passes.dequant_matvec import matvec_spec  # noqa: E402

SHORT = {"LDG.E.128": "W", "LDG.E.U16": "u16", "LDG.E": "g32", "BAR.SYNC.DEFER_BLOCKING": "BAR"}
MEMORY = re.compile(r"\b(LDG[.A-Z0-9]*|BAR\.SYNC[.A-Z_]*|STG[.A-Z0-9]*|LDS[.A-Z0-9]*|STS[.A-Z0-9]*)\b")


def tools_dir() -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def sass(ptx: bytes, work: str) -> tuple[str, str]:
    """(ptxas -v's report, the disassembly) of `ptx` for sm_90a."""
    bin_dir = tools_dir()
    src, cubin = os.path.join(work, "k.ptx"), os.path.join(work, "k.cubin")
    with open(src, "wb") as f:
        f.write(ptx)
    report = subprocess.run([os.path.join(bin_dir, "ptxas"), "-arch=sm_90a", "-v", src, "-o", cubin],
                            capture_output=True, text=True, check=True).stderr
    listing = subprocess.run([os.path.join(bin_dir, "nvdisasm"), "-c", cubin], capture_output=True, text=True,
                             check=True).stdout
    return report, listing


def memory_positions(listing: str) -> list[str]:
    """`index:op` for each memory operation and barrier, over the kernel's instructions in order."""
    out, index = [], 0
    for line in listing.splitlines():
        if "/*" not in line or "*/" not in line:
            continue
        text = line.split("*/", 1)[1]
        match = MEMORY.search(text)
        if match:
            op = match.group(1)
            out.append(f"{index}:{SHORT.get(op, op)}")
        index += 1
    return out


def main(argv=None) -> int:
    forms = (argv if argv is not None else sys.argv[1:]) or [""]
    for text in forms:
        spec = apply_form(matvec_spec(1, 4096, 4096, "int4", 128, 132, 90, gelu_epilogue(4096, "f16")), text)
        with tempfile.TemporaryDirectory() as work:
            compiled = compile_kernel(spec, cache_dir=work)
            report, listing = sass(compiled.ptx, work)
        registers = re.search(r"Used (\d+) registers", report)
        positions = memory_positions(listing)
        count = sum(1 for line in listing.splitlines() if "/*" in line and "*/" in line and ";" in line)
        print(f"form {text or 'build'!r}: {registers.group(1) if registers else '?'} registers, {count} instructions")
        print("  " + " ".join(positions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
