"""Check run-time feeds against the manifest before anything runs; say expected vs got."""

from __future__ import annotations

import numpy as np

from inferx_compiler.errors import InputValidationError
from inferx_compiler.tensor_spec import NARROW_CONTAINERS, TensorSpec


def validate_feeds(feeds: dict, specs: list[TensorSpec]) -> dict[str, np.ndarray]:
    """Return the feeds as contiguous numpy arrays, in the manifest's order; inputs of a narrow
    type (int4, float8...) converted to the container type the module takes them in."""
    if not isinstance(feeds, dict):
        raise InputValidationError(f"inputs must be a dict of name -> array, got {type(feeds).__name__}")
    expected = [s.name for s in specs]
    missing = [n for n in expected if n not in feeds]
    extra = [n for n in feeds if n not in expected]
    problems = []
    if missing:
        problems.append(f"missing input(s): {', '.join(missing)}")
    if extra:
        problems.append(f"unexpected input(s): {', '.join(extra)} (the model takes: {', '.join(expected)})")
    if problems:
        raise InputValidationError("; ".join(problems))
    arrays, dim_values = {}, {}
    for spec in specs:
        arr = np.asarray(feeds[spec.name])
        _check_one(spec, arr, dim_values)
        if spec.dtype in NARROW_CONTAINERS:  # exact: the container holds every value
            arr = arr.astype(NARROW_CONTAINERS[spec.dtype])
        arrays[spec.name] = np.asarray(arr, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    return arrays


def _check_one(spec: TensorSpec, arr: np.ndarray, dim_values: dict) -> None:
    if arr.dtype.name != spec.dtype:
        raise InputValidationError(
            f"input '{spec.name}': expected dtype {spec.dtype}, got {arr.dtype.name}")
    if arr.ndim != len(spec.shape):
        raise InputValidationError(
            f"input '{spec.name}': expected rank {len(spec.shape)} shape {spec.format_shape()}, "
            f"got rank {arr.ndim} shape {list(arr.shape)}")
    for axis, (want, got) in enumerate(zip(spec.shape, arr.shape)):
        if isinstance(want, int):
            if want != got:
                raise InputValidationError(
                    f"input '{spec.name}': expected shape {spec.format_shape()}, got {list(arr.shape)} "
                    f"(dim {axis} must be {want})")
        elif want in dim_values and dim_values[want][0] != got:
            other, size = dim_values[want][1], dim_values[want][0]
            raise InputValidationError(
                f"input '{spec.name}': dynamic dim '{want}' is {got} here but {size} in input '{other}'")
        else:
            dim_values.setdefault(want, (got, spec.name))


def strip_fixed_inputs(feeds: dict, fixed: dict) -> dict:
    """`feeds` without the inputs the artifact was built with fixed (--input-value): a caller may
    still pass them, but only at the values they were fixed to."""
    if not fixed or not isinstance(feeds, dict) or not any(name in feeds for name in fixed):
        return feeds
    kept = dict(feeds)
    for name, value in fixed.items():
        if name not in kept:
            continue
        given = np.asarray(kept.pop(name))
        if given.shape != value.shape or not np.array_equal(given, value):
            shown = value.ravel().tolist()
            raise InputValidationError(
                f"input '{name}' was fixed to {shown if value.size > 1 else shown[0]} when this artifact was "
                f"built (--input-value), got {given.ravel().tolist()[:8]}; rebuild with that value to use it")
    return kept
