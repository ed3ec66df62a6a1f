#!/usr/bin/env python3
"""Turns operators_bench JSON into the BENCHMARKS.md tables (medians of the
repetitions): oneTBB against memcpy of the same bytes, and OpenCL against oneTBB
with the transfers broken out and what AUTO picks: tensord's cost model from the
AutoBest rows (the benchmark's own calibration), or a given threshold."""
import json
import sys

WINDOWS = {"0": "contiguous", "1": "strided", "2": "reversed", "3": "broadcast input",
           "4": "transposed"}
TARGETS = {"contiguous": 0.7, "strided": 0.4}


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


# BM_Pad's mode argument, as numpy.pad names them.
PAD_MODES = ["constant", "edge", "reflect", "symmetric"]


def load(path):
    """From a file's path, or the JSON already read."""
    runs = path if isinstance(path, dict) else json.load(open(path))
    rows, auto = {}, {}
    for b in runs["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        name = b.get("run_name", b["name"])
        parts = dict(p.split(":") for p in name.split("/")[1:] if ":" in p)
        op = name.split("/")[0].removeprefix("BM_")
        if op == "Memcpy":
            case = ""
        elif "axis" in parts:  # BM_Gather's and BM_Join's axis
            case = f"axis {parts['axis']}"
        elif "mode" in parts:  # BM_Pad's mode
            case = PAD_MODES[int(parts["mode"])]
        else:
            case = WINDOWS.get(parts.get("window"), "permuted rows")
        if op.startswith("AutoBest"):
            auto[(op.removeprefix("AutoBest"), case, int(parts["bytes"]))] = b
            continue
        key = (op, case, int(parts["bytes"]), int(parts.get("backend", 0)))
        rows[key] = b
    return rows, auto


def gbps(b):
    return b["bytes_per_second"] / 1e9


def main(path, auto_min_bytes):
    rows, auto = load(path)
    memcpy = {size: gbps(b) for (op, _, size, _), b in rows.items() if op == "Memcpy"}
    ops = ["Slice", "StridedSlice", "Split", "ScatterElements"]
    cases = sorted({k[:3] for k in rows if k[0] in ops},
                   key=lambda k: (ops.index(k[0]),
                                  k[1], k[2]))
    print("### oneTBB against memcpy\n")
    print("| operator | case | bytes | GB/s | memcpy GB/s | ratio | target |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for op, case, size in cases:
        tbb = gbps(rows[(op, case, size, 0)])
        base = memcpy[size]
        target = TARGETS.get(case) if op in ("Slice", "StridedSlice", "Split") else None
        mark = "" if target is None else f"≥ {target} {'met' if tbb / base >= target else 'missed'}"
        print(f"| {op} | {case} | {human(size)} | {tbb:.2f} | {base:.2f} | {tbb / base:.2f} | {mark} |")

    print("\n### OpenCL (PoCL CPU device) against oneTBB, and AUTO\n")
    print("| operator | case | bytes | oneTBB µs | OpenCL µs | upload µs | kernel µs | "
          "download µs | OpenCL/oneTBB | AUTO runs on | AUTO / best |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for op, case, size in cases:
        tbb = rows[(op, case, size, 0)]
        cl = rows.get((op, case, size, 1))
        if cl is None:
            continue
        tbb_us = tbb["real_time"] / 1e3 if tbb["time_unit"] == "ns" else tbb["real_time"]
        cl_us = cl["real_time"] / 1e3 if cl["time_unit"] == "ns" else cl["real_time"]
        picked = auto.get((op, case, size))
        if auto_min_bytes is None and picked is not None:
            # The model's choice and AUTO / best over that row's own medians of 5.
            auto_on = "OpenCL" if picked["auto_opencl"] >= 0.5 else "oneTBB"
            ratio = picked["auto_over_best"]
        else:
            threshold = (1 << 62) if auto_min_bytes is None else auto_min_bytes
            auto_on = "OpenCL" if size >= threshold else "oneTBB"
            auto_us = cl_us if auto_on == "OpenCL" else tbb_us
            ratio = auto_us / min(tbb_us, cl_us)
        print(f"| {op} | {case} | {human(size)} | {tbb_us:.3g} | {cl_us:.3g} | "
              f"{cl['upload_ms'] * 1e3:.3g} | {cl['kernel_ms'] * 1e3:.3g} | "
              f"{cl['download_ms'] * 1e3:.3g} | {cl_us / tbb_us:.3g} | {auto_on} | "
              f"{ratio:.2f} |")


if __name__ == "__main__":
    # A threshold (AUTO_OPENCL_MIN_BYTES) replaces the model, as in tensord.
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None)
