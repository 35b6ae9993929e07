"""The pass registry: one list, names that match, docstrings, a lit file per pass, options."""

from __future__ import annotations

import os

import pytest

from inferx_compiler.errors import PassOptionError
from inferx_compiler.passes.infra.pipeline import format_pipeline, parse_pipeline
from inferx_compiler.passes.infra.registry import get_all_passes

LIT_PASSES = os.path.join(os.path.dirname(__file__), "..", "lit", "passes")


@pytest.mark.parametrize("key", sorted(get_all_passes()))
def test_registry_key_is_pass_name(key):
    cls = get_all_passes()[key]()
    assert cls.name == key
    assert cls.level in ("graph", "iree")
    assert cls.__doc__ and cls.__doc__.strip(), f"{key} has no docstring"
    assert os.path.exists(os.path.join(LIT_PASSES, f"{key}.mlir")), f"no lit test for {key}"
    assert os.path.exists(os.path.join(LIT_PASSES, f"{key}_negative.mlir")), f"no negative lit test for {key}"


def test_options_are_typed_and_round_trip():
    elements = parse_pipeline("builtin.module(canonicalize,inferx-annotate-precision{precision=bf16 min-flops=1000},cse)")
    p = elements[1].inferx_pass
    assert p.precision == "bf16" and p.min_flops == 1000
    assert format_pipeline(elements) == (
        "builtin.module(canonicalize,inferx-annotate-precision{precision=bf16 min-flops=1000 "
        "convolutions=all from-plan=false others=f32},cse)")


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
