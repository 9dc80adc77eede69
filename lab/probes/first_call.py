#!/usr/bin/env python3
"""The first call of every default GEMM kernel, end to end, on a GPU host (issue 18's bars: a
cold first call <= 0.5 s per default config, a disk-cache hit <= 5 ms).

For each distinct kernel the runtime picks (heuristic and shipped rows, as a user gets them) over
the shape lists' lines in block, per-tensor and fast-accumulation modes, one shape that maps to
it is called through the C ABI (bench/peers/fp8jit_ctypes.py), each time from a new runtime
handle, so its memory cache is empty:
  cold: an empty disk cache: generate, NVRTC, post-passes, cubin written, module load, launch;
        split into NVRTC (the runtime's own compile clock) and the rest;
  disk: the same cache again from a new handle: read, module load, launch;
  warm: a second call on that handle (the launch alone).
Each is host wall time up to a stream synchronisation. The cubin the cold call wrote (its
post-passes applied, as loaded) is disassembled with cuobjdump where the host has it: QGMMA
count and local-memory instructions (LDL/STL), which must be none. The process's first call (the driver's
context, NVRTC's libraries loading) is reported on its own line and left out of the summary,
as a server pays it once. Run with CUDA_CACHE_DISABLE=1 (lab/scripts/first_call.sh sets it).

Usage: python3 lab/probes/first_call.py --lib build/libfp8jit.so [--lists A.csv,B.csv]
           [--out FILE.md]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
import fp8jit_ctypes as fj  # noqa: E402
import peers_core as pc  # noqa: E402

COLD_BAR_S, DISK_BAR_S = 0.5, 0.005
MODES = {"block": (fj.SCALE_MODE_BLOCK, False), "tensor": (fj.SCALE_MODE_TENSOR, False),
         "tensor-fast": (fj.SCALE_MODE_TENSOR, True)}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lib", required=True, help="libfp8jit.so")
    p.add_argument("--lists", default="bench/shapes/deepseek_v3.csv,bench/shapes/open_models.csv")
    p.add_argument("--out", help="write the markdown report here too (a temporary name, then renamed)")
    a = p.parse_args(argv)
    a.list_paths = [x for x in a.lists.split(",") if x]
    if not a.list_paths:
        p.error("--lists is empty")
    for path in a.list_paths:
        if not os.path.isfile(path):
            p.error(f"--lists: {path}: no such file")
        try:
            if not pc.read_shapes(path):
                p.error(f"--lists: {path}: no m,n,k rows")
        except pc.InputError as e:
            p.error(f"--lists: {e}")
    if not os.path.isfile(a.lib):
        p.error(f"--lib {a.lib}: no such file")
    if a.out and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        p.error(f"--out {a.out}: its folder does not exist")
    return a


class Operands:
    """Device operands of one shape and scale mode (values do not matter: only the time does)."""

    def __init__(self, torch, lib, m, n, k, mode):
        scale_mode, fast = MODES[mode]
        self.args = lib.gemm_args(m, n, k, scale_mode, fast_accum=fast)
        self.a = torch.zeros(m, k, dtype=torch.uint8, device="cuda")
        self.b = torch.zeros(n, k, dtype=torch.uint8, device="cuda")
        self.d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        self.sa = torch.ones(self.args.scale_a_size, dtype=torch.float32, device="cuda")
        self.sb = torch.ones(self.args.scale_b_size, dtype=torch.float32, device="cuda")
        self.args.a, self.args.b, self.args.d = self.a.data_ptr(), self.b.data_ptr(), self.d.data_ptr()
        self.args.scale_a, self.args.scale_b = self.sa.data_ptr(), self.sb.data_ptr()


def distinct_kernels(torch, lib_path, lists):
    """{kernel name: (m, n, k, mode)}, the first line of the lists that selects it."""
    out = {}
    with fj.Fp8jit(lib_path, cache_dir="", shipped_tuning=fj.Fp8jit.INSTALLED_ROWS) as lib:
        for path in lists:
            for s in pc.read_shapes(path):
                for mode, (scale_mode, fast) in MODES.items():
                    args = lib.gemm_args(s.m, s.n, s.k, scale_mode, fast_accum=fast)
                    # Selection reads no operand; it only refuses null (or misaligned) pointers.
                    args.a = args.b = args.d = args.scale_a = args.scale_b = 1 << 20
                    name = lib.select(args)
                    out.setdefault(name, (s.m, s.n, s.k, mode))
    return out


def cache_payload(path):
    """The binary of one disk-cache entry (runtime/jit/binary_cache.cpp: magic, format version, key
    size, key, payload size, checksum, payload)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"FP8JITC1":
        raise RuntimeError(f"{path}: not an fp8jit cache entry")
    key_size = int.from_bytes(data[12:20], "little")
    fixed = 20 + key_size + 16
    if int.from_bytes(data[20 + key_size:28 + key_size], "little") != len(data) - fixed:
        raise RuntimeError(f"{path}: entry size does not match its header")
    return data[fixed:]


