#!/usr/bin/env python3
"""The GPU run's figures (bench/gpu-measure.sh's $OUT) as the tables of BENCHMARKS.md's GPU
section: tensord's 64 MiB kernel phase against OpenCL's own kernels (oclbw) and PyTorch, by
profiling events and by host wall clock; the whole 1 KiB Slice against OpenCL's 1 KiB round
trip; AUTO against the best backend at 16 workers and on 2 cores.
usage: summary.py OUT_DIR   (reads oclbw.jsonl, kernels.json, torch.jsonl, auto16.json, auto2.json)"""
import json
import os
import sys

MIB64 = 64 << 20
# case: (operators_bench row, reference, target of tensord / reference by events)
CASES = [
    ("contiguous", ("Slice", "0"), ("oclbw", "ocl_d2d_copybuffer"), 0.9),
    ("stride 2", ("Slice", "1"), ("oclbw", "ocl_kernel_gather2x4"), 0.8),
    ("reversed", ("Slice", "2"), ("oclbw", "ocl_kernel_reverse4"), 0.8),
    ("broadcast rows", ("Slice", "3"), ("oclbw", "ocl_kernel_bcast4"), 0.9),
    ("transposed [4096, 4096]", ("Slice", "4"), ("oclbw", "ocl_kernel_transpose_tiled"), 0.7),
    ("ScatterElements, rows permuted", ("ScatterElements", None), ("torch", "torch_scatter_rows"), 0.5),
    ("ScatterElements (OpenCL's own)", ("ScatterElements", None), ("oclbw", "ocl_kernel_scatter_rows"), None),
]


def jsonl(path):
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def bench_rows(path):
    if not os.path.exists(path):
        return {}
    rows = {}
    for b in json.load(open(path)).get("benchmarks", []):
        if b.get("aggregate_name", "median") != "median":
            continue
        name = b.get("run_name", b["name"])
        parts = dict(p.split(":") for p in name.split("/")[1:] if ":" in p)
        rows[(name.split("/")[0].removeprefix("BM_"), parts.get("window"), int(parts["bytes"]),
              parts.get("backend"))] = b
    return rows


def us(b, key):
    return b[key] * 1e3 if key in b else None  # counters are ms


def real_us(b):
    return b["real_time"] / 1e3 if b["time_unit"] == "ns" else b["real_time"]


def fmt(x, digits=3):
    return "—" if x is None else f"{x:.{digits}g}"


def main(out):
    ocl = {}
    for r in jsonl(os.path.join(out, "oclbw.jsonl")):
        if "device" in r:
            mib = r["mib"]
        elif "what" in r:
            ocl[(mib, r["what"])] = r
    torch = {r["what"]: r for r in jsonl(os.path.join(out, "torch.jsonl")) if "us_event" in r}
    rows = bench_rows(os.path.join(out, "kernels.json"))
    # kernels_wall.json: the same rows on a device not profiling (its wall clock
    # is tensord's), and the whole small Slices
    plain = bench_rows(os.path.join(out, "kernels_wall.json"))
    lines = ["| 64 MiB float32 | tensord µs, events | tensord µs, wall | wall, not profiled | commands | "
             "reference | reference µs, events | reference µs, wall | ratio, events | ratio, wall | target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, (op, window, ), (src, what), target in [(c[0], c[1], c[2], c[3]) for c in CASES]:
        b = rows.get((op, window, MIB64, "1"))
        ref = ocl.get((64, what)) if src == "oclbw" else torch.get(what)
        if b is None or ref is None:
            lines.append(f"| {label} | missing | | | | {what} | | | | | |")
            continue
        ev, wall = us(b, "kernel_device_ms"), us(b, "kernel_ms")
        unprofiled = plain.get((op, window, MIB64, "1"))
        wall_plain = us(unprofiled, "kernel_ms") if unprofiled else None
        ref_ev, ref_wall = ref.get("us_event"), ref.get("us_wall")
        r_ev = ref_ev / ev if ev and ref_ev else None
        r_wall = ref_wall / wall if wall and ref_wall else None
        mark = "" if target is None or r_ev is None else \
            f"≥ {target}: {'met' if r_ev >= target else 'missed'}"
        lines.append(f"| {label} | {fmt(ev)} | {fmt(wall)} | {fmt(wall_plain)} | "
                     f"{fmt(b.get('kernel_commands'), 2)} | "
                     f"{what} | {fmt(ref_ev)} | {fmt(ref_wall)} | {fmt(r_ev, 2)} | {fmt(r_wall, 2)} | {mark} |")
    rt = ocl.get((1, "ocl_roundtrip_1k")) or ocl.get((64, "ocl_roundtrip_1k"))
    lines.append("")
    for window, name in (("0", "contiguous"), ("2", "reversed")):
        whole = plain.get(("SliceWhole", window, 1024, None)) or rows.get(("SliceWhole", window, 1024, None))
        if whole is not None and rt is not None:
            ratio = real_us(whole) / rt["us"]
            lines.append(f"A whole 1 KiB Slice ({name}): {real_us(whole):.1f} µs against "
                         f"ocl_roundtrip_1k {rt['us']:.1f} µs = {ratio:.2f}× (target ≤ 1.3: "
                         f"{'met' if ratio <= 1.3 else 'missed'})")
    for tag, label in (("ab_group0", "work-groups of the runtime's choice"),
                       ("ab_runs", "contiguous runs by the kernel")):
        other = bench_rows(os.path.join(out, f"{tag}.json"))
        for key, b in sorted(other.items()):
            base = rows.get(key)
            if base is None or "kernel_device_ms" not in b:
                continue
            lines.append(f"Launch table, {label}: {key[0]} window {key[1]}: "
                         f"{us(b, 'kernel_device_ms'):.1f} µs by events against the default's "
                         f"{us(base, 'kernel_device_ms'):.1f}")
    for tag, label in (("auto16", "16 workers"), ("auto2", "2 cores (taskset -c 0,1)")):
        path = os.path.join(out, f"{tag}.json")
        if not os.path.exists(path):
            lines.append(f"AutoBest, {label}: missing")
            continue
        cases = [b for b in json.load(open(path))["benchmarks"] if "auto_over_best" in b]
        misses = [f"{b['name'].split('/iterations')[0]} {b['auto_over_best']:.2f}× "
                  f"(oneTBB {b['cpu_ms']:.3g} ms, OpenCL {b['opencl_ms']:.3g} ms, "
                  f"AUTO on {'OpenCL' if b['auto_opencl'] >= 0.5 else 'oneTBB'})"
                  for b in cases if b["auto_over_best"] > 1.1]
        lines.append(f"AutoBest, {label}: {len(cases) - len(misses)} of {len(cases)} within 1.1×"
                     + ("; missed: " + "; ".join(misses) if misses else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
