"""The benchmark models as torch modules: the same ONNX graph, run op by op with torch ops.

Not a general ONNX converter: it covers exactly the ops tools/bench/models.py emits (Conv,
Relu, MaxPool, GlobalAveragePool, Flatten, Gemm, MatMul, Add, Sub, Mul, Div, Erf, Reshape,
Transpose, Softmax, LayerNormalization, Gather, Identity) with the weights taken from the
ONNX initializers, so torch computes the same function with the same weights. The erf-GELU
that models.py spells as five nodes (names `*.gelu.div` ... `*.gelu.half`) becomes one
`F.gelu` call, as a hand-written torch model would have it. Conv+BatchNorm arrive folded.
"""

from __future__ import annotations

import numpy as np


def to_torch(model, dtype=None):
    import torch
    import torch.nn.functional as F
    from onnx import numpy_helper

    class OnnxAsTorch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
            self._ints = {n: [int(v) for v in a.reshape(-1)] for n, a in inits.items() if a.dtype == np.int64}
            self._buf = {}
            for k, (n, a) in enumerate((n, a) for n, a in inits.items() if a.dtype != np.int64):
                t = torch.from_numpy(np.array(a))
                if dtype is not None and t.is_floating_point():
                    t = t.to(dtype)
                self.register_buffer(f"w{k}", t)
                self._buf[n] = f"w{k}"
            self.input_names = [vi.name for vi in model.graph.input if vi.name not in inits]
            self.plan = self._plan(model.graph.node)

        def _plan(self, nodes):
            plan, skip = [], None
            for node in nodes:
                if skip and node.name.startswith(skip):
                    continue
                skip = None
                a = {at.name: _attr(at) for at in node.attribute}
                if node.name.endswith(".gelu.div"):
                    skip = node.name[:-3]
                    plan.append(("Gelu", [node.input[0]], skip + "half", a))
                    continue
                plan.append((node.op_type, list(node.input), node.output[0], a))
            return plan

        def forward(self, *inputs):
            env = dict(zip(self.input_names, inputs))
            for n, b in self._buf.items():
                env[n] = getattr(self, b)

            def get(name):
                return env[name]

            for op, ins, out, a in self.plan:
                if op == "Gelu":
                    y = F.gelu(get(ins[0]))
                elif op == "Conv":
                    p = a.get("pads", [0, 0, 0, 0])
                    y = F.conv2d(get(ins[0]), get(ins[1]), get(ins[2]) if len(ins) > 2 else None,
                                 stride=a.get("strides", [1, 1]), padding=p[:2], groups=a.get("group", 1))
                elif op == "Relu":
                    y = F.relu(get(ins[0]))
                elif op == "MaxPool":
                    y = F.max_pool2d(get(ins[0]), a["kernel_shape"], a.get("strides"), a.get("pads", [0, 0])[:2])
                elif op == "GlobalAveragePool":
                    y = get(ins[0]).mean((2, 3), keepdim=True)
                elif op == "Flatten":
                    y = get(ins[0]).flatten(a.get("axis", 1))
                elif op == "Gemm":
                    x, w = get(ins[0]), get(ins[1])
                    b = get(ins[2]) if len(ins) > 2 else None
                    if a.get("transB", 0):
                        y = F.linear(x, w, b if b is not None and b.shape == (w.shape[0],) else None)
                        if b is not None and b.shape != (w.shape[0],):
                            y = y + b
                    else:
                        y = x @ w if b is None else torch.addmm(b, x, w)
                elif op == "MatMul":
                    y = torch.matmul(get(ins[0]), get(ins[1]))
                elif op == "Add":
                    y = get(ins[0]) + get(ins[1])
                elif op == "Sub":
                    y = get(ins[0]) - get(ins[1])
                elif op == "Mul":
                    y = get(ins[0]) * get(ins[1])
                elif op == "Div":
                    y = get(ins[0]) / get(ins[1])
                elif op == "Erf":
                    y = torch.erf(get(ins[0]))
                elif op == "Reshape":
                    x = get(ins[0])
                    shape = [x.shape[i] if s == 0 else s for i, s in enumerate(self._ints[ins[1]])]
                    y = x.reshape(shape)
                elif op == "Transpose":
                    y = get(ins[0]).permute(a["perm"])
                elif op == "Softmax":
                    y = torch.softmax(get(ins[0]), a.get("axis", -1))
                elif op == "LayerNormalization":
                    x = get(ins[0])
                    y = F.layer_norm(x, (x.shape[-1],), get(ins[1]), get(ins[2]), a.get("epsilon", 1e-5))
                elif op == "Gather":
                    y = F.embedding(get(ins[1]), get(ins[0]))
                elif op == "Identity":
                    y = get(ins[0])
                else:
                    raise NotImplementedError(f"torch_impl: op {op}")
                env[out] = y
            return tuple(env[o.name] for o in model.graph.output)

    return OnnxAsTorch().eval()


def _attr(at):
    from onnx import helper

    v = helper.get_attribute_value(at)
    return list(v) if isinstance(v, (list, tuple)) else v