def sass_counts(cache):
    """(QGMMA, LDL + STL) over the cubins in a cache folder; None without cuobjdump."""
    tool = shutil.which("cuobjdump") or ("/usr/local/cuda/bin/cuobjdump"
                                         if os.path.exists("/usr/local/cuda/bin/cuobjdump") else None)
    if not tool:
        return None
    qgmma = local = 0
    for entry in glob.glob(os.path.join(cache, "*", "*.cubin")):
        cubin = entry + ".raw"
        with open(cubin, "wb") as f:
            f.write(cache_payload(entry))
        sass = subprocess.run([tool, "--dump-sass", cubin], capture_output=True, text=True, check=True).stdout
        qgmma += len(re.findall(r"\bQGMMA\b", sass))
        local += len(re.findall(r"\b(LDL|STL)\b", sass))
    return qgmma, local


def timed_call(torch, lib, ops):
    stream = torch.cuda.current_stream().cuda_stream
    t0 = time.perf_counter()
    lib.gemm(ops.args, stream)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def first_calls(torch, lib_path, shape):
    """(cold s, NVRTC s, disk s, warm s, SASS counts) of one kernel from an empty disk cache."""
    cache = tempfile.mkdtemp(prefix="fp8jit-first-call-")
    try:
        with fj.Fp8jit(lib_path, cache_dir=cache, shipped_tuning=fj.Fp8jit.INSTALLED_ROWS) as lib:
            ops = Operands(torch, lib, *shape)
            cold = timed_call(torch, lib, ops)
            st = lib.cache_stats()
        sass = sass_counts(cache)
        with fj.Fp8jit(lib_path, cache_dir=cache, shipped_tuning=fj.Fp8jit.INSTALLED_ROWS) as lib:
            # ops.args holds only device pointers and sizes: any handle of the library takes it.
            disk = timed_call(torch, lib, ops)
            warm = timed_call(torch, lib, ops)
            hits = lib.cache_stats()["disk_hits"]
        if st["compiles"] != 1 or hits != 1:
            raise RuntimeError(f"expected one compile, then one disk hit: {st['compiles']}, {hits}")
        return cold, st["compile_seconds"], disk, warm, sass
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def report(rows, first):
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    sass_text = lambda c: "-" if c is None else f"{c[0]} / {c[1]}"  # noqa: E731
    out = ["| kernel | line | cold ms | of which NVRTC | the rest | disk hit ms | warm ms | QGMMA / LDL+STL |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, shape, (cold, nvrtc, disk, warm, sass) in rows:
        out.append(f"| {name} | {shape[0]}x{shape[1]}x{shape[2]} {shape[3]} | {ms(cold)} | {ms(nvrtc)} | "
                   f"{ms(cold - nvrtc)} | {disk * 1e3:.2f} | {warm * 1e3:.3f} | {sass_text(sass)} |")
    colds = [r[2][0] for r in rows]
    disks = [r[2][2] for r in rows]
    rest = [r[2][0] - r[2][1] for r in rows]
    out += ["", f"{len(rows)} default kernels after the process's first call: cold first call mean "
            f"{ms(statistics.mean(colds))} ms, median {ms(statistics.median(colds))}, max {ms(max(colds))} "
            f"({max(rows, key=lambda r: r[2][0])[0]}); {sum(c <= COLD_BAR_S for c in colds)} of {len(rows)} "
            f"within {COLD_BAR_S:g} s; outside NVRTC mean {ms(statistics.mean(rest))} ms. Disk-cache hit: mean "
            f"{statistics.mean(disks) * 1e3:.2f} ms, max {max(disks) * 1e3:.2f}; "
            f"{sum(d <= DISK_BAR_S for d in disks)} of {len(rows)} within {DISK_BAR_S * 1e3:g} ms."]
    sass = [r[2][4] for r in rows if r[2][4] is not None]
    if sass:
        out.append(f"SASS ({len(sass)} kernels disassembled): {sum(c[0] > 0 for c in sass)} with QGMMA, "
                   f"{sum(c[1] > 0 for c in sass)} with local memory (LDL/STL).")
    if first:
        name, shape, (cold, nvrtc, disk, warm, _) = first
        out.append(f"The process's first call ({name}, {shape[0]}x{shape[1]}x{shape[2]} {shape[3]}): "
                   f"{ms(cold)} ms cold ({ms(nvrtc)} NVRTC), {disk * 1e3:.2f} ms from the disk cache.")
    return "\n".join(out) + "\n"


def main(argv=None):
    a = parse(argv if argv is not None else sys.argv[1:])
    import torch
    if not torch.cuda.is_available():
        sys.exit("first_call.py: no GPU")
    torch.cuda.init()
    kernels = distinct_kernels(torch, a.lib, a.list_paths)
    print(f"{len(kernels)} distinct default kernels; CUDA_CACHE_DISABLE={os.environ.get('CUDA_CACHE_DISABLE')}",
          flush=True)
    rows, first = [], None
    for i, (name, shape) in enumerate(kernels.items()):
        r = (name, shape, first_calls(torch, a.lib, shape))
        print(f"  {name}: cold {r[2][0] * 1e3:.1f} ms (NVRTC {r[2][1] * 1e3:.1f}), disk {r[2][2] * 1e3:.2f} ms",
              flush=True)
        if i == 0:
            first = r
            r = (name, shape, first_calls(torch, a.lib, shape))  # again, as every later kernel is timed
        rows.append(r)
    text = report(rows, first)
    print(text)
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
