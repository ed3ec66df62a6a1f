#!/usr/bin/env python3
"""Turns operators_bench JSON into the BENCHMARKS.md table: GB/s per case and
the ratio to the memcpy of the same bytes measured in the same run (medians)."""
import json
import sys

WINDOWS = {"0": "contiguous", "1": "strided", "2": "reversed", "3": "broadcast input"}
TARGETS = {"contiguous": 0.7, "strided": 0.4}


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def main(path):
    runs = json.load(open(path))
    medians = {}
    for b in runs["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        name = b["run_name"] if "run_name" in b else b["name"]
        medians[name] = b["bytes_per_second"] / 1e9
    memcpy = {}
    rows = []
    for name, gbps in medians.items():
        parts = dict(p.split(":") for p in name.split("/")[1:] if ":" in p)
        op = name.split("/")[0].removeprefix("BM_")
        size = int(parts["bytes"])
        if op == "Memcpy":
            memcpy[size] = gbps
            continue
        rows.append((op, WINDOWS.get(parts.get("window"), "permuted rows"), size, gbps))
    print("| operator | case | bytes | GB/s | memcpy GB/s | ratio | target |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for op, case, size, gbps in rows:
        base = memcpy[size]
        target = TARGETS.get(case) if op in ("Slice", "StridedSlice", "Split") else None
        mark = "" if target is None else (f"≥ {target} {'✓' if gbps / base >= target else '✗'}")
        print(f"| {op} | {case} | {human(size)} | {gbps:.2f} | {base:.2f} | "
              f"{gbps / base:.2f} | {mark} |")


if __name__ == "__main__":
    main(sys.argv[1])
