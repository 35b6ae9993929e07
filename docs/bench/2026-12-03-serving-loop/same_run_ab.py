"""Same-run before/after of the event-loop batcher: inferx-serve as of BEFORE_ROOT (a copy of the
package at 650c9aa, laid out as installed: see README.md here), inferx-serve of this checkout,
and the previous threading server (1016ad7), interleaved on the trivial model; wrk / h2load.

    python docs/bench/2026-12-03-serving-loop/same_run_ab.py TRIVIAL.ixa BEFORE_ROOT [--rounds 2]
"""
import argparse
import json
import os
import statistics
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools"))
import http_load  # noqa: E402
import serving_figures as sf  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("trivial")
    p.add_argument("before_root")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", type=float, default=4.0)
    args = p.parse_args()
    serve = ["--name", "trivial", "--port", "0", "--grpc-port", "0", "--instances", "1"]
    pattern = r"serving trivial on (http://\S+) and grpc://(\S+?)( \(\d+ workers\))?$"
    servers = {
        "before (650c9aa)": sf._start([sys.executable, os.path.join(HERE, "use_pkg.py"), args.before_root,
                                       "inferx_compiler.cli.serve", args.trivial, *serve], pattern),
        "after": sf._start([sys.executable, "-c", "import sys; sys.path.pop(0); from inferx_compiler.cli.serve "
                            "import main; sys.exit(main())", args.trivial, *serve], pattern),
        "previous server (1016ad7)": sf._start([sys.executable, "-c", sf.OLD_RUNNER.format(
            root=sf._old_server_package("1016ad7"), artifact=args.trivial, instances=1)],
            r"serving trivial on (http://\S+)()$"),
    }
    results = {}
    try:
        for _ in range(args.rounds):
            for name, (_, m) in servers.items():
                url = m.group(1)
                meta = json.loads(urllib.request.urlopen(url + "/v2/models/trivial", timeout=30).read())
                body, headers = http_load._request(meta, 1, seed=0, binary=False)
                for c in (16, 64, 256):
                    r = http_load.wrk(url, "/v2/models/trivial/infer", body, headers, c, args.duration)
                    results.setdefault((name, "HTTP JSON", c), []).append(r["throughput_rps"])
                if m.group(2):
                    for c in (16, 64):
                        r = http_load.h2load_grpc(m.group(2), http_load.grpc_body(meta, "trivial", 1), c, args.duration)
                        results.setdefault((name, "gRPC", c), []).append(r["throughput_rps"])
                print(name, "done", flush=True)
    finally:
        for proc, _ in servers.values():
            sf._stop(proc)
    print("| server | protocol | in flight | requests/s (median of rounds) | rounds |")
    print("| --- | --- | --- | --- | --- |")
    for (name, proto, c), v in results.items():
        print(f"| {name} | {proto} | {c} | {statistics.median(v):,.0f} | {', '.join(f'{x:,.0f}' for x in v)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
