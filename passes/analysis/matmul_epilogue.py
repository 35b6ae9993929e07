"""The elementwise work after a matmul that its kernel can finish (inferx-hopper-matmul's epilogues).

After torch-mlir a projection's product goes through a chain of small ops before anything else
reads it: reshapes, the bias add, an activation (GELU is five generics, reading the biased value
twice), a residual add, transposes into attention heads, the f16 cast for the next matmul.
IREE runs that chain as one more kernel, which reads the f32 product back from memory; on a
launch-bound model that kernel costs more than its arithmetic.

`fusible_epilogue(matmul)` grows, in program order, the set of ops that compute only from the
product and from values that do not depend on it:
  - tensor.expand_shape / tensor.collapse_shape, linalg.transpose: the same elements at other
    coordinates;
  - linalg.generic ops with parallel loops only, one result, and a body of float arithmetic
    (`triton_matmul.EPILOGUE_OPS`), whose other operands are read through projected
    permutations (bias vectors, residuals, scalars);
and keeps the largest prefix of them with a single result used outside (the value the kernel
will store), which is not padded next (see _padded). Every value is followed as coordinates of
the product's (m, n): each coordinate is a mixed-radix number of "digits" (m // div) % size or
(n // div) % size, so any reshape, transpose and broadcast keeps it exact, and a tensor's
element offset separates into a part from m and a part from n (`triton_matmul.Offsets`). An operand that is itself a broadcast (or
reshape) of a smaller tensor is read from that tensor.

The result is an `EpiloguePlan`: the kernel's `Epilogue`, the operand values it reads, the ops it
replaces and the value they computed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from inferx_compiler.kernels.triton_matmul import EPILOGUE_OPS, POINTER_TYPES, Epilogue, EpilogueInput, Offsets
from inferx_compiler.passes.support.iree_ir import constant_scalar, defining_op, spatial_padding, zero_padding
from inferx_compiler.passes.analysis.linalg_analysis import all_parallel, indexing_maps

# A digit: (source "m" or "n", div, size); a coordinate: its digits, most significant first.
Coord = tuple

_BODY_OPS = {
    "arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
    "arith.maximumf": "max", "arith.minimumf": "min", "arith.maxnumf": "max", "arith.minnumf": "min",
    "arith.negf": "neg", "arith.select": "select", "math.erf": "erf", "math.exp": "exp", "math.tanh": "tanh",
    "math.sqrt": "sqrt", "math.rsqrt": "rsqrt", "math.log": "log", "math.absf": "abs",
}
_SHAPE_OPS = ("tensor.expand_shape", "tensor.collapse_shape", "linalg.transpose")


@dataclasses.dataclass
class EpiloguePlan:
    epilogue: Epilogue
    operands: list  # the values the kernel reads for epilogue.inputs, in order
    ops: list  # the ops it replaces, in program order
    result: object  # the value they computed (what the kernel now writes)
    fused: list  # op names, for the report

    def replace(self, matmul, result) -> None:
        """Make `result` (the kernel's value of plan.result) stand for the plan's ops and the
        matmul, and erase them."""
        self.result.replace_all_uses_with(result)
        for op in reversed(self.ops):
            op.erase()
        matmul.erase()


class _Declined(Exception):
    pass


def _normalize(coord: Coord) -> Coord:
    """Drop size-1 digits and merge neighbours that are one digit of the same source."""
    out = []
    for digit in coord:
        if digit[2] == 1:
            continue
        if out and out[-1][0] == digit[0] and out[-1][1] == digit[1] * digit[2]:
            src, _, size = out.pop()
            digit = (src, digit[1], size * digit[2])
        out.append(digit)
    return tuple(out)


def _split(coord: Coord, sizes) -> list:
    """`coord` (a dimension of sizes' product) as the coordinates of dimensions `sizes`."""
    digits = list(_normalize(coord))
    parts = []
    for size in reversed(list(sizes)):
        need, part = size, []
        while need > 1:
            if not digits:
                raise _Declined("a reshape does not line up with the product's rows and columns")
            src, div, width = digits.pop()
            if width <= need:
                if need % width:
                    raise _Declined("a reshape splits the product's rows or columns unevenly")
                part.insert(0, (src, div, width))
                need //= width
            else:
                if width % need:
                    raise _Declined("a reshape splits the product's rows or columns unevenly")
                part.insert(0, (src, div, need))
                digits.append((src, div * need, width // need))
                need = 1
        parts.insert(0, tuple(part))
    if digits:
        raise _Declined("a reshape does not line up with the product's rows and columns")
    return parts


def _expanded(coords: list, groups: list, shape: list) -> list:
    """Coordinates of an expand_shape's result (`shape`) from its source's `coords`."""
    out = []
    for coord, group in zip(coords, groups):
        out += _split(coord, [shape[i] for i in group])
    return out


def _collapsed(coords: list, groups: list) -> list:
    """Coordinates of a collapse_shape's result from its source's `coords`."""
    return [_normalize(sum((coords[i] for i in group), ())) for group in groups]


def _reassociation(op) -> list:
    from iree.compiler import ir

    return [[ir.IntegerAttr(i).value for i in group] for group in ir.ArrayAttr(op.attributes["reassociation"])]


def _static(value) -> bool:
    """A value the kernel can address: a scalar, or a tensor of static shape."""
    from iree.compiler import ir

    return not isinstance(value.type, ir.ShapedType) or value.type.has_static_shape


def _shape(value) -> list:
    return list(value.type.shape)


def _offsets(coords: list, shape: list) -> Offsets:
    """The element offset of a row-major tensor of `shape` at these per-dimension coordinates."""
    rows, cols = [], []
    stride = 1
    for coord, extent in reversed(list(zip(coords, shape))):
        weight = stride
        for src, div, size in reversed(_normalize(coord)):
            (rows if src == "m" else cols).append((div, size, weight))
            weight *= size
        stride *= extent
    return Offsets(tuple(sorted(rows, reverse=True)), tuple(sorted(cols, reverse=True)))


def _map_results(affine_map) -> list:
    """Per result of a projected map: the loop index it reads, or None for a constant 0."""
    from iree.compiler import ir

    out = []
    for expr in affine_map.results:
        expr = expr.maybe_downcast()
        if isinstance(expr, ir.AffineDimExpr):
            out.append(expr.position)
        elif isinstance(expr, ir.AffineConstantExpr) and expr.value == 0:
            out.append(None)
        else:
            raise _Declined(f"an operand is read through {affine_map}, not a projected permutation")
    return out


def _coords_through(affine_map, loops: list) -> list:
    return [() if d is None else loops[d] for d in _map_results(affine_map)]


class _Builder:
    """The epilogue under construction: coordinates and expression names of absorbed values.
    With `add_init`, the matmul's init is added to the product as an epilogue input (read from
    the tensor it broadcasts, for a bias), instead of being read whole by the kernel."""

    def __init__(self, matmul, add_init: bool, product: Optional[tuple] = None):
        if product is None:
            m, n = _shape(matmul.results[0])
            coords = [(("m", 1, m),), (("n", 1, n),)]
        else:
            m, n, coords = product
        self.m, self.n = m, n
        self.body: list = []
        self.inputs: list = []  # (value, EpilogueInput)
        self.ops: list = []
        self.fused: list = []
        name = "acc"
        if add_init:
            name = self._emit("add", ("acc", self._input(matmul.operands[2], coords)))
        self.values = {matmul.results[0]: (coords, name)}

    # -- absorbing one op ---------------------------------------------------------------
    def absorb(self, op) -> None:
        if not all(_static(v) for v in list(op.operands) + list(op.results)):
            raise _Declined(f"{op.name} with a dynamic shape")
        if op.name in _SHAPE_OPS:
            coords, name = self.values[op.operands[0]]
            result = self._reshaped(op, coords)
            self.values[op.results[0]] = (result, name)
        elif op.name == "linalg.generic":
            self._generic(op)
        else:
            raise _Declined(f"{op.name} is not elementwise")
        self.ops.append(op)
        self.fused.append(op.name)

    def _reshaped(self, op, coords: list) -> list:
        from iree.compiler import ir

        if op.name == "linalg.transpose":
            perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            return [coords[p] for p in perm]
        if op.name == "tensor.expand_shape":
            return _expanded(coords, _reassociation(op), _shape(op.results[0]))
        return _collapsed(coords, _reassociation(op))

    def _generic(self, op) -> None:
        if not all_parallel(op) or len(op.results) != 1:
            raise _Declined("a reduction or several results")
        maps = indexing_maps(op)
        inputs = list(op.operands)[:len(maps) - 1]
        extents = self._loop_extents(op, maps)
        loops = self._loops(inputs, maps, extents)
        block = op.regions[0].blocks[0]
        if any(True for _ in block.arguments[len(inputs)].uses):
            raise _Declined("the body reads its output")
        names = {}
        for arg, value, amap in zip(block.arguments, inputs, maps):
            if value in self.values:
                coords, name = self.values[value]
                if [_normalize(c) for c in _coords_through(amap, loops)] != [_normalize(c) for c in coords]:
                    raise _Declined("the product is read at two different points")
                names[arg] = name
            else:
                names[arg] = self._input(value, _coords_through(amap, loops))
        result = self._body(block, names)
        out_coords = _coords_through(maps[-1], loops)
        self.values[op.results[0]] = (out_coords, result)

    def _loop_extents(self, op, maps) -> list:
        extents = [None] * maps[0].n_dims
        for value, amap in zip(op.operands, maps):
            for d, extent in zip(_map_results(amap), _shape(value)):
                if d is not None:
                    extents[d] = extent
        return extents

    def _loops(self, inputs, maps, extents) -> list:
        """Each loop's coordinate, from the first absorbed operand that reads the product."""
        for value, amap in zip(inputs, maps):
            if value not in self.values:
                continue
            coords, _ = self.values[value]
            loops = [None] * len(extents)
            for d, coord in zip(_map_results(amap), coords):
                if d is None:
                    if _normalize(coord):
                        raise _Declined("the product is read at a constant index")
                    continue
                loops[d] = coord
            for i, coord in enumerate(loops):
                if coord is None:
                    if extents[i] != 1:
                        raise _Declined("the product is broadcast over a new loop")
                    loops[i] = ()
            return loops
        raise _Declined("no operand is the product")

    def _input(self, value, coords: list) -> str:
        element_type = str(value.type.element_type)
        if element_type not in POINTER_TYPES:
            raise _Declined(f"an operand of element type {element_type}")
        if not _static(value):
            raise _Declined("an operand with a dynamic shape")
        value, coords = _smallest_source(value, coords)
        fill = defining_op(value, ("linalg.fill",))
        splat = constant_scalar(fill.operands[0] if fill is not None else value)
        if splat is not None and math.isfinite(splat):  # one value everywhere: a literal
            return self._emit("const", (repr(float(splat)), element_type))
        entry = EpilogueInput(str(value.type.element_type), _offsets(coords, _shape(value)))
        for i, (known, known_entry) in enumerate(self.inputs):
            if known == value and known_entry == entry:
                return f"x{i}"
        self.inputs.append((value, entry))
        return f"x{len(self.inputs) - 1}"

    def _body(self, block, names: dict) -> str:
        from iree.compiler import ir

        for inner in block.operations:
            if inner.name == "linalg.yield":
                return self._name(inner.operands[0], names)
            if inner.name == "arith.constant":
                names[inner.results[0]] = self._constant(inner)
                continue
            op = _BODY_OPS.get(inner.name)
            if inner.name in ("arith.truncf", "arith.extf"):
                op = f"cast:{inner.results[0].type}"
            elif inner.name == "arith.cmpf":
                predicates = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
                              "ult", "ule", "une", "uno", "true"]
                op = f"cmp:{predicates[ir.IntegerAttr(inner.attributes['predicate']).value]}"
            if op is None or op not in EPILOGUE_OPS:
                raise _Declined(f"{inner.name} in an elementwise body")
            args = tuple(self._name(v, names) for v in inner.operands)
            names[inner.results[0]] = self._emit(op, args)
        raise _Declined("a body without linalg.yield")

    def _name(self, value, names: dict) -> str:
        if value in names:
            return names[value]
        const = defining_op(value, ("arith.constant",))
        if const is not None:
            names[value] = self._constant(const)
            return names[value]
        raise _Declined(f"the body uses a {value.type} value from outside it")

    def _constant(self, op) -> str:
        from iree.compiler import ir

        element_type = str(op.results[0].type)
        attr = op.attributes["value"]
        if element_type not in POINTER_TYPES or not isinstance(attr, ir.FloatAttr) or not math.isfinite(attr.value):
            raise _Declined(f"a constant {attr}")
        return self._emit("const", (repr(float(attr.value)), element_type))

    def _emit(self, op: str, args: tuple) -> str:
        name = f"v{len(self.body)}"
        self.body.append((name, op, args))
        return name

    # -- the result ---------------------------------------------------------------------
    def plan(self, result) -> EpiloguePlan:
        coords, name = self.values[result]
        element_type = str(result.type.element_type)
        if element_type not in POINTER_TYPES:
            raise _Declined(f"the result's element type {element_type}")
        if math.prod(_shape(result)) != self.m * self.n:
            raise _Declined("the result is not one element per product element")
        epilogue = Epilogue(tuple(entry for _, entry in self.inputs), tuple(self.body), name, element_type,
                            _offsets(coords, _shape(result)))
        return EpiloguePlan(epilogue, [v for v, _ in self.inputs], list(self.ops), result, list(self.fused))


def _smallest_source(value, coords: list):
    """Follow an operand back through reshapes and broadcast copies to the smallest tensor that
    holds its elements (a bias broadcast to the output's shape is read as the bias vector)."""
    from iree.compiler import ir

    while True:
        producer = defining_op(value)
        if producer is None:
            return value, coords
        try:
            # (the source of an expand_shape is its result collapsed, and the other way round)
            if producer.name == "tensor.expand_shape":
                coords, value = _collapsed(coords, _reassociation(producer)), producer.operands[0]
                continue
            if producer.name == "tensor.collapse_shape":
                source = producer.operands[0]
                coords, value = _expanded(coords, _reassociation(producer), _shape(source)), source
                continue
            if producer.name == "linalg.broadcast":  # the result's `dimensions` are new
                added = set(ir.DenseI64ArrayAttr(producer.attributes["dimensions"]))
                coords = [c for i, c in enumerate(coords) if i not in added]
                value = producer.operands[0]
                continue
            if producer.name == "linalg.generic" and _is_copy(producer):
                maps = indexing_maps(producer)
                loops = [None] * maps[1].n_dims
                for d, coord in zip(_map_results(maps[1]), coords):
                    if d is not None:
                        loops[d] = coord
                if not isinstance(producer.operands[0].type, ir.RankedTensorType):
                    return value, coords  # a splat of a scalar: read as it is
                loops = [() if c is None else c for c in loops]
                coords, value = _coords_through(maps[0], loops), producer.operands[0]
                continue
        except _Declined:
            pass
        return value, coords


def _is_copy(op) -> bool:
    """A generic that yields its one input unchanged (a broadcast, transpose or copy)."""
    if len(op.operands) != 2 or len(op.results) != 1 or not all_parallel(op):
        return False
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    return (len(body) == 1 and body[0].operands[0] == block.arguments[0]
            and op.operands[0].type.element_type == op.results[0].type.element_type)


def fusible_epilogue(matmul, add_init: bool = False, product: Optional[tuple] = None, accept=None
                     ) -> tuple[Optional[EpiloguePlan], str]:
    """The epilogue of `matmul` (a static linalg.matmul with an f32 result) its kernel can run,
    or (None, why not) when not even its first consumer can be absorbed. `add_init`: the init is
    not a zero fill; the epilogue adds it (see _Builder). `product`: (m, n, coordinates) for
    another op computing an [m, n] product, its result's coordinates one digit tuple a dim (a
    convolution's [images, F, OH, OW] as rows (image, f) and columns (oh, ow)). `accept(plan)`:
    "" when the kernel can run the plan, else why not; a plan it refuses is shortened, op by op,
    as one the builder refuses is (a transpose after a bias and ReLU: the bias and ReLU)."""
    try:
        builder = _Builder(matmul, add_init, product)
    except _Declined as e:
        return None, f"the init: {e}"
    block_ops = _ops_after(matmul)
    tainted: set = set()
    absorbed: list = []
    states: list = []  # the builder's state before each absorbed op (to back off)
    why = "the product is not read by an elementwise op"
    for op in block_ops:
        operands = list(op.operands)
        reads_product = any(v in builder.values for v in operands)
        if any(v in tainted for v in operands) or (reads_product and op.name not in _SHAPE_OPS + ("linalg.generic",)):
            tainted.update(op.results)
            continue
        if not reads_product:
            continue
        snapshot = _snapshot(builder)
        try:
            builder.absorb(op)
            absorbed.append(op)
            states.append(snapshot)
        except _Declined as e:
            _restore(builder, snapshot)
            tainted.update(op.results)
            if not absorbed:
                why = str(e)
        if _done(builder, absorbed, tainted):
            break
    # keep the longest prefix whose values are read outside it through one value only
    while absorbed or add_init:
        outside = _read_outside(builder, absorbed, matmul)
        last = absorbed[-1].results[0] if absorbed else matmul.results[0]
        if absorbed and _padded(last):
            why = "the result of the ops after it is padded next (IREE writes it into the padded buffer)"
        elif len(outside) == 1 and outside[0] == last:
            try:
                plan = builder.plan(outside[0])
                why = accept(plan) if accept is not None else ""
                if not why:
                    return plan, ""
            except _Declined as e:
                why = str(e)
        if not absorbed:
            break
        absorbed.pop()
        _restore(builder, states.pop())
    return None, why


def _padded(value) -> bool:
    """Whether a tensor.pad reads `value`. IREE writes a value it computes itself straight into
    the padded buffer; an external kernel's result is copied there (a strided copy per call,
    measured on the H200 at ResNet-50 b8: 0.14 ms a call). So the kernel leaves the last op before
    a pad to IREE. Not a pad that only our CPU kernels read, which fold it away: convolutions
    marked for the convolution entry, or max poolings inferx-pool-kernel takes."""
    return any(use.owner.name == "tensor.pad" and not _folded_into_kernel(use.owner) for use in value.uses)


def _folded_into_kernel(pad) -> bool:
    """Whether one of our CPU kernels will read the pad's source instead of the pad: a zero pad
    read only by convolutions marked for the convolution entry (inferx-f32-matmul folds it), or
    a -inf pad read only by max poolings inferx-pool-kernel takes (ResNet-50's stem: its ReLU
    then runs in the stem convolution's epilogue, not in a dispatch of its own over 8x64x112x112
    at batch 8). Should that pass not run after all, the pad copies the kernel's result: right,
    only slower."""
    from inferx_compiler.passes import pool_kernel
    from inferx_compiler.passes.conv_strategy import marked_for_kernel

    padded = pad.results[0]
    users = [use.owner for use in padded.uses]
    if not users:
        return False
    if zero_padding(padded)[0] != padded and all(marked_for_kernel(u) for u in users):
        return True
    source, pads = spatial_padding(padded, -math.inf)
    return source != padded and all(u.name == pool_kernel.POOLING and u.operands[0] == padded
                                    and pool_kernel.declined(u, source, pads) is None for u in users)


def _ops_after(matmul) -> list:
    ops, seen = [], False
    for op in matmul.operation.block.operations:
        if seen:
            ops.append(op.operation)
        seen = seen or op.operation == matmul.operation
    return ops


def _done(builder, absorbed, tainted) -> bool:
    """Whether every use of the absorbed values has been visited (nothing after can join)."""
    members = set(absorbed)
    for value in builder.values:
        for use in value.uses:
            owner = use.owner.operation
            if owner not in members and not any(r in tainted for r in owner.results):
                return False
    return True


def _read_outside(builder, absorbed, matmul) -> list:
    """The values computed by the matmul and `absorbed` that an op outside them reads."""
    members = set(absorbed)
    values = [matmul.results[0]] + [r for op in absorbed for r in op.results]
    outside = []
    for value in values:
        for use in value.uses:
            owner = use.owner.operation
            if owner not in members:
                outside.append(value)
                break
    return outside


def _snapshot(builder) -> tuple:
    return (dict(builder.values), list(builder.body), list(builder.inputs), list(builder.ops), list(builder.fused))


def _restore(builder, state) -> None:
    builder.values, builder.body, builder.inputs, builder.ops, builder.fused = (
        dict(state[0]), list(state[1]), list(state[2]), list(state[3]), list(state[4]))
