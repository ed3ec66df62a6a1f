#!/usr/bin/env python3
"""BENCHMARKS.md's CPU tables, rewritten from bench/run-all.sh's results.
(One file a little past the project's ~600 lines: one writer per table, each
beside the others, so a table and the page's layout are read in one place.)

    bench/write_tables.py [AREA ...]     rewrites the regions of those areas (default:
                                         every area with build/bench-results/AREA.json)
    bench/write_tables.py --check        every region has its markers, once, in order,
                                         and the page is at most 420 lines; exits 1 if not
    bench/write_tables.py --record AREA --data FILE --out FILE ...
                                         (run-all.sh) wraps an area's figures with the
                                         command, machine, date, tree and mode

A region is the text between `<!-- table:NAME begin -->` and `<!-- table:NAME end -->`;
everything outside the regions (prose, the GPU section) is left alone. Every figure in a
table is set beside the baseline measured in the same run, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import kernel_table  # noqa: E402  (operators_bench JSON: medians, names)

PAGE = ROOT / "BENCHMARKS.md"
RESULTS = ROOT / "build" / "bench-results"
MAX_LINES = 420

# Each area of run-all.sh and the page regions made from its results.
AREAS = {
    "kernels": ["kernels"],
    "layout": ["layout"],
    "copies": ["copies"],
    "small": ["small"],
    "bulk": ["bulk"],
    "python": ["python"],
    "shm": ["shm"],
    "v2": ["v2"],
    "handles": ["handles", "views"],
    "opencl": ["opencl"],
}
REGIONS = [region for regions in AREAS.values() for region in regions]
MARKER = re.compile(r"<!-- table:([a-z0-9_-]+) (begin|end) -->")


# --- recording ---------------------------------------------------------------

def machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / (1 << 20))
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gib": mem_gib}


def tree() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True, check=False).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "?"
    return head + (" with local changes" if git("status", "--porcelain", "--untracked-files=no")
                   else "")


def record(args: argparse.Namespace) -> None:
    data = json.loads(Path(args.data).read_text())
    doc = {
        "area": args.record, "mode": args.mode, "started": args.started,
        "seconds": args.seconds, "command": args.command, "tree": tree(),
        "machine": machine(), "load_before": args.load_before, "load_after": args.load_after,
        "shared": bool(args.shared), "data": data,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


# --- formatting ----------------------------------------------------------------

def num(x: float, digits: int = 3) -> str:
    """x to `digits` significant digits, thousands separated, no exponent."""
    if x == 0:
        return "0"
    from math import floor, log10
    decimals = max(0, digits - 1 - floor(log10(abs(x))))
    return f"{x:,.{decimals}f}"


def ms(seconds: float) -> str:
    return f"{num(seconds * 1e3)} ms"


def duration(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def met(figure: float, target: str) -> str:
    """'≥ 0.9' or '≤ 1.25' against the figure: 'met' or '**not met**'."""
    if not target:
        return ""
    op, bound = target.split()
    ok = figure >= float(bound) if op == "≥" else figure <= float(bound)
    return f"{target}: {'met' if ok else '**not met**'}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def stamp(doc: dict) -> str:
    m = doc["machine"]
    when = doc["started"].replace("T", " ").replace("Z", " UTC")
    load = f"load average {doc['load_before']} → {doc['load_after']}"
    if doc.get("shared"):
        load += ", a compiler running beside it"
    flag = " --quick" if doc["mode"] == "quick" else ""
    return (f"_`bench/run-all.sh{flag} --area {doc['area']}`, {when[:16]} UTC, "
            f"tree {doc['tree']}; {m['nproc']} × {m['cpu']}, {m['mem_gib']} GiB; {load}; "
            f"{duration(doc['seconds'])}. Ran: `{doc['command']}`._")


# --- the areas ---------------------------------------------------------------------

SIZES = [1 << 10, 1 << 20, 64 << 20]
OPS = ["Slice", "StridedSlice", "Split", "ScatterElements"]


def bench_rows(doc: dict) -> tuple[dict, dict]:
    data = dict(doc["data"])
    data["benchmarks"] = [b for b in data["benchmarks"] if not b.get("error_occurred")]
    return kernel_table.load(data)


def cases(rows: dict) -> list[tuple[str, str]]:
    found = {(op, case) for op, case, _, _ in rows if op != "Memcpy"}
    return sorted(found, key=lambda k: (OPS.index(k[0]), k[1]))


def kernels(doc: dict) -> list[str]:
    rows, _ = bench_rows(doc)
    memcpy = {size: kernel_table.gbps(b) for (op, _, size, _), b in rows.items()
              if op == "Memcpy"}
    out = [["`memcpy`, one thread (the baseline)", ""]
           + [f"{num(memcpy[s])} GB/s" if s in memcpy else "" for s in SIZES] + [""]]
    for op, case in cases(rows):
        cells: list[str] = []
        kept: list[str] = []
        missed: list[str] = []
        for size in SIZES:
            b = rows.get((op, case, size, 0))
            if b is None or size not in memcpy:
                cells.append("")
                continue
            ratio = kernel_table.gbps(b) / memcpy[size]
            cells.append(f"**{ratio:.2f}** ({num(kernel_table.gbps(b))} GB/s)")
            target = kernel_table.TARGETS.get(case) if op != "ScatterElements" else None
            if target is not None:
                (kept if ratio >= target else missed).append(kernel_table.human(size))
        target = kernel_table.TARGETS.get(case) if op != "ScatterElements" else None
        mark = "" if target is None else f"≥ {target}: " + (
            "met" if not missed else "; ".join(
                ([f"met at {', '.join(kept)}"] if kept else [])
                + [f"**missed** at {', '.join(missed)}"]))
        out.append([op, case, *cells, mark])
    return table(["operator", "case", "1 KiB: ratio (GB/s)", "1 MiB", "64 MiB", "target"], out)


# The layout operators' copies (bench/operators_bench.cc: MakeTranspose,
# MakeReshape, MakeExpand), each at 1 KiB, 1 MiB and 32 MiB of float32 output,
# with the ratio their target asks at 32 MiB.
LAYOUT_SIZES = [1 << 10, 1 << 20, 32 << 20]
LAYOUT_CASES = [
    ("Transpose", "permuted rows", "a [4096, 2048] matrix transposed (tiled)", 0.5),
    ("Reshape", "contiguous", "a packed input flattened (its window copied)", 0.8),
    ("Reshape", "strided", "rows in a padded pitch flattened (no window)", 0.8),
    ("Reshape", "transposed", "a column-major input flattened (no window)", None),
    ("Expand", "permuted rows", "one row broadcast to the matrix", 0.8),
]

# The operators that copy into new bytes (issue 45), the same way: MakeTile's
# quarter of the matrix tiled twice each way; MakeGather's rows or columns in a
# shuffled order; MakeGatherElements' rows each reordered; MakeJoin's matrix from
# 8 inputs along either axis; MakePad's matrix around a smaller input, each mode.
COPY_CASES = [
    ("Tile", "permuted rows", "a quarter of the matrix tiled [2, 2] (rows of half its width)", 0.8),
    ("Gather", "axis 0", "whole rows in a shuffled order (int64 indices, the outermost axis)", 0.8),
    ("Gather", "axis 1", "columns in a shuffled order (int64 indices, the innermost axis)", 0.3),
    ("GatherElements", "permuted rows", "each row reordered by its own int32 indices (axis 1)",
     0.3),
    ("Join", "axis 0", "8 inputs one after another (each one run)", 0.8),
    ("Join", "axis 1", "8 inputs side by side (each output row 8 runs)", 0.8),
    ("Pad", "constant", "a border of 2 rows and 16 columns filled with a value", 0.8),
    ("Pad", "edge", "the same border repeating the edge elements", 0.8),
    ("Pad", "reflect", "the same border mirrored about the edge", 0.8),
    ("Pad", "symmetric", "the same border mirrored, the edge repeated", 0.8),
]


def layout(doc: dict) -> list[str]:
    return ratio_table(doc, LAYOUT_CASES)


def copies(doc: dict) -> list[str]:
    return ratio_table(doc, COPY_CASES)


def ratio_table(doc: dict, cases: list) -> list[str]:
    """Each case's GB/s on oneTBB as a ratio to memcpy's of the same bytes, and its target."""
    rows, _ = bench_rows(doc)
    memcpy = {size: kernel_table.gbps(b) for (op, _, size, _), b in rows.items()
              if op == "Memcpy"}
    out = [["`memcpy`, one thread (the baseline)", ""]
           + [f"{num(memcpy[s])} GB/s" if s in memcpy else "" for s in LAYOUT_SIZES] + [""]]
    for op, case, label, target in cases:
        cells = []
        for size in LAYOUT_SIZES:
            b = rows.get((op, case, size, 0))
            cells.append(f"**{kernel_table.gbps(b) / memcpy[size]:.2f}** "
                         f"({num(kernel_table.gbps(b))} GB/s)" if b and size in memcpy else "")
        big = rows.get((op, case, 32 << 20, 0))
        mark = ""
        if target is not None and big and (32 << 20) in memcpy:
            ratio = kernel_table.gbps(big) / memcpy[32 << 20]
            mark = f"≥ {target} at 32 MiB: " + ("met" if ratio >= target else "**missed**")
        out.append([op, label, *cells, mark])
    return table(["operator", "case", "1 KiB: ratio (GB/s)", "1 MiB", "32 MiB", "target"], out)


def us(b: dict) -> float:
    return b["real_time"] / 1e3 if b["time_unit"] == "ns" else b["real_time"] * (
        1e3 if b["time_unit"] == "ms" else 1)


def opencl(doc: dict) -> list[str]:
    rows, auto = bench_rows(doc)
    lines: list[str] = []
    calibration = doc["data"].get("calibration", "")
    if calibration:
        lines += ["oneTBB's and the device's own rates, as tensord's calibration measured them "
                  f"in this run: `{calibration.removeprefix('calibration: ')}`", ""]
    if not any(backend == 1 for *_, backend in rows):
        return lines + ["No OpenCL device on this machine: no figures."]
    out, within, total = [], 0, 0
    for op, case in cases(rows):
        cells, picks, bests = [], [], []
        for size in SIZES:
            tbb, cl = rows.get((op, case, size, 0)), rows.get((op, case, size, 1))
            cells.append(f"{num(us(cl) / us(tbb))}×" if tbb and cl else "")
            a = auto.get((op, case, size))
            if a is not None:
                picks.append("OpenCL" if a["auto_opencl"] >= 0.5 else "oneTBB")
                bests.append(a["auto_over_best"])
                total += 1
                within += a["auto_over_best"] <= 1.10
        big = rows.get((op, case, 64 << 20, 1))
        phases = (f"{num(big['upload_ms'])} / {num(big['kernel_ms'])} / {num(big['download_ms'])}"
                  if big else "")
        on = picks[0] if picks and len(set(picks)) == 1 else ", ".join(picks)
        out.append([op, case, *cells, phases, on,
                    " / ".join(f"{b:.2f}" for b in bests)])
    lines += table(["operator", "case", "OpenCL time / oneTBB's: 1 KiB", "1 MiB", "64 MiB",
                    "64 MiB on OpenCL: upload / kernel / download ms", "AUTO runs on",
                    "AUTO / best (1 KiB / 1 MiB / 64 MiB)"], out)
    if total:
        lines += ["", f"AUTO / best within 1.10 (the target) in {within} of {total} cases."]
    return lines


def small(doc: dict) -> list[str]:
    rows = doc["data"]["rows"]
    by = {(r["scenario"], r["server"]): r for r in rows}
    targets = {"Run, small Slice": "≥ 0.7"}
    out = []
    for r in rows:
        if r["server"] != "tensord":
            continue
        echo = by.get((r["scenario"], "echo baseline"))
        target = next((t for k, t in targets.items() if r["scenario"].startswith(k)), "")
        per = r.get("requests_per_call", 1)
        figure = f"{num(r['rps'])} calls/s"
        if per > 1:
            figure += f" ({num(r['rps'] * per)} requests/s)"
        if echo:
            ratio = r["rps"] / echo["rps"]
            out.append([r["scenario"], figure, f"{num(echo['rps'])} calls/s",
                        f"**{ratio:.2f}**", met(ratio, target),
                        f"{num(r['p99_ms'])} / {num(echo['p99_ms'])}",
                        f"{num(r['server_cpu_us'])} / {num(echo['server_cpu_us'])}",
                        str(r["errors"] + echo["errors"])])
        else:
            out.append([r["scenario"], figure, "", "", "", num(r["p99_ms"]),
                        num(r["server_cpu_us"]) + (" per request" if per > 1 else ""),
                        str(r["errors"])])
    return table(["scenario (ghz flags)", "tensord", "echo baseline", "ratio", "target",
                  "p99 ms, tensord / echo", "server CPU µs a call, tensord / echo", "errors"],
                 out)


def v2(doc: dict) -> list[str]:
    names = {"small": "small: the 64-byte Slice (-n 10000 -c 16)",
             "1mib": "1 MiB: a whole [1024, 1024] UINT8 window (-n 300 -c 4)"}
    out = []
    for r in doc["data"]["rows"]:
        ratio = r["model_infer_rps"] / r["run_rps"]
        out.append([names.get(r["request"], r["request"]), f"{num(r['model_infer_rps'])}",
                    f"{num(r['run_rps'])}", f"**{ratio:.2f}**", met(ratio, "≥ 0.9"),
                    str(r["errors"])])
    return table(["request", "ModelInfer calls/s", "Run calls/s (the baseline)",
                  "ModelInfer / Run", "target", "errors"], out)


def bulk(doc: dict) -> list[str]:
    out = []
    for r in doc["data"]["rows"]:
        unit = r["unit"]
        out.append([r["scenario"], f"{num(r['tensord'])} {unit}",
                    f"{num(r['bare'])} {unit}", f"**{r['ratio']:.2f}**",
                    met(r["ratio"], r["target"]),
                    f"{num(r['tensord_cpu_ms'])} / {num(r['bare_cpu_ms'])}",
                    f"{r['tensord_rss_per_payload']:.2f} ({r['bare_rss_per_payload']:.2f})",
                    met(r["tensord_rss_per_payload"], r["rss_target"])])
    return table(["scenario", "tensord", "bare baseline", "ratio", "target",
                  "CPU ms a call, tensord / bare", "peak RSS / payload, tensord (bare)",
                  "RSS target"], out)


def python(doc: dict) -> list[str]:
    d = doc["data"]
    out = []
    b = d["python_bench"]
    s = b["seconds"]
    mib = b["bytes"] >> 20
    what = f"`Client.run`, {mib} MiB in + {mib} MiB out"
    out.append([what, ms(s["client_tensord"]), f"raw grpcio against the bare baseline: "
                f"{ms(s['raw_bare'])}", f"**{s['raw_bare'] / s['client_tensord']:.2f}**",
                met(s["raw_bare"] / s["client_tensord"], "≥ 0.8")])
    out.append([what, ms(s["client_tensord"]), f"raw grpcio against tensord: "
                f"{ms(s['raw_tensord'])}", f"{s['raw_tensord'] / s['client_tensord']:.2f}", ""])
    out.append([what, ms(s["client_tensord"]), f"numpy copying the bytes: "
                f"{ms(s['numpy_copy'])}", f"{s['numpy_copy'] / s['client_tensord']:.2f}", ""])
    rt = d.get("round_trip")
    if rt:
        t = rt["seconds"]
        what = f"`AsyncClient.run`, {rt['mib']:g} MiB in + out"
        out.append([what, ms(t["async_client"]), f"raw grpcio `Run` against tensord: "
                    f"{ms(t['raw'])}", f"{t['raw'] / t['async_client']:.2f}", ""])
        out.append([f"`Client.run` (RunChunked upload), {rt['mib']:g} MiB in + out",
                    ms(t["client"]), f"raw grpcio `RunChunked` against tensord: "
                    f"{ms(t['raw_chunked'])}", f"{t['raw_chunked'] / t['client']:.2f}", ""])
    rss = d.get("rss")
    if rss:
        out.append([f"`Client.run`, a {rss['gib']} GiB input and a {rss['gib']} GiB result: "
                    "peak client RSS", f"{num(rss['peak_bytes'] / (1 << 30))} GiB",
                    f"the payload: {rss['gib']} GiB",
                    f"{rss['peak_per_payload']:.2f}× the payload",
                    met(rss["peak_per_payload"], "≤ 2.5")])
    many = d.get("many")
    if many:
        t = many["seconds"]
        n = many["count"]
        base = f"`Client.run` one by one: {num(n / t['sequential'])}/s"
        out.append([f"{n} small Slices, `run_many` (RunBidi, window {many['window']})",
                    f"{num(n / t['run_many'])}/s", base,
                    f"{t['sequential'] / t['run_many']:.2f}", ""])
        out.append([f"{n} small Slices, `AsyncClient.run_many`",
                    f"{num(n / t['async_run_many'])}/s", base,
                    f"{t['sequential'] / t['async_run_many']:.2f}", ""])
    return table(["measured", "figure", "baseline, same run", "ratio (throughput)", "target"],
                 out)


def shm(doc: dict) -> list[str]:
    d = doc["data"]
    s = d["seconds"]
    what = f"a {d['mib']} MiB Slice, input and output in shared memory (Unix socket)"
    out = [
        [what, ms(s["shm"]), f"numpy `np.copyto`: {ms(s['numpy_copyto'])}",
         f"**{s['shm'] / s['numpy_copyto']:.2f}×**", met(s["shm"] / s["numpy_copyto"], "≤ 2")],
        [what, ms(s["shm"]), f"numpy `.copy()`: {ms(s['numpy_copy'])}",
         f"{s['shm'] / s['numpy_copy']:.2f}×", ""],
        [f"the same {d['mib']} MiB, the bytes inline over the Unix socket / TCP",
         f"{ms(s['inline_uds'])} / {ms(s['inline_tcp'])}",
         f"numpy `np.copyto`: {ms(s['numpy_copyto'])}",
         f"{s['inline_uds'] / s['numpy_copyto']:.1f}× / "
         f"{s['inline_tcp'] / s['numpy_copyto']:.1f}×",
         ""],
        [f"1 KiB `run` over the Unix socket ({d['small_rounds']} rounds)", ms(s["small_uds"]),
         f"TCP loopback: {ms(s['small_tcp'])}", f"{s['small_uds'] / s['small_tcp']:.2f}×", ""],
    ]
    return table(["measured (medians of %d alternating rounds)" % d["rounds"], "tensord",
                  "baseline, same run", "time / baseline's", "target"], out)


HANDLES = {
    "bidi": re.compile(r"sent each time ([\d.]+) ms, put once ([\d.]+) ms, ratio ([\d.]+)"),
    "sequence": re.compile(r"separate Runs ([\d.]+) ms, handles .*?\) ([\d.]+) ms, ratio ([\d.]+)"),
    "chain": re.compile(r"separate Runs ([\d.]+) ms, put once and chained .*?\) ([\d.]+) ms, "
                        r"ratio ([\d.]+)"),
}


def handles(doc: dict) -> list[str]:
    text = doc["data"]["handles_bench"]
    found = {}
    for line in text.splitlines():
        key = line.split(":", 1)[0]
        if key in HANDLES and (match := HANDLES[key].search(line)):
            found[key] = [float(v) for v in match.groups()]
    rounds = re.search(r"median of (\d+) rounds", text)
    names = {
        "bidi": ("100 small slices of one 1 MiB tensor through one `RunBidi`",
                 "the tensor `Put` once, named by its handle", "≥ 5"),
        "sequence": ("4 ops on a 32 MiB float32 tensor, each a `Run` carrying its inputs",
                     "`Put` once, 4 kept `Run`s, 2 `Fetch`es", ""),
        "chain": ("the same 4 ops", "`Put` once, one `RunChain` streaming both halves", "≥ 3"),
    }
    out = []
    for key, (what, held, target) in names.items():
        if key not in found:
            continue
        send, kept, ratio = found[key]
        out.append([what, f"{num(send)} ms", f"{held}: {num(kept)} ms", f"**{ratio:.2f}**",
                    met(ratio, target)])
    head = f"sending the tensors (median of {rounds.group(1)} rounds)" if rounds else "sending"
    return table(["what", head, "tensors on the server", "ratio", "target"], out)


def views(doc: dict) -> list[str]:
    c = doc["data"]["chain"]
    t = c["seconds"]
    growth = c.get("server_rss_growth_kib")
    rss = "" if growth is None else f", server RSS {growth / 1024:+.1f} MiB"
    out = [
        ["one `chain` of 4 whole-window Slices of 32 MiB, the tensor inline", ms(t["chain"]),
         f"4 separate `run`s: {ms(t['separate'])}",
         f"**{t['separate'] / t['chain']:.2f}×** faster",
         met(t["separate"] / t["chain"], "≥ 3.0")],
        ["`put` + 4 `run(keep=True)` + `fetch`", ms(t["kept"]),
         f"4 separate `run`s: {ms(t['separate'])}",
         f"{t['separate'] / t['kept']:.2f}× faster", ""],
        ["the chain against put + kept runs + fetch", ms(t["chain"]),
         f"put + kept runs + fetch: {ms(t['kept'])}",
         f"{t['kept'] / t['chain']:.2f}× faster", met(t["kept"] / t["chain"], "≥ 1.0")],
        ["a chain of 16 Slice steps on a resident tensor, result kept",
         ms(t["resident_chain_16"]), f"a chain of 1 step: {ms(t['resident_chain_1'])}",
         f"**{t['resident_chain_16'] / t['resident_chain_1']:.2f}×** the time",
         met(t["resident_chain_16"] / t["resident_chain_1"], "≤ 1.3")],
        ["`run(keep=True)` of half a resident 1 GiB tensor", ms(t["keep_half_of_1gib"]) + rss,
         f"the same of a 16-byte tensor: {ms(t['keep_half_of_16_bytes'])}",
         f"{t['keep_half_of_1gib'] / t['keep_half_of_16_bytes']:.2f}× the time",
         "≤ 1 ms: " + ("met" if t["keep_half_of_1gib"] <= 1e-3 else "**not met**")],
    ]
    if "keep_transpose_of_1gib" in t:  # issue 44's layout operators
        growth = t.get("layout_views_rss_growth_kib")
        layout_rss = "" if growth is None else f", server RSS {growth / 1024:+.1f} MiB"
        for op in ("transpose", "reshape", "expand"):
            seconds = t[f"keep_{op}_of_1gib"]
            out.append([f"`run(keep=True)` of {'an' if op == 'expand' else 'a'} {op} of a resident "
                        "1 GiB tensor (a view)",
                        ms(seconds) + (layout_rss if op == "expand" else ""),
                        f"a Slice of a 16-byte tensor: {ms(t['keep_half_of_16_bytes'])}",
                        f"{seconds / t['keep_half_of_16_bytes']:.2f}× the time",
                        "≤ 1 ms: " + ("met" if seconds <= 1e-3 else "**not met**")])
        out.append(["a chain of 16 transpose, reshape, expand and window steps on a resident "
                    "32 MiB tensor, result kept", ms(t["layout_chain_16"]),
                    f"a chain of 1 step: {ms(t['layout_chain_1'])}",
                    f"**{t['layout_chain_16'] / t['layout_chain_1']:.2f}×** the time",
                    met(t["layout_chain_16"] / t["layout_chain_1"], "≤ 1.3")])
        out.append(["one `chain` of a transpose of 32 MiB then a 1 MiB Slice of it, the tensor inline",
                    ms(t["transpose_slice_chain"]),
                    f"2 separate `run`s: {ms(t['transpose_slice_runs'])}",
                    f"**{t['transpose_slice_runs'] / t['transpose_slice_chain']:.2f}×** faster",
                    met(t["transpose_slice_runs"] / t["transpose_slice_chain"], "≥ 3.0")])
    if "join_slice_chain" in t:  # join
        local = ("fetch the 8, `numpy.concatenate` and the same slice here, `put` the result: "
                 + ms(t["join_slice_local"]))
        out.append(["one `chain` of a join of 8 kept 4 MiB tensors then a Slice of the middle "
                    "half of its rows (16 MiB), result kept (the round trip's end state)",
                    ms(t["join_slice_chain_kept"]), local,
                    f"**{t['join_slice_local'] / t['join_slice_chain_kept']:.2f}×** faster",
                    met(t["join_slice_local"] / t["join_slice_chain_kept"], "≥ 3.0")])
        out.append(["the same chain, result returned", ms(t["join_slice_chain"]), local,
                    f"{t['join_slice_local'] / t['join_slice_chain']:.2f}× faster", ""])
    if "device_keep_half_view" in t:  # the server had an OpenCL device
        out.append(["`run(keep=True)` of half a 256 MiB tensor resident on OpenCL (a view)",
                    ms(t["device_keep_half_view"]),
                    f"the window reversed, a copy on the device: {ms(t['device_keep_half_copy'])}",
                    f"**{t['device_keep_half_copy'] / t['device_keep_half_view']:.0f}×** faster",
                    ""])
    return table([f"measured (best of {c['rounds']})", "figure", "baseline, same run",
                  "ratio", "target"], out)


RENDER = {"kernels": kernels, "layout": layout, "copies": copies, "opencl": opencl, "small": small, "v2": v2, "bulk": bulk,
          "python": python, "shm": shm, "handles": handles, "views": views}


# --- the page ----------------------------------------------------------------------

def regions(text: str) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Each region's (begin line, end line) index, and what is wrong with the markers."""
    found: dict[str, tuple[int, int]] = {}
    problems, open_at = [], {}
    for i, line in enumerate(text.splitlines()):
        for name, which in MARKER.findall(line):
            if name not in REGIONS:
                problems.append(f"line {i + 1}: a region named {name}, which no area makes")
            elif which == "begin":
                if name in open_at or name in found:
                    problems.append(f"line {i + 1}: region {name} begins twice")
                open_at[name] = i
            elif name not in open_at:
                problems.append(f"line {i + 1}: region {name} ends before it begins")
            else:
                found[name] = (open_at.pop(name), i)
    problems += [f"region {name} never ends" for name in open_at]
    problems += [f"region {name} is missing" for name in REGIONS
                 if name not in found and name not in open_at]
    return found, problems


