import statistics, sys, time
import numpy as np
import inferx_compiler
paths = {"narrow (f16/bf16 weights)": sys.argv[1], "wide (f32 weights, before)": sys.argv[2]}
sess = {k: inferx_compiler.load(p, device="cpu") for k, p in paths.items()}
for batch in (1, 8):
    x = {s.name: np.random.default_rng(0).standard_normal([batch] + [d for d in s.shape[1:]]).astype(np.float32)
         for s in next(iter(sess.values())).inputs}
    outs = {k: s.run(x) for k, s in sess.items()}
    same = all(np.array_equal(a, b) for a, b in zip(*[list(o.values()) for o in outs.values()]))
    ms = {k: [] for k in sess}
    for r in range(9):
        for k in (list(sess) if r % 2 else list(reversed(sess))):
            t0 = time.perf_counter()
            for _ in range(5):
                sess[k].run(x)
            ms[k].append((time.perf_counter() - t0) / 5 * 1e3)
    print(f"b{batch}: outputs identical {same}; " + ", ".join(f"{k} {statistics.median(v):.2f} ms" for k, v in ms.items()))
