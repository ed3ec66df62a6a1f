#!/usr/bin/env python3
"""The GPU run's figures (bench/gpu-measure.sh's $OUT) as the tables of BENCHMARKS.md's GPU
section: tensord's 64 MiB kernel phase against OpenCL's own kernels (oclbw) and PyTorch, by
profiling events and by host wall clock; the whole 1 KiB Slice against OpenCL's 1 KiB round
trip; AUTO against the best backend at 16 workers and on 2 cores; the data-movement operators
(32 MiB, inputs resident) against clEnqueueCopyBuffer of the same bytes.
usage: summary.py OUT_DIR   (reads oclbw.jsonl, kernels.json, resident.json, torch.jsonl,
                             copies.json, auto16.json, auto2.json and the ab_*.json)"""
import json
import os
import sys

MIB64 = 64 << 20
MIB32 = 32 << 20
# case: (operators_bench row, reference, target of tensord / reference by events, the run that
# measured it: "kernels" host inputs, "resident" inputs on the device). A contiguous Slice of a
# host input has no device command (its run goes up straight into the output): its copy is
# measured from a resident input.
CASES = [
    ("contiguous (input resident)", ("Slice", "0"), ("oclbw", "ocl_d2d_copybuffer"), 0.9, "resident"),
    ("stride 2", ("Slice", "1"), ("oclbw", "ocl_kernel_gather2x4"), 0.8, "kernels"),
    ("reversed", ("Slice", "2"), ("oclbw", "ocl_kernel_reverse4"), 0.8, "kernels"),
    ("broadcast rows", ("Slice", "3"), ("oclbw", "ocl_kernel_bcast4"), 0.9, "kernels"),
    ("transposed [4096, 4096]", ("Slice", "4"), ("oclbw", "ocl_kernel_transpose_tiled"), 0.7, "kernels"),
    ("ScatterElements, rows permuted", ("ScatterElements", None), ("torch", "torch_scatter_rows"), 0.5,
     "kernels"),
    ("ScatterElements (OpenCL's own)", ("ScatterElements", None), ("oclbw", "ocl_kernel_scatter_rows"),
     None, "kernels"),
]
# The data-movement operators' target against clEnqueueCopyBuffer of their output bytes.
COPY_TARGET = 0.7


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
    runs = {tag: bench_rows(os.path.join(out, f"{tag}.json")) for tag in ("kernels", "resident")}
    rows = runs["kernels"]
    # kernels_wall.json: the same rows on a device not profiling (its wall clock
    # is tensord's), and the whole small Slices
    plain = bench_rows(os.path.join(out, "kernels_wall.json"))
    lines = ["| 64 MiB float32 | tensord µs, events | tensord µs, wall | wall, not profiled | commands | "
             "reference | reference µs, events | reference µs, wall | ratio, events | ratio, wall | target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, (op, window), (src, what), target, run in CASES:
        b = runs[run].get((op, window, MIB64, "1"))
        ref = ocl.get((64, what)) if src == "oclbw" else torch.get(what)
        if b is None or ref is None:
            lines.append(f"| {label} | missing | | | | {what} | | | | | |")
            continue
        ev, wall = us(b, "kernel_device_ms"), us(b, "kernel_ms")
        unprofiled = plain.get((op, window, MIB64, "1")) if run == "kernels" else None
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
    host = rows.get(("Slice", "0", MIB64, "1"))
    if host is not None:
        lines.append(f"A 64 MiB contiguous Slice of a host input: {host.get('kernel_commands', 0):.0f} "
                     f"device commands (its run goes up straight into the output), upload "
                     f"{fmt(us(host, 'upload_ms'))} µs, download {fmt(us(host, 'download_ms'))} µs")
    for tag, label, base_run in (("ab_group0", "work-groups of the runtime's choice", "kernels"),
                                 ("ab_runs", "contiguous runs by the kernel", "resident")):
        other = bench_rows(os.path.join(out, f"{tag}.json"))
        for key, b in sorted(other.items()):
            base = runs[base_run].get(key)
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
    lines += copies_table(out, ocl)
    print("\n".join(lines))


def copies_table(out, ocl):
    """The data-movement operators at 32 MiB of output, inputs resident, by events, against
    clEnqueueCopyBuffer of 32 MiB (oclbw's event median)."""
    path = os.path.join(out, "copies.json")
    ref = ocl.get((32, "ocl_d2d_copybuffer"))
    if not os.path.exists(path) or ref is None:
        return ["", "Data-movement operators: missing (copies.json or oclbw 32 MiB)"]
    lines = ["", f"| 32 MiB, inputs resident | µs, events | commands | copybuffer µs, events | ratio | "
             f"target |", "| --- | --- | --- | --- | --- | --- |"]
    for b in json.load(open(path)).get("benchmarks", []):
        if b.get("aggregate_name") != "median" or b.get("run_type") != "aggregate":
            continue
        ev = us(b, "kernel_device_ms")
        ratio = ref["us_event"] / ev if ev else None
        mark = "—" if ratio is None else f"≥ {COPY_TARGET}: {'met' if ratio >= COPY_TARGET else 'missed'}"
        name = b.get("run_name", b["name"]).removeprefix("BM_")
        for part in (f"/bytes:{MIB32}", "/backend:1", "/real_time"):
            name = name.replace(part, "")
        lines.append(f"| {name} | {fmt(ev)} | {fmt(b.get('kernel_commands'), 2)} | "
                     f"{fmt(ref['us_event'])} | {fmt(ratio, 2)} | {mark} |")
    return lines


if __name__ == "__main__":
    main(sys.argv[1])