def write(page: Path, results: Path, areas: list[str]) -> None:
    text = page.read_text()
    lines = text.splitlines()
    spans, problems = regions(text)
    if problems:
        raise SystemExit("write_tables: " + "; ".join(problems))
    replaced = []
    # From the bottom up, so earlier indices stay valid.
    jobs = []
    for area in areas:
        path = results / f"{area}.json"
        if not path.exists():
            print(f"write_tables: no {path}: {area}'s tables left as they are", file=sys.stderr)
            continue
        doc = json.loads(path.read_text())
        for region in AREAS[area]:
            body = [stamp(doc), "", *RENDER[region](doc)]
            jobs.append((spans[region], body, region))
    for (begin, end), body, region in sorted(jobs, key=lambda j: -j[0][0]):
        lines[begin + 1:end] = body
        replaced.append(region)
    page.write_text("\n".join(lines) + "\n")
    if replaced:
        print(f"write_tables: rewrote {', '.join(sorted(replaced))} in {page.name}",
              file=sys.stderr)


def check(page: Path) -> int:
    text = page.read_text()
    _, problems = regions(text)
    count = len(text.splitlines())
    if count > MAX_LINES:
        problems.append(f"{page.name} has {count} lines, more than {MAX_LINES}")
    for problem in problems:
        print(f"write_tables --check: {problem}", file=sys.stderr)
    if not problems:
        print(f"write_tables --check: {len(REGIONS)} regions, {count} lines: ok")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("areas", nargs="*", help=f"of {', '.join(AREAS)} (default: all)")
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--record", metavar="AREA", choices=list(AREAS))
    for flag in ("--data", "--out", "--mode", "--started", "--command", "--load-before",
                 "--load-after"):
        parser.add_argument(flag, default="")
    parser.add_argument("--seconds", type=int, default=0)
    parser.add_argument("--shared", type=int, default=0)
    args = parser.parse_args()
    if args.check:
        return check(args.page)
    if args.record:
        record(args)
        return 0
    unknown = [a for a in args.areas if a not in AREAS]
    if unknown:
        parser.error(f"no area {', '.join(unknown)} (areas: {', '.join(AREAS)})")
    write(args.page, args.results, args.areas or list(AREAS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
