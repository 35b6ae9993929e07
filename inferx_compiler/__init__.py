"""inferx-compiler: compile ONNX / PyTorch models ahead of time for one target, then run them.

    inferx_compiler.compile_onnx("model.onnx", target="cpu", output="model.ixa")
    sess = inferx_compiler.load("model.ixa", device="cpu")
    outputs = sess.run({"x": x})
"""

from __future__ import annotations

__version__ = "0.1.0"


def compile_onnx(model_path: str, target: str, output: str, *, precision: str = "fp32",
                 quiet: bool = True):
    """Compile an ONNX file into an `.ixa` artifact at `output`; returns its Manifest."""
    from .driver import CompileOptions, compile_onnx_file, write_result
    from .log import BuildLog

    result = compile_onnx_file(model_path, CompileOptions(target=target, precision=precision),
                               BuildLog(quiet=quiet))
    write_result(result, output)
    return result.manifest


def compile(module, example_inputs, target: str, output: str, *, precision: str = "fp32",
            dynamic_shapes=None, quiet: bool = True):
    """Compile a torch.nn.Module (through torch-mlir's FX importer) into an `.ixa` artifact."""
    from .torch_frontend import compile_torch_module

    return compile_torch_module(module, example_inputs, target=target, output=output,
                                precision=precision, dynamic_shapes=dynamic_shapes, quiet=quiet)


def load(path: str, device: str | None = None, verify: str | None = None):
    """Load an `.ixa` artifact; returns a session with `run(feeds) -> dict`. `verify`: which
    members' sha256 are checked (all, skip-weights, none; default $INFERX_VERIFY_ARTIFACT or all)."""
    from .runtime.session import load as _load

    return _load(path, device, verify=verify)
