"""The package's shape as a contract: no import cycles (imports inside functions counted), the
layers kept, one import path for a checkout and an installed package.

Layers, top to bottom: the CLI; the driver and the tuners (driver, build, build_plan, tuning);
the IREE backend; the frontends and precision decisions; the passes; the data everything shares
(targets, errors, the artifact format, the tuning database format). The runtime is apart: it
loads artifacts and never imports the compiler.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from import_graph import REPO, cycles, import_graph, within

P = "inferx_compiler."
GRAPH = import_graph()

# what the runtime may import of the package besides itself: the artifact format and its errors
# (file and weight formats, numpy only: artifact.safetensors, precision.quantization, with which
# the runtime checks a referenced model folder and quantizes a referenced int8/int4 build at load)
RUNTIME_MAY_IMPORT = ("runtime", "errors", "tensor_spec", "versions", "artifact.archive", "artifact.safetensors",
                      "precision.quantization")
# (layer, what it must never import)
FORBIDDEN = [
    (("passes", "dialects"), ("driver", "build", "build_plan", "cli", "backend", "frontend", "runtime",
                              "tuning.cpu_tuning", "tuning.cuda_tuning", "tuning.profiling", "artifact.buckets",
                              "artifact.build_cache", "precision.precision_plan", "precision.calibration")),
    (("frontend",), ("driver", "build", "build_plan", "cli", "backend", "tuning", "runtime")),
    (("precision",), ("driver", "build_plan", "cli", "backend", "tuning", "runtime", "passes")),
    (("backend",), ("driver", "build", "build_plan", "cli", "tuning", "frontend")),
    (("targets", "errors", "tensor_spec", "versions", "log", "artifact.archive", "tuning.tuning_db"),
     ("driver", "build", "build_plan", "cli", "backend", "frontend", "passes", "precision", "runtime")),
]


def _qualified(names) -> list[str]:
    return [P + n for n in names]


def test_the_graph_sees_the_whole_package():
    """The scan covers the user's folders under their installed names (a test that saw nothing
    would pass every contract below)."""
    for module in ("inferx_compiler.driver", "inferx_compiler.passes.f32_matmul",
                   "inferx_compiler.passes.infra.registry", "inferx_compiler.runtime.session",
                   "inferx_compiler.dialects.inferx", "inferx_compiler.frontend.onnx_import"):
        assert module in GRAPH
    assert "inferx_compiler.frontend.graph_lowering" in GRAPH["inferx_compiler.driver"]
    # imports inside functions count: the driver imports the IREE backend only inside functions
    assert "inferx_compiler.backend.iree_backend" in GRAPH["inferx_compiler.driver"]


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, "import cycles (move what both sides need to a leaf module):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_cycle_detection_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_runtime_never_imports_the_compiler():
    bad = {m: sorted(d for d in deps if not within(d, _qualified(RUNTIME_MAY_IMPORT)))
           for m, deps in GRAPH.items() if within(m, [P + "runtime"])}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"runtime modules importing the compiler: {bad}"


@pytest.mark.parametrize("layer,forbidden", FORBIDDEN, ids=[",".join(layer) for layer, _ in FORBIDDEN])
def test_layers(layer, forbidden):
    bad = {m: sorted(d for d in deps if within(d, _qualified(forbidden)))
           for m, deps in GRAPH.items() if within(m, _qualified(layer))}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"imports across the layers: {bad}"


def test_nothing_imports_the_cli():
    bad = {m: sorted(d for d in deps if within(d, [P + "cli"]))
           for m, deps in GRAPH.items() if not within(m, [P + "cli"])}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"the CLI imported from outside it: {bad}"


def test_a_checkout_imports_as_the_installed_package():
    """From the repository root (what `python -m pytest` and the tools see), the user's folders
    are inferx_compiler's subpackages: `inferx_compiler.passes` is <repo>/passes."""
    code = ("import inferx_compiler.passes.infra.registry as r, inferx_compiler.runtime.session as s, "
            "inferx_compiler.dialects as d; print(r.__file__); print(s.__file__); print(d.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr
    paths = out.stdout.split()
    assert paths == [os.path.join(REPO, "passes", "infra", "registry.py"),
                     os.path.join(REPO, "runtime", "session.py"),
                     os.path.join(REPO, "dialects", "__init__.py")]
