"""The shim around dependencies' internals (inferx_compiler/internals.py): it works at the pinned
versions and refuses others with a message that names the package and what to install."""

from __future__ import annotations

import pytest

from inferx_compiler import internals
from inferx_compiler.internals import DependencyVersionError, check_version


def test_the_pinned_iree_compiler_is_the_one_installed():
    check_version("iree-base-compiler", internals.IREE_COMPILER_VERSION, "test")


def test_another_version_is_refused_with_what_to_install():
    with pytest.raises(DependencyVersionError) as e:
        check_version("iree-base-compiler", "3.13.0", "ctypes_dl._dylib", version_of=lambda d: "3.14.1")
    message = str(e.value)
    assert "iree-base-compiler" in message and "3.14.1" in message and "3.13.0" in message
    assert "ctypes_dl._dylib" in message and "Install iree-base-compiler==3.13.0" in message
    with pytest.raises(DependencyVersionError, match="not installed"):
        check_version("triton", "3.7.0", "knobs", version_of=lambda d: "not installed")


def test_compile_phases_through_the_shim(tmp_path):
    """A compile stopped at a phase and resumed from it (what every build does) works through it."""
    from iree.compiler import ir
    from iree.compiler.api import Session

    session = Session()
    session.set_flags("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu")
    text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { %b = arith.addf %a, %a : tensor<4xf32> return %b : tensor<4xf32> }"
    with session.context:
        module = ir.Module.parse(text)
    inv = session.invocation()
    inv.import_module(module.operation)
    internals.set_compile_phases(inv, "flow", None)
    assert inv.execute()
    assert "flow.dispatch" in str(inv.export_module())


def test_triton_line_info_is_restored():
    triton = pytest.importorskip("triton")
    knobs = triton.knobs.compilation
    before = knobs.disable_line_info
    with internals.triton_without_line_info():
        assert knobs.disable_line_info is True
    assert knobs.disable_line_info == before
