"""PyTorch on the GPU doing operators_bench's 64 MiB float32 shapes, each timed two ways:
by host wall clock around the call and a synchronize (median of 20, as ../shared/gpu/limits.py
times them) and by CUDA events around the call alone (median of 50), so tensord's profiled
kernel phase compares with the event figure. Prints JSON lines: what, us_wall, us_event and
GB/s of output bytes by each. usage: python3 torch_ref.py [MiB]"""
import json
import sys
import time

import torch


def wall(fn, reps=20):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
    ts.sort(); return ts[len(ts) // 2]


def event(fn, reps=50):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
    ts.sort(); return ts[len(ts) // 2]


def emit(what, n, fn):
    w, e = wall(fn), event(fn)
    print(json.dumps({"what": what, "mib": n >> 20, "us_wall": round(w * 1e6, 2),
                      "us_event": round(e * 1e6, 2), "gbps": round(n / w / 1e9, 1),
                      "gbps_event": round(n / e / 1e9, 1)}), flush=True)


mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
n = mib << 20
dev = torch.device("cuda")
print(json.dumps({"what": "device", "name": torch.cuda.get_device_name(0), "torch": torch.__version__}))
rows = n // 4 // 1024
src_tall = torch.randn(rows + 2, 1024, device=dev)
src2 = torch.randn(rows, 2048, device=dev)
out = torch.empty(rows, 1024, device=dev)
emit("torch_slice_contiguous", n, lambda: out.copy_(src_tall[1:rows + 1]))
emit("torch_slice_strided", n, lambda: out.copy_(src2[:, ::2]))
emit("torch_slice_reversed", n, lambda: out.copy_(src_tall[:rows].flip(1)))
emit("torch_slice_broadcast", n, lambda: out.copy_(src_tall[0].expand(rows, 1024)))
side = int(round((n // 4) ** 0.5))
sq = torch.randn(side, side, device=dev)
sq_out = torch.empty(side, side, device=dev)
emit("torch_transpose", n, lambda: sq_out.copy_(sq.t()))
# operators_bench's scatter: every row of updates to a row chosen by a permutation (axis 0);
# PyTorch takes int64 indices (operators_bench gives tensord int32).
perm = torch.randperm(rows, device=dev)
idx = perm[:, None].expand(rows, 1024).contiguous()
upd = torch.randn(rows, 1024, device=dev)
emit("torch_scatter_rows", n, lambda: out.scatter_(0, idx, upd))
