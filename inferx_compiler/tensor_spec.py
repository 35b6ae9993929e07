"""Name, dtype and shape of one model input or output; dynamic dims carry their names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

Dim = Union[int, str]

# Element types narrower than a byte, or 8-bit floats: a model's interface may use them, but
# the compiled module carries their values in a wider container dtype that holds every value
# exactly (onnx_narrow_types.py rewrites the graph; the runtime converts at the boundary).
NARROW_CONTAINERS = {
    "float8_e4m3fn": "float32", "float8_e4m3fnuz": "float32", "float8_e5m2": "float32",
    "float8_e5m2fnuz": "float32", "float8_e8m0fnu": "float32", "float4_e2m1fn": "float32",
    "int4": "int8", "int2": "int8", "uint4": "uint8", "uint2": "uint8",
}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a TensorSpec dtype name (ml_dtypes' for bfloat16, float8, int4...)."""
    if name in NARROW_CONTAINERS or name == "bfloat16":
        import ml_dtypes  # noqa: F401 - registers the names with numpy

    return np.dtype(name)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # numpy dtype name: float32, int64, bool, ...
    shape: tuple[Dim, ...]

    @classmethod
    def from_value_info(cls, vi) -> "TensorSpec":
        import onnx

        tt = vi.type.tensor_type
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
        except Exception:
            from inferx_compiler.errors import ModelLoadError

            raise ModelLoadError(f"'{vi.name}' has ONNX element type "
                                 f"{onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type in onnx.TensorProto.DataType.values() else tt.elem_type}, "
                                 f"which inferx cannot take as a model input or output") from None
        if tt.elem_type == onnx.TensorProto.BFLOAT16:
            dtype = "bfloat16"
        dims: list[Dim] = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(d.dim_param)
            else:
                dims.append(f"{vi.name}_dim{i}")
        return cls(vi.name, dtype, tuple(dims))

    @property
    def dynamic_dims(self) -> list[str]:
        return [d for d in self.shape if isinstance(d, str)]

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, d: dict) -> "TensorSpec":
        return cls(d["name"], d["dtype"], tuple(d["shape"]))

    def format_shape(self) -> str:
        return "[" + ", ".join(str(d) for d in self.shape) + "]"
