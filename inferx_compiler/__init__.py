"""inferx-compiler: compile ONNX / PyTorch models ahead of time for one target, then run them.

    inferx_compiler.compile_onnx("model.onnx", target="cpu", output="model.ixa")
    sess = inferx_compiler.load("model.ixa", device="cpu")
    outputs = sess.run({"x": x})
"""

from __future__ import annotations

import os as _os

from inferx_compiler.versions import __version__  # noqa: E402,F401


def _map_checkout_folders() -> None:
    """In a source checkout, find `inferx_compiler.passes`, `.runtime` and `.dialects` in the
    repository's top-level folders, where an installed package has them as subpackages
    (pyproject.toml's package-dir). One import path for both: `python -m pytest` or a tool run
    from a checkout imports the same modules as the installed package."""
    root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    mapped = ("passes", "runtime", "dialects")
    if _os.path.isfile(_os.path.join(root, "pyproject.toml")) and all(
            _os.path.isfile(_os.path.join(root, name, "__init__.py")) for name in mapped):
        __path__.append(root)  # noqa: F821 (a package's own __path__)


_map_checkout_folders()


def compile_onnx(model_path: str, target: str, output: str, *, precision: str = "fp32",
                 quiet: bool = True):
    """Compile an ONNX file into an `.ixa` artifact at `output`; returns its Manifest."""
    from inferx_compiler.driver import CompileOptions, compile_onnx_file, write_result
    from inferx_compiler.log import BuildLog

    result = compile_onnx_file(model_path, CompileOptions(target=target, precision=precision),
                               BuildLog(quiet=quiet))
    write_result(result, output)
    return result.manifest


def compile(module, example_inputs, target: str, output: str, *, precision: str = "fp32",
            dynamic_shapes=None, quiet: bool = True):
    """Compile a torch.nn.Module (through torch-mlir's FX importer) into an `.ixa` artifact."""
    from inferx_compiler.driver import compile_torch_module

    return compile_torch_module(module, example_inputs, target=target, output=output,
                                precision=precision, dynamic_shapes=dynamic_shapes, quiet=quiet)


def load(path: str, device: str | None = None, verify: str | None = None, weights: str | None = None):
    """Load an `.ixa` artifact; returns a session with `run(feeds) -> dict` (a generation model: a
    GenerationSession with `generate(prompt)`). `verify`: which members' sha256 are checked (all,
    skip-weights, none; default $INFERX_VERIFY_ARTIFACT or all). `weights`: the model folder a
    generation artifact built with --weights reference reads its safetensors files from."""
    from inferx_compiler.runtime.session import load as _load

    return _load(path, device, verify=verify, weights=weights)
