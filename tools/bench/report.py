"""Markdown table and PNG chart from a results.json of tools/bench/run.py or gpu.py.

    python tools/bench/report.py docs/bench/DATE/results.json   # rewrites results.md, chart.png
    python tools/bench/report.py docs/bench/DATE/results.json --readme   # prints README's performance section

The chart uses matplotlib when it is importable; otherwise a small built-in writer (numpy +
zlib, a 3x5 pixel font) draws the same horizontal bar chart: time relative to the best peer.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib

import numpy as np


def _fmt_ms(v):
    return f"{v:.3g}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _cell(r):
    st = r.get("status")
    if st == "ok":
        return f"{_fmt_ms(r['median_ms'])} ({_fmt_ms(r['min_ms'])}–{_fmt_ms(r['max_ms'])})"
    if st == "wrong":
        return f"WRONG (rel L2 {r['rel_l2']:.1e})"
    if st == "error":
        return "error"
    return st or "-"


def _configs(rows):
    seen = []
    for r in rows:
        k = (r["model"], r["batch"])
        if k not in seen:
            seen.append(k)
    return seen


def _systems(rows):
    out = []
    for r in rows:
        if r["system"] not in out:
            out.append(r["system"])
    return out


def markdown(doc) -> str:
    rows = doc["rows"]
    m = doc.get("machine", {})
    systems = _systems(rows)
    lines = [f"# inferx benchmark, {doc.get('mode', '')} mode, {doc.get('date', '')}", "",
             f"- machine: {m.get('cpu', '?')}, {m.get('logical_cpus', '?')} logical CPUs; "
             f"threads for every system: {m.get('threads', '?')}" + (f"; device: {m['device']}" if m.get("device") else ""),
             f"- command: `{doc.get('command', '')}`",
             f"- method: outputs checked against onnxruntime fp32 first (relative L2; tolerances "
             f"{doc.get('tolerances')}; wrong answers are not timed), {doc.get('warmup')} warm-up calls, "
             f"{doc.get('rounds')} interleaved rounds × {doc.get('iters')} calls, system order rotated each round",
             f"- versions: {', '.join(f'{k} {v}' for k, v in (m.get('versions') or {}).items() if v)}"
             + (f"; inferx {m['inferx_git']}" if m.get("inferx_git") else ""),
             ]
    if doc.get("skipped_systems"):
        lines.append(f"- skipped: {doc['skipped_systems']}")
    if not doc.get("complete", True):
        lines.append("- **partial**: the run had not finished when this was written")
    lines += ["", "## Latency, ms: median (min–max)", "",
              "| model | batch | " + " | ".join(systems) + " | best peer | inferx ÷ best peer |",
              "| --- | --- | " + " | ".join("---" for _ in systems) + " | --- | --- |"]
    for model, batch in _configs(rows):
        by = {r["system"]: r for r in rows if r["model"] == model and r["batch"] == batch}
        best = next((r.get("best_peer") for r in by.values() if r.get("best_peer")), None)
        ratio = ", ".join(f"{s[len('inferx-'):]} {by[s]['x_best_peer']:.2f}×" for s in systems
                          if s.startswith("inferx-") and s in by and by[s].get("x_best_peer")) or "-"
        lines.append(f"| {model} | {batch} | " + " | ".join(_cell(by[s]) if s in by else "-" for s in systems)
                     + f" | {best or '-'} | {ratio} |")
    lines += ["", "## Correctness: relative L2 against onnxruntime fp32 (first call)", "",
              "| model | batch | " + " | ".join(systems) + " |", "| --- | --- | " + " | ".join("---" for _ in systems) + " |"]
    for model, batch in _configs(rows):
        by = {r["system"]: r for r in rows if r["model"] == model and r["batch"] == batch}
        lines.append(f"| {model} | {batch} | " + " | ".join(
            (f"{by[s]['rel_l2']:.1e}" + ("" if by[s]["status"] == "ok" else " ✗") if by[s].get("rel_l2") is not None
             else by[s].get("status", "-")) if s in by else "-" for s in systems) + " |")
    comp = [r for r in rows if r.get("compile_s") is not None]
    if comp:
        lines += ["", "## Compile", "",
                  "| model | system | compile s | peak RSS MiB | artifact MB | note |", "| --- | --- | --- | --- | --- | --- |"]
        seen = set()
        for r in comp:
            k = (r["model"], r["system"])
            if k in seen:
                continue
            seen.add(k)
            note = []
            if r.get("cached"):
                note.append("from cache (time of the original compile)")
            if r.get("import_s") is not None:
                note.append(f"import {r['import_s']:.1f} s / {r.get('import_peak_rss_mib') or 0:.0f} MiB, "
                            f"iree-compile {r.get('iree_compile_s') or 0:.1f} s / {r.get('iree_compile_peak_rss_mib') or 0:.0f} MiB")
            if r["system"].startswith(("torch-compile", "torch-ro")):
                note.append("in process, first call minus the next call (first batch)")
            rss = f"{r['peak_rss_mib']:.0f}" if r.get("peak_rss_mib") else "-"
            size = f"{r['artifact_bytes'] / 1e6:.1f}" if r.get("artifact_bytes") else "-"
            lines.append(f"| {model_label(r)} | {r['system']} | {r['compile_s']:.1f} | {rss} | {size} | {'; '.join(note)} |")
    errs = [r for r in rows if r.get("status") == "error"]
    if errs:
        lines += ["", "## Errors", ""]
        seen = set()
        for r in errs:
            msg = (r.get("error") or "").strip().splitlines()
            msg = msg[-1] if msg else ""
            if (r["model"], r["system"], msg) in seen:
                continue
            seen.add((r["model"], r["system"], msg))
            lines.append(f"- {r['model']} b{r['batch']} {r['system']}: `{msg[:300]}`")
    for extra in doc.get("extra_sections", []):
        lines += ["", extra]
    return "\n".join(lines) + "\n"


def model_label(r):
    return r["model"]


# ----------------------------------------------------------------------------- chart
def chart(doc, path) -> str:
    bars = []  # (label, system, ratio or None, status)
    for model, batch in _configs(doc["rows"]):
        for r in doc["rows"]:
            if r["model"] == model and r["batch"] == batch:
                bars.append((f"{model} b{batch}", r["system"], r.get("x_best_peer"), r.get("status")))
    if not bars:
        return "no rows"
    title = f"time / best peer (lower is better), {doc.get('mode', '')} {doc.get('date', '')}, " \
            f"{doc.get('machine', {}).get('threads', '?')} threads"
    return bar_chart(bars, title, path)


def bar_chart(bars, title: str, path) -> str:
    """Horizontal bars of ratios, a line at 1.0: bars are (group label, system, ratio or None,
    status); inferx systems in blue. matplotlib when importable, else a built-in PNG writer."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 0.28 * len(bars) + 1.5))
        ys = np.arange(len(bars))[::-1]
        vals = [b[2] if b[2] else 0 for b in bars]
        cols = ["tab:blue" if b[1].startswith("inferx") else "tab:gray" for b in bars]
        ax.barh(ys, vals, color=cols)
        ax.set_yticks(ys, [f"{b[0]} {b[1]}" + ("" if b[3] == "ok" else f" [{b[3]}]") for b in bars], fontsize=7)
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        return "chart.png (matplotlib)"
    except ImportError:
        _numpy_chart(bars, title, path)
        return "chart.png (built-in PNG writer; matplotlib not installed)"


