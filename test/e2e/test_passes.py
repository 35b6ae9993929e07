"""The pass registry: one list, names that match, docstrings, a lit file per pass, options."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest

from inferx_compiler.errors import PassOptionError
from inferx_compiler.passes.infra.pipeline import format_pipeline, parse_pipeline
from inferx_compiler.passes.infra.registry import get_all_passes

LIT_PASSES = os.path.join(os.path.dirname(__file__), "..", "lit", "passes")


@pytest.mark.parametrize("key", sorted(get_all_passes()))
def test_registry_key_is_pass_name(key):
    cls = get_all_passes()[key]()
    assert cls.name == key
    assert cls.level in ("graph", "iree", "any")
    # a docstring of its own (dataclasses write "Name(field=...)" into a class that has none)
    assert cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("), f"{key} has no docstring"
    module_doc = sys.modules[cls.__module__].__doc__ or ""
    assert key in module_doc, f"{key}: its module's docstring does not say what it rewrites ({cls.__module__})"
    assert os.path.exists(os.path.join(LIT_PASSES, f"{key}.mlir")), f"no lit test for {key}"
    assert os.path.exists(os.path.join(LIT_PASSES, f"{key}_negative.mlir")), f"no negative lit test for {key}"


@pytest.mark.parametrize("key", sorted(get_all_passes()))
def test_every_pass_is_a_frozen_dataclass_of_its_own(key):
    """Options are the dataclass fields: a pass class not decorated itself would inherit its base's
    fields and silently drop an option added to it."""
    cls = get_all_passes()[key]()
    assert "__dataclass_fields__" in cls.__dict__, f"{cls.__name__} is not decorated with @dataclass"
    assert cls.__dataclass_params__.frozen, f"{cls.__name__} is not frozen"


def test_disable_pass_names_come_from_the_passes():
    """--disable-pass takes what the passes declare (optional, or a named part), nothing else."""
    from inferx_compiler.passes.infra.registry import disableable

    names = disableable()
    declared = {cls.name for cls in (f() for f in get_all_passes().values()) if cls.optional}
    parts = {p for f in get_all_passes().values() for p in f().parts}
    assert names == declared | parts
    assert "inferx-hopper-epilogue" in parts and "inferx-dequant-matvec" in parts
    assert "inferx-bind-parameters" not in names and "inferx-quantize-contractions" not in names
    for f in get_all_passes().values():  # a part names a bool option of its pass
        cls = f()
        for option in cls.parts.values():
            assert option in {fl.name for fl in dataclasses.fields(cls)}


def test_options_are_typed_and_round_trip():
    elements = parse_pipeline("builtin.module(canonicalize,inferx-annotate-precision{precision=bf16 min-flops=1000},cse)")
    p = elements[1].inferx_pass
    assert p.precision == "bf16" and p.min_flops == 1000
    assert format_pipeline(elements) == (
        "builtin.module(canonicalize,inferx-annotate-precision{precision=bf16 min-flops=1000 "
        "convolutions=all from-plan=false others=f32 stored-weights=false},cse)")


@pytest.mark.parametrize("text,message", [
    ("inferx-annotate-precision{precision=f8}", "valid values"),
    ("inferx-annotate-precision{min-flops=lots}", "expects int"),
    ("inferx-annotate-precision{bogus=1}", "has no option 'bogus'"),
    ("inferx-nope", "unknown inferx pass"),
    ("inferx-annotate-precision{precision}", "key=value"),
])
def test_bad_pass_spelling(text, message):
    with pytest.raises(PassOptionError, match=message):
        parse_pipeline(text)


def test_list_passes_cli(capsys):
    from inferx_compiler.cli.opt import main

    assert main(["--list-passes"]) == 0
    out = capsys.readouterr().out
    for key in get_all_passes():
        assert key in out
