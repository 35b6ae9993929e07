"""onnxruntime's own time per node (its profiler's kernel times, medians over 10 calls after 2
warm-up calls), to compare layer by layer with tools/bench/dispatch_profile.py:

    python tools/bench/ort_node_profile.py model.onnx BATCH [TOP] [--threads 2]

Prints the total and the TOP slowest nodes: ms, op type, node name, output shape. The first
input is fed random values at BATCH; the profile file goes to a temporary directory.
"""
import argparse
import collections
import json
import tempfile

import numpy as np
import onnxruntime as ort


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("batch", type=int)
    p.add_argument("top", type=int, nargs="?", default=40)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.enable_profiling = True
    so.profile_file_prefix = tempfile.mkdtemp(prefix="ort_profile_") + "/p"
    session = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    first = session.get_inputs()[0]
    x = np.random.default_rng(0).random([args.batch, *first.shape[1:]]).astype(np.float32)
    for _ in range(12):
        session.run(None, {first.name: x})
    with open(session.end_profiling()) as f:
        events = json.load(f)
    times = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            a = e.get("args", {})
            times[(e["name"][:-len("_kernel_time")], a.get("op_name"), str(a.get("output_type_shape")))].append(e["dur"])
    rows = sorted(((float(np.median(v[2:] if len(v) > 2 else v)), k) for k, v in times.items()), reverse=True)
    print(f"total {sum(r[0] for r in rows) / 1e3:.1f} ms ({args.threads} threads, batch {args.batch})")
    for us, (name, op, shape) in rows[:args.top]:
        print(f"{us / 1e3:8.2f} ms  {op:14s} {name[:40]:40s} {shape[:60]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