_FONT = {  # 3x5 glyphs, rows top to bottom
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111", "F": "111100110100100",
    "G": "011100101101011", "H": "101101111101101", "I": "111010010010111", "J": "001001001101010",
    "K": "101101110101101", "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011", "R": "110101110101101",
    "S": "011100010001110", "T": "111010010010010", "U": "101101101101111", "V": "101101101101010",
    "W": "101101111111101", "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    ".": "000000000000010", "-": "000000111000000", "_": "000000000000111", "/": "001001010100100",
    "(": "010100100100010", ")": "010001001001010", ",": "000000000010100", ":": "000010000010000",
    "[": "110100100100110", "]": "011001001001011", "=": "000111000111000", "+": "000010111010000",
    " ": "000000000000000", "×": "000101010101000",
}


def _text(img, x, y, s, color, scale=2):
    for ch in s.upper():
        g = _FONT.get(ch, _FONT["-"])
        for i, bit in enumerate(g):
            if bit == "1":
                r, c = divmod(i, 3)
                img[y + r * scale:y + (r + 1) * scale, x + c * scale:x + (c + 1) * scale] = color
        x += 4 * scale
    return x


def _numpy_chart(bars, title, path):
    row_h, label_w, plot_w, top = 16, 360, 520, 40
    cap = max([b[2] for b in bars if b[2]] + [1.0])
    cap = min(cap, 10.0)
    h, w = top + row_h * len(bars) + 30, label_w + plot_w + 80
    img = np.full((h, w, 3), 255, np.uint8)
    _text(img, 8, 10, title, (0, 0, 0))
    x0 = label_w
    prev = None
    for i, (lab, sysname, ratio, st) in enumerate(bars):
        y = top + i * row_h
        if lab != prev:
            img[y - 2:y - 1, 8:w - 8] = (200, 200, 200)
            _text(img, 8, y + 3, lab, (0, 0, 0))
            prev = lab
        _text(img, 150, y + 3, sysname, (60, 60, 60))
        if ratio:
            bw = int(plot_w * min(ratio, cap) / cap)
            col = (31, 119, 180) if sysname.startswith("inferx") else (140, 140, 140)
            img[y + 2:y + row_h - 2, x0:x0 + max(bw, 1)] = col
            _text(img, x0 + bw + 4, y + 3, f"{ratio:.2f}" + ("+" if ratio > cap else ""), (0, 0, 0))
        else:
            _text(img, x0 + 4, y + 3, (st or "-"), (200, 0, 0))
    one = x0 + int(plot_w / cap)
    img[top - 6:top + row_h * len(bars), one:one + 1] = (0, 0, 0)
    _text(img, one - 4, top + row_h * len(bars) + 6, "1.0", (0, 0, 0))
    _write_png(img, path)


def _write_png(img, path):
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def readme_section(doc) -> str:
    """The README's performance section: date, machine, command, then the latency table."""
    m = doc.get("machine", {})
    md = markdown(doc)
    table = md.split("## Latency, ms: median (min–max)")[1].split("## Correctness")[0].strip()
    return (f"## Performance ({doc.get('date')}, generated by tools/bench/report.py --readme)\n\n"
            f"Machine: {m.get('cpu')}, {m.get('logical_cpus')} logical CPUs, {m.get('threads')} threads for every "
            f"system; load average at start {', '.join(f'{x:.1f}' for x in doc.get('loadavg_at_start') or [])}. "
            f"Command: `{doc.get('command')}`. Median ms (min–max); WRONG = failed the accuracy check, not timed.\n\n"
            + table + "\n")


def main(argv=None) -> int:
    args = list(argv or sys.argv[1:])
    readme = "--readme" in args
    args = [a for a in args if a != "--readme"]
    src = args[0]
    with open(src) as f:
        doc = json.load(f)
    if readme:
        print(readme_section(doc))
        return 0
    d = os.path.dirname(os.path.abspath(src))
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write(markdown(doc))
    print(chart(doc, os.path.join(d, "chart.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
