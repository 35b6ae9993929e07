# lit configuration for inferx's FileCheck tests. Tools come from PATH: `inferx-opt`
# (this project's console script) and `filecheck` (the Python FileCheck package).
import os
import shutil

import lit.formats

config.name = "inferx"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Output"]
config.test_source_root = os.path.dirname(__file__)

for var in ("PATH", "PYTHONPATH", "HOME", "TMPDIR", "VIRTUAL_ENV"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

python = shutil.which("python3") or shutil.which("python")
config.substitutions.append(("%python", python))

for tool in ("inferx-opt", "filecheck"):
    if shutil.which(tool) is None:
        lit_config.fatal(f"'{tool}' is not on PATH: install the project with pip install '.[test]'")

# inferx-hopper-matmul compiles its kernels with Triton (the `hopper` extra, installed by the test
# command); without it those tests report UNSUPPORTED rather than pass unchecked.
import importlib.util  # noqa: E402

if importlib.util.find_spec("triton") is not None:
    config.available_features.add("triton")

# The int8 VNNI kernel (inferx_compiler/kernels/u8s8_gemm.c) is compiled by the system's C
# compiler; without one the pass declines it (tested too), and the positive tests are UNSUPPORTED.
if any(shutil.which(cc) for cc in ("cc", "gcc", "clang")):
    config.available_features.add("c-compiler")
