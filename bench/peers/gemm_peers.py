#!/usr/bin/env python3
"""Peer GEMM benchmark, the GPU part: fp8jit (its C ABI through ctypes), DeepGEMM v1, DeepGEMM 2.6.1
and cuBLASLt (torch._scaled_mm) on the same FP8 inputs, in one process.

For each shape of each list: random A [M, K] and B [N, K] (E4M3, K-major) and random positive
scales, drawn once and shared by every provider; D is bf16. Scale modes:
  block        A 1x128 groups, B 128x128 blocks (DeepSeek-V3): fp8jit, both DeepGEMMs (v1's
               gemm_fp8_fp8_bf16_nt, 2.6.1's fp8_gemm_nt; the report also compares fp8jit with
               the faster of the two per shape), cuBLASLt where torch exposes it
               (torch._scaled_mm blockwise; precise accumulation only)
  tensor       one fp32 scale per operand, precise accumulation (cuBLASLt use_fast_accum=False)
  tensor-fast  the same with fast accumulation (fp8jit fast_accum, cuBLASLt use_fast_accum=True)
Every provider's output is poisoned (NaN) before a checked call and compared with a float64
reference on the dequantized operands (relative Frobenius error; above peers_core.ERROR_LIMIT is
flagged). Timing: kernel durations from the CUDA profiler (torch.profiler / kineto, CUPTI device
activity), so no provider's Python wrapper counts; an int32 fill of --flush-mib MiB flushes L2
before every call and is left out; warm-up calls first, then the median of --iters calls, the
providers of a shape taking turns call by call (a slow stretch of the GPU falls on all of them).

Usage (repository root, on a Hopper GPU; bench/peers/run.sh builds the library and calls this):
  python3 bench/peers/gemm_peers.py --lib build-peers/libfp8jit.so --out DIR
      [--lists deepseek-v3,open-models] [--scales block,tensor,tensor-fast]
      [--providers fp8jit,deepgemm,deepgemm2,cublaslt] [--only MxNxK,...] [--iters 30] [--warmup 5]
      [--deepgemm .carry/deepgemm] [--deepgemm2 .carry/deepgemm2]
      [--lib-base OTHER/libfp8jit.so [--shipped-base DIR] [--base-title NAME]]
A DeepGEMM whose tree is missing or (2.6.1) whose extension is not built is reported unavailable
with the reason; the rest still runs.
Writes DIR/gemm_peers.{md,csv,json} (rewritten after every shape, so a run cut short keeps what
it measured).
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import fp8jit_ctypes as fj  # noqa: E402
import peers_core as pc  # noqa: E402
from deepgemm_peers import DG2_VERSION, DeepGemm2Provider, DeepGemmProvider  # noqa: E402
from peer_util import T0, NotApplicable, Unsupported, log, result, short_error  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for gemm_peers.{md,csv,json}")
    p.add_argument("--lib", default=None, help="libfp8jit.so (default: build-peers/, build-gpu/ ... under the repo)")
    p.add_argument("--lib-base", default=None,
                   help="a second libfp8jit.so (e.g. the tree a patched build is measured against): a provider "
                        "and a peer of the first, timed in the same profiling window of each shape")
    p.add_argument("--shipped-base", default=None,
                   help="the tuned rows the --lib-base build reads (default: FP8JIT_SHIPPED_TUNING, else those "
                        "installed beside it; 'off' for none)")
    p.add_argument("--base-title", default=None, help="the --lib-base build's name in the report (default: fp8jit base)")
    p.add_argument("--lists", default="deepseek-v3,open-models",
                   help="shape lists: names in bench/shapes (deepseek-v3 = deepseek_v3.csv) or CSV paths")
    p.add_argument("--scales", default=",".join(pc.SCALES), help="block,tensor,tensor-fast")
    p.add_argument("--providers", default=",".join(pc.PROVIDERS), help=",".join(pc.PROVIDERS))
    p.add_argument("--only", default="", help="keep only these shapes, MxNxK comma-separated (a quick check)")
    p.add_argument("--iters", type=int, default=30, help="timed calls per provider, shape and scale (median)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls before them (after the checked call)")
    p.add_argument("--flush-mib", type=int, default=256, help="L2 flush: MiB written before every call")
    p.add_argument("--flush", choices=("write", "read"), default="write",
                   help="how L2 is flushed: write (dirty lines left, the default) or read (clean lines)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--deepgemm", default=os.path.join(ROOT, ".carry", "deepgemm"),
                   help="DeepGEMM source tree (its deep_gemm package is imported from there)")
    p.add_argument("--deepgemm2", default=os.path.join(ROOT, ".carry", "deepgemm2"),
                   help="DeepGEMM 2.6.1 tree, its extension built in place (bench/peers/setup_deepgemm2.py, run.sh)")
    p.add_argument("--jobs", type=int, default=0, help="parallel DeepGEMM compiles (0: CPU count)")
    p.add_argument("--name", default="gemm_peers", help="base name of the report files")
    p.add_argument("--max-seconds", type=float, default=0,
                   help="start no new shape after this many seconds (0: no limit); the report names the shapes left out")
    a = p.parse_args(argv)
    try:
        a.scale_list = pc.parse_choice_list(a.scales, pc.SCALES, "--scales")
        a.provider_list = pc.parse_choice_list(a.providers, pc.PROVIDERS, "--providers")
        a.list_paths = [pc.resolve_shape_list(x.strip()) for x in a.lists.split(",") if x.strip()]
        if not a.list_paths:
            raise pc.InputError("--lists: empty")
        a.only_set = set()
        for item in [x.strip() for x in a.only.split(",") if x.strip()]:
            m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", item)
            if not m:
                raise pc.InputError(f"--only: '{item}' is not MxNxK")
            a.only_set.add(tuple(int(v) for v in m.groups()))
        if a.iters < 1 or a.warmup < 0 or not 1 <= a.flush_mib <= 65536:
            raise pc.InputError("--iters must be >= 1, --warmup >= 0, --flush-mib in [1, 65536]")
        if a.jobs < 0 or a.max_seconds < 0:
            raise pc.InputError("--jobs and --max-seconds must be >= 0")
        if a.lib_base is not None and not os.path.isfile(a.lib_base):
            raise pc.InputError(f"--lib-base '{a.lib_base}': no such file")
        if a.lib_base is None and (a.shipped_base is not None or a.base_title is not None):
            raise pc.InputError("--shipped-base and --base-title describe the --lib-base build: give --lib-base")
        if a.lib_base and "fp8jit" not in a.provider_list:
            raise pc.InputError("--lib-base needs the fp8jit provider (the build it is compared with)")
        if a.shipped_base is not None and a.shipped_base != "off" and not os.path.isdir(a.shipped_base):
            raise pc.InputError(f"--shipped-base '{a.shipped_base}': not a folder (or 'off' for no tuned rows)")
        if a.base_title is not None and not a.base_title.strip():
            raise pc.InputError("--base-title: empty")
    except pc.InputError as e:
        p.error(str(e))
    if a.lib_base:
        pc.enable_baseline(a.base_title or "fp8jit base")
    return a


# ---- profiler -----------------------------------------------------------------------------------

SYNC_NAME = re.compile(r"^(Context|Stream|Event|Device)[ _]?(Sync|Synchronize|Wait)", re.I)


def device_events(prof, torch):
    """(name, start_ns, duration_ns) of every device-side activity (kernels, memcpy, memset) the
    profiler recorded, synchronisation records left out."""
    from torch.autograd import DeviceType
    out = []
    kr = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if kr is not None:
        for e in kr.events():
            if e.device_type() != DeviceType.CUDA:
                continue
            start = e.start_ns() if hasattr(e, "start_ns") else int(e.start_us() * 1000)
            dur = e.duration_ns() if hasattr(e, "duration_ns") else int(e.duration_us() * 1000)
            out.append((e.name(), start, dur))
    else:  # older or newer torch: the parsed events
        for fe in prof.events():
            if fe.device_type == DeviceType.CUDA:
                out.append((fe.name, int(fe.time_range.start * 1000),
                            int((fe.time_range.end - fe.time_range.start) * 1000)))
    return [e for e in out if not SYNC_NAME.match(e[0])]


def is_flush(name):
    return "FillFunctor" in name


def is_read_flush(name):
    return "reduce_kernel" in name


class Timer:
    """Profiles calls with an L2 flush before each; see peers_core.split_by_flush."""

    def __init__(self, torch, flush_mib, mode="write"):
        self.torch = torch
        self.buf = torch.full((flush_mib * 2**20 // 4,), 7, dtype=torch.int32, device="cuda")
        self.mode = mode
        self.is_flush = is_flush if mode == "write" else is_read_flush
        self.names_logged = False

    def flush(self):
        # write (the field's convention, as DeepGEMM's and Triton's benchmarks zero a buffer):
        # L2 is left full of dirty lines, which the timed kernel's loads must write back to DRAM;
        # read: a reduction over the buffer leaves L2 full of clean lines, no write-backs.
        if self.mode == "write":
            self.buf.fill_(7)  # a FillFunctor<int> kernel: is_flush() tells it apart
        else:
            self.buf.amax()  # a reduce_kernel: is_read_flush() tells it apart

    def warm(self, fn, n):
        for _ in range(n):
            self.flush()
            fn()

    def time(self, fns, iters):
        """fns: callables; returns [(times_us, kernel names)] per callable. The callables take
        turns, one call each per round (peers_core.interleaved_call_times: a slow stretch of the
        GPU falls on all of them, not on whichever was being timed; G83 saw one shape run 15-20 %
        slow for two providers timed one after the other, and not for the third)."""
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                for fn in fns:
                    self.flush()
                    fn()
            self.flush()  # closes the last call
            torch.cuda.synchronize()
        events = device_events(prof, torch)
        if not self.names_logged:
            self.names_logged = True
            log("device activities seen by the profiler:",
                "; ".join(sorted({pc.short_kernel_name(n) for n, _, _ in events})))
        groups = pc.split_by_flush(events, self.is_flush, iters * len(fns))
        return pc.interleaved_call_times(groups, len(fns))


def copy_bandwidth(torch, timer, iters=10):
    """Device-to-device copy of 1 GiB (bytes read + written per second), the same method (CUDA
    events around each copy if the profiler shows no device activity for it)."""
    n = 2**30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    fn = lambda: dst.copy_(src)  # noqa: E731
    timer.warm(fn, 3)
    try:
        (times, names), = timer.time([fn], iters)
    except ValueError as e:
        log(f"copy through the profiler: {e}; timing it with CUDA events")
        times, names = [], ["copy_ (CUDA events)"]
        for _ in range(iters):
            timer.flush()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3)
    t = pc.median(times) * 1e-6
    return pc.copy_bandwidth(n, t), names


# ---- providers ----------------------------------------------------------------------------------

class Inputs:
    """A shape's operands, shared by every provider."""

    def __init__(self, torch, shape, seed, dev="cuda"):
        M, N, K = shape.mnk()
        self.M, self.N, self.K = M, N, K
        g = torch.Generator(device=dev)
        g.manual_seed(seed + 1000003 * M + 1009 * N + K)
        self.kb, self.nb, self.m4 = -(-K // 128), -(-N // 128), -(-M // 4) * 4
        # E4M3 values of about N(0, 2): |x| < 448, no NaN.
        self.A = (torch.randn(M, K, generator=g, device=dev, dtype=torch.bfloat16) * 2).to(torch.float8_e4m3fn)
        self.B = (torch.randn(N, K, generator=g, device=dev, dtype=torch.bfloat16) * 2).to(torch.float8_e4m3fn)
        # Block scales in [0.25, 2): A's 1x128 column-major with M padded to 4 (TMA; what fp8jit's
        # col_major_tma and DeepGEMM's get_col_major_tma_aligned_tensor give), B's 128x128 row-major.
        self.sa_buf = torch.rand(self.kb, self.m4, generator=g, device=dev) * 1.75 + 0.25
        self.sa = self.sa_buf[:, :M].t()  # [M, kb], strides (1, m4)
        self.sb = torch.rand(self.nb, self.kb, generator=g, device=dev) * 1.75 + 0.25  # [nb, kb]
        self.ta = torch.rand(1, generator=g, device=dev) * 1.75 + 0.25
        self.tb = torch.rand(1, generator=g, device=dev) * 1.75 + 0.25

    def reference(self, torch, scale):
        """float64 D on the dequantized operands."""
        N, K = self.N, self.K
        A = self.A.to(torch.float32).to(torch.float64)  # E4M3 -> fp32 is exact
        B = self.B.to(torch.float32).to(torch.float64)
        if scale == "block":
            A.mul_(self.sa.to(torch.float64).repeat_interleave(128, dim=1)[:, :K])
            sbx = self.sb.to(torch.float64).repeat_interleave(128, dim=0)[:N].repeat_interleave(128, dim=1)[:, :K]
            B.mul_(sbx)
            del sbx
            return A @ B.t()
        ref = A @ B.t()
        ref.mul_(float(self.ta.item()) * float(self.tb.item()))
        return ref


def rel_error(torch, D, ref):
    """('nan', None) when D holds a non-finite value (poison left or a broken result), else
    ('ok' or 'bad', relative Frobenius error)."""
    if not bool(torch.isfinite(D).all()):
        return "nan", None
    num = torch.linalg.vector_norm(D.to(torch.float64) - ref).item()
    den = torch.linalg.vector_norm(ref).item()
    err = num / den if den > 0 else (0.0 if num == 0 else float("inf"))
    return ("ok" if err <= pc.ERROR_LIMIT else "bad"), err


class Fp8jitProvider:
    name = "fp8jit"

    def __init__(self, torch, lib_path, lib=None):
        """lib: an fj.Fp8jit to use (e.g. one made with runtime options); else one made from
        lib_path with the FP8JIT_* environment (run.sh sets FP8JIT_CACHE_DIR)."""
        self.torch = torch
        self.lib = lib or fj.Fp8jit(lib_path)
        self.version = self.lib.version

    def _args(self, shape, scale):
        mode = fj.SCALE_MODE_BLOCK if scale == "block" else fj.SCALE_MODE_TENSOR
        return self.lib.gemm_args(shape.m, shape.n, shape.k, mode, fast_accum=(scale == "tensor-fast"))

    def precompile(self, shapes, scales):
        for scale in scales:
            t = time.time()
            try:
                self.lib.precompile(self._args(shapes[0], scale), [s.mnk() for s in shapes])
                log(f"fp8jit: precompiled {len(shapes)} shapes, {scale}, in {time.time() - t:.1f} s")
            except fj.Fp8jitError as e:  # the kernels then compile on first use
                log(f"fp8jit: precompile {scale} failed ({short_error(e, 400)}); compiling on first use")

    def prepare(self, inp, scale, D):
        args = self._args(pc.Shape(inp.M, inp.N, inp.K), scale)
        args.a, args.b, args.d = inp.A.data_ptr(), inp.B.data_ptr(), D.data_ptr()
        if scale == "block":
            need = self.lib.scale_count(fj.GRANULARITY_GROUP128, fj.LAYOUT_COL_MAJOR_TMA, inp.M, inp.K)
            if need != inp.sa_buf.numel() or args.scale_a_layout != fj.LAYOUT_COL_MAJOR_TMA:
                raise RuntimeError(f"fp8jit wants {need} A scales, the shared buffer holds {inp.sa_buf.numel()}")
            args.scale_a, args.scale_b = inp.sa_buf.data_ptr(), inp.sb.data_ptr()
        else:
            args.scale_a, args.scale_b = inp.ta.data_ptr(), inp.tb.data_ptr()
        config = self.lib.select(args)
        stream = self.torch.cuda.current_stream().cuda_stream
        lib = self.lib
        return (lambda: lib.gemm(args, stream)), config, D


class CublasLtProvider:
    name = "cublaslt"

    def __init__(self, torch):
        self.torch = torch
        if not hasattr(torch, "_scaled_mm"):
            raise RuntimeError("this torch has no torch._scaled_mm")
        self.block_layouts = {}

    def _mm(self, A, Bt, sa, sb, fast, D):
        torch = self.torch
        return torch._scaled_mm(A, Bt, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast, out=D)

    def block_candidates(self, inp):
        """Scale layouts torch._scaled_mm may take for 1x128 x 128x128 (the values are the shared
        scales): A [M, kb] outer-dim-major with stride M (or M padded to 4); B's 128x128 as
        scale_b [kb, nb] with stride kb (or kb padded to 4, cuBLASLt's L4)."""
        torch = self.torch
        M, kb, nb = inp.M, inp.kb, inp.nb
        l4 = -(-kb // 4) * 4
        a_exact = inp.sa_buf[:, :M].contiguous().t()  # [M, kb], strides (1, M)
        b_kb = inp.sb.t()  # [kb, nb], strides (1, kb)
        b_pad = torch.ones(nb, l4, device="cuda")
        b_pad[:, :kb] = inp.sb
        b_l4 = b_pad[:, :kb].t()  # [kb, nb], strides (1, l4)
        out = [("A(1,M) B(1,kb)", a_exact, b_kb), ("A(1,M) B(1,L4)", a_exact, b_l4),
               ("A(1,M4) B(1,kb)", inp.sa, b_kb), ("A(1,M4) B(1,L4)", inp.sa, b_l4)]
        seen, uniq = set(), []
        for name, a, b in out:
            key = (a.stride(), b.stride())
            if key not in seen:
                seen.add(key)
                uniq.append((name, a, b))
        return uniq

    def prepare(self, inp, scale, D):
        A, Bt = inp.A, inp.B.t()
        if scale == "block":
            raise RuntimeError("block goes through prepare_block")
        fast = scale == "tensor-fast"
        sa, sb = inp.ta, inp.tb
        return (lambda: self._mm(A, Bt, sa, sb, fast, D)), f"per-tensor{' fast' if fast else ''}", D


def cublaslt_version():
    """cublasLtGetVersion() of the libcublasLt this process loaded (after a _scaled_mm)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "libcublasLt" in line}
        for p in sorted(paths):
            lib = ctypes.CDLL(p)
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            return f"{lib.cublasLtGetVersion()} ({os.path.basename(p)})"
    except OSError:
        pass
    return "unknown"


# ---- one shape ----------------------------------------------------------------------------------

def run_shape(torch, a, shape, list_name, providers, timer):
    """Rows (one per scale mode) for one shape."""
    inp = Inputs(torch, shape, a.seed)
    rows = {scale: {"list": list_name, "label": shape.label, "m": shape.m, "n": shape.n, "k": shape.k,
                    "scale": scale, "providers": {}} for scale in a.scale_list}
    outs = {p: torch.empty(shape.m, shape.n, dtype=torch.bfloat16, device="cuda") for p in providers}
    combos = []  # (scale, provider name, fn)
    refs = {}
    for scale in a.scale_list:
        ref_key = "block" if scale == "block" else "tensor"
        if ref_key not in refs:
            refs.clear()
            torch.cuda.empty_cache()
            refs[ref_key] = inp.reference(torch, scale)
        ref = refs[ref_key]
        for pname, prov in providers.items():
            res = rows[scale]["providers"]
            D = outs[pname]
            try:
                if pname == "cublaslt" and scale == "block":
                    fn, config, status, err, note = cublaslt_block(torch, prov, inp, D, ref)
                    if fn is None:
                        res[pname] = result(status, note=note, rel_err=err)
                        continue
                else:
                    fn, config, D = prov.prepare(inp, scale, D)
                    D.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    status, err = rel_error(torch, D, ref)
                    note = None
            except NotApplicable:
                res[pname] = result("n/a")
                continue
            except Unsupported as e:
                res[pname] = result("unsupported", note=short_error(e))
                continue
            except Exception as e:  # noqa: BLE001 - recorded per provider, the run goes on
                torch.cuda.synchronize()
                res[pname] = result("error", note=short_error(e))
                log(f"  {shape} {scale} {pname}: {short_error(e, 400)}")
                continue
            res[pname] = result(status, rel_err=err, config=config, note=note)
            if status in ("ok", "bad"):
                combos.append((scale, pname, fn))
    refs.clear()
    if combos:
        time_same_size_copies(torch, a, shape, rows, timer)
        for _, _, fn in combos:
            timer.warm(fn, a.warmup)
        try:
            timed = timer.time([fn for _, _, fn in combos], a.iters)
        except Exception as e:  # noqa: BLE001
            log(f"  {shape}: timing failed: {short_error(e, 400)}")
            for scale, pname, _ in combos:
                r = rows[scale]["providers"][pname]
                r["status"], r["note"] = "error", "timing: " + short_error(e)
            timed = None
        if timed:
            for (scale, pname, _), (times, names) in zip(combos, timed):
                r = rows[scale]["providers"][pname]
                r["us"] = pc.median(times)
                r["us_min"], r["us_max"] = min(times), max(times)
                r["kernels"] = names
    del inp, outs
    return [rows[s] for s in a.scale_list]


def time_same_size_copies(torch, a, shape, rows, timer):
    """rows[scale]["copy_us"] for M <= DECODE_MAX_M: the kernel time of a device-to-device copy
    moving as many bytes as the GEMM in that scale mode must (modes of equal bytes share one),
    timed as the providers are, right after them. A failure leaves the rows without it."""
    if shape.m > pc.DECODE_MAX_M:
        return
    sizes = {s: pc.matched_copy_bytes(shape.m, shape.n, shape.k, s) for s in a.scale_list}
    fns = {}
    for n in dict.fromkeys(sizes.values()):
        src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
        fns[n] = lambda src=src, dst=torch.empty_like(src): dst.copy_(src)
    try:
        for fn in fns.values():
            timer.warm(fn, a.warmup)
        timed = dict(zip(fns, timer.time(list(fns.values()), a.iters)))
    except Exception as e:  # noqa: BLE001 - the GEMMs' times stand without it
        log(f"  {shape}: same-size copy not timed: {short_error(e, 400)}")
        return
    for scale, n in sizes.items():
        rows[scale]["copy_us"] = pc.median(timed[n][0])


def cublaslt_block(torch, prov, inp, D, ref):
    """Tries the candidate scale layouts; returns (fn, config, status, err, note): the first
    layout torch accepts whose result passes the check, else the best one that ran (bad), else
    (None, ..., 'unsupported', ...)."""
    A, Bt = inp.A, inp.B.t()
    first_refusal, ran = None, []
    for name, sa, sb in prov.block_candidates(inp):
        fn = (lambda sa=sa, sb=sb: prov._mm(A, Bt, sa, sb, False, D))
        D.fill_(float("nan"))
        try:
            fn()
            torch.cuda.synchronize()
        except RuntimeError as e:
            torch.cuda.synchronize()
            first_refusal = first_refusal or short_error(e, 300)
            continue
        status, err = rel_error(torch, D, ref)
        if status == "ok":
            return fn, f"blockwise {name}", status, err, None
        ran.append((err if err is not None else float("inf"), name, fn, status))
    if ran:
        ran.sort(key=lambda x: x[0])
        err, name, fn, status = ran[0]
        note = f"every layout torch accepted fails the check ({', '.join(x[1] for x in ran)})"
        return fn, f"blockwise {name}", status, (None if err == float("inf") else err), note
    return None, None, "unsupported", None, first_refusal or "torch._scaled_mm refused every layout"


# ---- main ---------------------------------------------------------------------------------------

def git_commit():
    # A copy of the tree whose .git is not its own (the GPU machine's): the caller names the commit.
    if os.environ.get("PEERS_COMMIT"):
        return os.environ["PEERS_COMMIT"]
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10)
        d = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10)
        if c.returncode == 0 and c.stdout.strip():
            return c.stdout.strip() + (" + uncommitted changes" if d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def base_library(a):
    """The --lib-base build's runtime and where its tuned rows come from: a disk cache of its own
    beside the first build's, no tuning database, and the rows --shipped-base names (a build
    outside the tree finds none beside it)."""
    cache = (os.environ.get("FP8JIT_CACHE_DIR") or "/tmp/fp8jit-peers-cache").rstrip("/") + "-base"
    rows = a.shipped_base or os.environ.get("FP8JIT_SHIPPED_TUNING") or "installed"
    shipped = {"off": "", "installed": fj.Fp8jit.INSTALLED_ROWS}.get(rows, rows)
    return fj.Fp8jit(a.lib_base, cache_dir=cache, shipped_tuning=shipped), rows


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import warnings
    warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
    import torch
    if not torch.cuda.is_available():
        print("gemm_peers.py: no CUDA GPU visible to torch", file=sys.stderr)
        return 1
    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    _ = torch.zeros(1, device="cuda")  # torch's context first: fp8jit uses the current one
    gpu = f"{props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, " \
          f"L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB, sm_{props.major}{props.minor}"
    log(f"GPU: {gpu}; torch {torch.__version__} (CUDA {torch.version.cuda})")

    lists = []
    for path in a.list_paths:
        shapes = pc.read_shapes(path)
        if a.only_set:
            shapes = [s for s in shapes if s.mnk() in a.only_set]
        lists.append((pc.list_name(path), path, shapes))
    all_shapes = list({s.mnk(): s for _, _, ss in lists for s in ss}.values())
    log("lists: " + ", ".join(f"{n} ({len(s)} shapes)" for n, _, s in lists))
    if not all_shapes:
        print("gemm_peers.py: no shape left (--only matched nothing)", file=sys.stderr)
        return 1

    providers, provider_errors, meta_prov = {}, {}, {}
    if "fp8jit" in a.provider_list:
        lib = a.lib or fj.find_library(ROOT)
        try:
            p = Fp8jitProvider(torch, lib or "build-peers/libfp8jit.so")
            log(f"fp8jit {p.version} from {p.lib.path}; cache {p.lib.cache_dir() or '(none)'}")
            p.precompile(all_shapes, a.scale_list)
            providers["fp8jit"] = p
            meta_prov["fp8jit"] = f"{p.version} (C ABI via ctypes, {os.path.basename(p.lib.path)}, commit {git_commit()})"
        except Exception as e:  # noqa: BLE001
            provider_errors["fp8jit"] = short_error(e)
    if a.lib_base:
        try:
            lib, rows = base_library(a)
            p = Fp8jitProvider(torch, a.lib_base, lib=lib)
            log(f"fp8jit base {p.version} from {p.lib.path}; cache {p.lib.cache_dir() or '(none)'}")
            p.precompile(all_shapes, a.scale_list)
            providers[pc.BASELINE] = p
            meta_prov[pc.BASELINE] = f"{p.version} (C ABI via ctypes, {p.lib.path}, tuned rows {rows})"
        except Exception as e:  # noqa: BLE001
            provider_errors[pc.BASELINE] = short_error(e)
    if "deepgemm" in a.provider_list:
        try:
            p = DeepGemmProvider(torch, a.deepgemm, a.jobs)
            if "block" in a.scale_list:
                p.precompile(all_shapes)
            providers["deepgemm"] = p
            meta_prov["deepgemm"] = (f"{p.commit[:7]} (CUTLASS {p.cutlass[:7]}), gemm_fp8_fp8_bf16_nt with its "
                                     f"own heuristic, JIT cache {os.environ.get('DG_JIT_CACHE_DIR')}")
        except Exception as e:  # noqa: BLE001
            provider_errors["deepgemm"] = short_error(e)
            traceback.print_exc()
    if "deepgemm2" in a.provider_list:
        try:
            p = DeepGemm2Provider(torch, a.deepgemm2, a.jobs)
            log(f"DeepGEMM {DG2_VERSION} from {a.deepgemm2}")
            if "block" in a.scale_list:
                p.precompile(all_shapes)
            providers["deepgemm2"] = p
            meta_prov["deepgemm2"] = p.describe()
        except Exception as e:  # noqa: BLE001 - e.g. not laid out or not built: the rest runs
            provider_errors["deepgemm2"] = short_error(e)
            if not isinstance(e, RuntimeError):
                traceback.print_exc()
    if "cublaslt" in a.provider_list:
        try:
            providers["cublaslt"] = CublasLtProvider(torch)
            meta_prov["cublaslt"] = "torch._scaled_mm"
        except Exception as e:  # noqa: BLE001
            provider_errors["cublaslt"] = short_error(e)
    for pname, err in provider_errors.items():
        log(f"provider {pname} unavailable: {err}")

    timer = Timer(torch, a.flush_mib, a.flush)
    bandwidth, copy_names = copy_bandwidth(torch, timer)
    log(f"device-to-device copy: {bandwidth / 1e12:.3f} TB/s (read + write; {', '.join(copy_names)})")

    meta = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "providers": meta_prov,
            "provider_errors": provider_errors, "iters": a.iters, "warmup": a.warmup, "flush_mib": a.flush_mib, "flush": a.flush,
            "error_limit": pc.ERROR_LIMIT, "seed": a.seed, "lists": {n: p for n, p, _ in lists},
            "scales": a.scale_list, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "timing": "torch.profiler (kineto/CUPTI) device durations, summed per call; median"}
    results = {n: [] for n, _, _ in lists}

    def meta_lines():
        out = [f"GPU: {gpu}; torch {torch.__version__}, CUDA {torch.version.cuda}; {meta['date']}"]
        for pname in pc.PROVIDERS:
            if pname in meta_prov:
                out.append(f"{pc.PROVIDER_TITLES[pname]}: {meta_prov[pname]}")
            elif pname in provider_errors:
                out.append(f"{pc.PROVIDER_TITLES[pname]}: unavailable: {provider_errors[pname]}")
        out.append(f"{a.iters} timed calls (median) after {a.warmup} warm-up calls per shape, scale and provider; "
                   f"L2 flush {a.flush_mib} MiB ({a.flush}); inputs E4M3 ~N(0,2), scales U[0.25, 2), seed {a.seed}")
        return out

    def write():
        lst = [(n, f"{n} ({os.path.relpath(p, ROOT)})", results[n]) for n, p, _ in lists]
        return pc.write_report(a.out, a.name, "FP8 GEMM: fp8jit against DeepGEMM and cuBLASLt", lst, bandwidth,
                               meta, meta_lines())

    not_run = []
    for list_name_, _, shapes in lists:
        log(f"=== {list_name_}: {len(shapes)} shapes x {','.join(a.scale_list)}")
        for shape in shapes:
            if a.max_seconds and time.time() - T0 > a.max_seconds:
                not_run.append(f"{list_name_} {shape}")
                meta["not_run_time_budget"] = not_run
                continue
            t = time.time()
            try:
                rows = run_shape(torch, a, shape, list_name_, providers, timer)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory: the shape is reported as failed
                log(f"  {shape}: {short_error(e, 400)}")
                traceback.print_exc()
                torch.cuda.synchronize()
                rows = [{"list": list_name_, "label": shape.label, "m": shape.m, "n": shape.n, "k": shape.k,
                         "scale": s, "providers": {p: result("error", note=short_error(e)) for p in providers}}
                        for s in a.scale_list]
            for r in rows:
                for pname, err in provider_errors.items():
                    r["providers"][pname] = result("error", note=err)
            results[list_name_] += rows
            torch.cuda.empty_cache()
            parts = []
            for r in rows:
                cells = []
                for p in pc.PROVIDERS:
                    res = pc.result_of(r, p)
                    if res["status"] in ("skipped", "n/a"):
                        continue
                    cells.append(f"{p}={pc.cell_time(res)}")
                parts.append(f"{r['scale']}: " + " ".join(cells))
            log(f"  {shape} ({time.time() - t:.1f} s) " + " | ".join(parts))
            write()
    if "cublaslt" in providers:
        meta_prov["cublaslt"] = f"torch._scaled_mm, cuBLASLt {cublaslt_version()}"
    for pname in ("fp8jit", pc.BASELINE):
        if pname in providers:
            meta[f"{pname}_cache_stats"] = providers[pname].lib.cache_stats()
            log(f"{pname} cache stats: {meta[f'{pname}_cache_stats']}")
    if not_run:
        log(f"--max-seconds {a.max_seconds:g}: {len(not_run)} shapes not run: {', '.join(not_run)}")
    _, summaries = write()
    log(f"report: {os.path.join(a.out, a.name)}.{{md,csv,json}}")
    print("\n".join(pc.summary_lines(summaries)), flush=True)
    flagged = sum(len(s["flagged"]) for summ in summaries.values() for s in summ.values())
    return 0 if not provider_errors and flagged == 0 and not not_run else 2


if __name__ == "__main__":
    sys.exit(main())
