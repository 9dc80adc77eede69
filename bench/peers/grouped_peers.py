"""Grouped (mixture-of-experts) FP8 GEMMs side by side: fp8jit's grouped_gemm (C ABI, ctypes),
DeepGEMM v1's and 2.6.1's m_grouped kernels and a loop of fp8jit's dense GEMMs over the experts, on
the same inputs in one process; kernel time from the CUDA profiler (kineto: DeepGEMM 2.6.1's own
scale-layout kernels, if it ran any, count with its call), L2 flushed before each call. The peer to
beat is the faster DeepGEMM case by case ("best DeepGEMM").

Layouts: contiguous (prefill: groups' rows one after another; DeepGEMM's m_indices with groups
aligned to 128 rows, fp8jit's G+1 offsets and, on the same m_indices, its indexed layout) and
masked (decode: masked_m per group under M_max, the expected M per group as the hint). Block scaling, bf16 out: DeepSeek-V3's expert projections
(gate-up N=4096 K=7168, down N=7168 K=2048). Usage (GPU machine):
  python3 bench/peers/grouped_peers.py --lib BUILD/libfp8jit.so --deepgemm .carry/deepgemm \
      [--deepgemm2 .carry/deepgemm2] [--quick]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers_core as pc  # noqa: E402
from fp8jit_ctypes import Fp8jit  # noqa: E402
from gemm_peers import Timer, copy_bandwidth  # noqa: E402
from peer_util import log  # noqa: E402

LAYOUT_CONTIGUOUS, LAYOUT_MASKED, LAYOUT_INDEXED = 1, 2, 3


class GroupedGemmArgs(ctypes.Structure):
    """fp8jit_grouped_gemm_args, field by field (enums and booleans are C ints)."""

    _fields_ = [
        ("layout", ctypes.c_int), ("groups", ctypes.c_int64), ("group_rows", ctypes.c_void_p),
        ("a", ctypes.c_void_p), ("a_format", ctypes.c_int), ("lda", ctypes.c_int64),
        ("b", ctypes.c_void_p), ("b_format", ctypes.c_int), ("ldb", ctypes.c_int64),
        ("d", ctypes.c_void_p), ("d_dtype", ctypes.c_int), ("ldd", ctypes.c_int64),
        ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64), ("expected_m", ctypes.c_int64),
        ("scale_mode", ctypes.c_int),
        ("scale_a", ctypes.c_void_p), ("scale_a_size", ctypes.c_int64), ("scale_a_layout", ctypes.c_int),
        ("scale_b", ctypes.c_void_p), ("scale_b_size", ctypes.c_int64), ("scale_b_layout", ctypes.c_int),
        ("status", ctypes.c_void_p), ("fast_accum", ctypes.c_int),
    ]


def declare(fj):
    fj.lib.fp8jit_grouped_gemm_args_init.argtypes = [ctypes.POINTER(GroupedGemmArgs)]
    fj.lib.fp8jit_grouped_gemm_args_init.restype = None
    fj.lib.fp8jit_grouped_gemm.argtypes = [ctypes.c_void_p, ctypes.POINTER(GroupedGemmArgs), ctypes.c_void_p]
    fj.lib.fp8jit_grouped_gemm.restype = ctypes.c_int
    fj.lib.fp8jit_grouped_gemm_select.argtypes = [ctypes.c_void_p, ctypes.POINTER(GroupedGemmArgs),
                                                  ctypes.c_char_p, ctypes.c_size_t]
    fj.lib.fp8jit_grouped_gemm_select.restype = ctypes.c_int


def suite(quick):
    """(layout, groups, rows per group or masked_m list, m_max, expected_m, n, k)."""
    cases = []
    projections = [(4096, 7168), (7168, 2048)]
    for n, k in projections:
        for g, per in ([(8, 128), (8, 4096)] if quick else
                       [(4, 128), (4, 1024), (4, 8192), (8, 128), (8, 512), (8, 4096), (16, 256), (32, 128)]):
            cases.append(("contiguous", g, per, None, per, n, k))
        for g, m_max, expected in ([(32, 256, 64)] if quick else
                                   [(32, 128, 16), (32, 256, 32), (32, 256, 64), (16, 256, 128), (8, 1024, 256)]):
            cases.append(("masked", g, None, m_max, expected, n, k))
    return cases


def block_inputs(torch, rows, n, k, groups):
    """A [rows, k], B [groups, n, k] FP8 with positive scales: A's col-major (fp8jit's
    col_major_tma: [kb][rows padded to 4]), B's [groups, n/128, k/128] row-major."""
    kb = -(-k // 128)
    A = (torch.randn(rows, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    B = (torch.randn(groups, n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    pad = -(-rows // 4) * 4
    sa = torch.rand(kb, pad, device="cuda") + 0.5
    sb = torch.rand(groups, -(-n // 128), kb, device="cuda") + 0.5
    return A, B, sa, sb


def masked_counts(torch, groups, m_max, expected):
    """Rows per group around the expected M (as routing gives them), within [0, m_max]."""
    g = torch.Generator().manual_seed(groups * 1000 + expected)
    counts = (torch.rand(groups, generator=g) * 2 * expected).round().clamp(0, m_max).int()
    return counts


def fp8jit_call(fj, layout, groups, table, A, B, D, sa, sb, m, n, k, expected):
    a = GroupedGemmArgs()
    fj.lib.fp8jit_grouped_gemm_args_init(ctypes.byref(a))
    a.layout, a.groups, a.group_rows = layout, groups, table.data_ptr()
    a.a, a.b, a.d = A.data_ptr(), B.data_ptr(), D.data_ptr()
    a.m, a.n, a.k, a.expected_m = m, n, k, expected
    a.scale_a, a.scale_a_size = sa.data_ptr(), sa.numel()
    a.scale_b, a.scale_b_size = sb.data_ptr(), sb.numel()
    buf = ctypes.create_string_buffer(256)
    fj._check(fj.lib.fp8jit_grouped_gemm_select(fj.rt, ctypes.byref(a), buf, len(buf)), "fp8jit_grouped_gemm_select")

    def call():
        fj._check(fj.lib.fp8jit_grouped_gemm(fj.rt, ctypes.byref(a), None), "fp8jit_grouped_gemm")
    return call, buf.value.decode()


def dense_loop(fj, torch, A, B, sa_rows, sb, starts, counts, n, k):
    """fp8jit's dense GEMM once per non-empty group: what a user without grouped GEMMs runs."""
    calls = []
    outs = []
    for g, (s, c) in enumerate(zip(starts, counts)):
        if c == 0:
            continue
        a = fj.gemm_args(c, n, k, 2)
        Ag = A[s:s + c]
        sag = sa_rows[s:s + c].t().contiguous()  # this group's col_major_tma scales
        if c % 4:
            sag = torch.nn.functional.pad(sag, (0, 4 - c % 4))
        Dg = torch.empty(c, n, dtype=torch.bfloat16, device="cuda")
        outs += [Ag, sag, Dg]
        a.a, a.b, a.d = Ag.data_ptr(), B[g].data_ptr(), Dg.data_ptr()
        a.scale_a, a.scale_b = sag.data_ptr(), sb[g].data_ptr()
        calls.append(a)

    def call():
        for a in calls:
            fj.gemm(a)
    return call, outs


DG1, DG2 = "DeepGEMM v1", "DeepGEMM 2.6.1"


def best_deepgemm(times):
    """(µs, name) of the faster DeepGEMM among those timed in a case (v1 on a tie), else None."""
    timed = [(times[name], name) for name in (DG1, DG2) if times.get(name)]
    return min(timed, key=lambda t: t[0]) if timed else None


def deepgemm2_call(dg2, layout, A, B, D, sa_dg, sb, table, groups, m_max, k, n, expected):
    """DeepGEMM 2.6.1's m_grouped call on the inputs v1 gets (recipe (1, 128, 128): sm90's 1d2d
    kernels; contiguous takes the m_indices as its grouped layout)."""
    if layout == "contiguous":
        return lambda: dg2.m_grouped_fp8_gemm_nt_contiguous((A, sa_dg), (B, sb), D, table,  # noqa: E731
                                                            recipe=(1, 128, 128))
    A3, D3 = A.view(groups, m_max, k), D.view(groups, m_max, n)
    return lambda: dg2.m_grouped_fp8_gemm_nt_masked((A3, sa_dg), (B, sb), D3, table, expected,  # noqa: E731
                                                    recipe=(1, 128, 128))


def check(torch, D, ref_rows, name):
    err = ((D.float() - ref_rows.float()).norm() / ref_rows.float().norm().clamp_min(1e-30)).item()
    if not err < 2e-2:
        raise RuntimeError(f"{name}: relative difference {err:.2e} from fp8jit's result")


def check_groups(torch, D, ref, starts, counts, name):
    """check() on each non-empty group's rows (rows outside the groups are nobody's)."""
    for s, c in zip(starts, counts):
        if c:
            check(torch, D[s:s + c], ref[s:s + c], name)


def run_case(torch, timer, fj, dg, dg2, case, iters):
    layout, groups, per, m_max, expected, n, k = case
    kb = -(-k // 128)
    if layout == "contiguous":
        counts = [per] * groups
        rows = per * groups
    else:
        counts = masked_counts(torch, groups, m_max, expected).tolist()
        rows = groups * m_max
    starts = [sum(counts[:g]) for g in range(groups)] if layout == "contiguous" else [g * m_max for g in range(groups)]
    A, B, sa, sb = block_inputs(torch, rows, n, k, groups)
    sa_rows = sa[:, :rows].t()  # [rows, kb] view of the same scales
    D = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")
    if layout == "contiguous":
        table = torch.tensor(starts + [rows], dtype=torch.int32, device="cuda")
        f_call, f_name = fp8jit_call(fj, LAYOUT_CONTIGUOUS, groups, table, A, B, D, sa, sb, rows, n, k, expected)
    else:
        table = torch.tensor(counts, dtype=torch.int32, device="cuda")
        f_call, f_name = fp8jit_call(fj, LAYOUT_MASKED, groups, table, A, B, D, sa, sb, m_max, n, k, expected)
    fns, names = [f_call], ["fp8jit grouped"]
    f_call()
    torch.cuda.synchronize()
    m_idx = None
    if layout == "contiguous":  # the same rows by a group index per row (DeepGEMM's m_indices)
        m_idx = torch.repeat_interleave(torch.arange(groups, dtype=torch.int32, device="cuda"),
                                        torch.tensor(counts, device="cuda"))
        if all(c % 128 == 0 for c in counts):  # the indexed layout's alignment
            Di = torch.empty_like(D)
            i_call, _ = fp8jit_call(fj, LAYOUT_INDEXED, groups, m_idx, A, B, Di, sa, sb, rows, n, k, expected)
            i_call()
            torch.cuda.synchronize()
            check(torch, Di, D, "fp8jit indexed")
            fns.append(i_call)
            names.append("fp8jit indexed")
    loop_call, keep = dense_loop(fj, torch, A, B, sa_rows, sb, starts, counts, n, k)
    fns.append(loop_call)
    names.append("fp8jit dense loop")
    Ddg = torch.empty_like(D)
    if layout == "contiguous":
        sa_dg = sa[:, :rows].t()  # (rows, kb), strides (1, rows): DeepGEMM's TMA-aligned layout
        dg_table = m_idx
    else:
        per_group = sa[:, :rows].view(kb, groups, m_max).permute(1, 0, 2).contiguous()  # (G, kb, M_max)
        sa_dg = per_group.transpose(1, 2)  # (G, M_max, kb), each group's scales column-major
        dg_table = table  # masked_m
    if dg is not None:
        if layout == "contiguous":
            dg_call = lambda: dg.dg.m_grouped_gemm_fp8_fp8_bf16_nt_contiguous((A, sa_dg), (B, sb), Ddg, m_idx)  # noqa: E731
        else:
            A3, D3 = A.view(groups, m_max, k), Ddg.view(groups, m_max, n)
            dg_call = lambda: dg.dg.m_grouped_gemm_fp8_fp8_bf16_nt_masked((A3, sa_dg), (B, sb), D3, table, expected)  # noqa: E731
        try:
            dg._checked(dg_call)
        except TypeError:
            dg._install_launch_shim()
            dg._checked(dg_call)
        torch.cuda.synchronize()
        check_groups(torch, Ddg, D, starts, counts, DG1)
        fns.append(dg_call)
        names.append(DG1)
    if dg2 is not None:
        Ddg2 = torch.empty_like(D)
        dg2_call = deepgemm2_call(dg2, layout, A, B, Ddg2, sa_dg, sb, dg_table, groups, m_max, k, n, expected)
        dg2_call()
        torch.cuda.synchronize()
        check_groups(torch, Ddg2, D, starts, counts, DG2)
        fns.append(dg2_call)
        names.append(DG2)
    for fn in fns:
        timer.warm(fn, 2)
    results = timer.time(fns, iters)
    del keep
    times = {nm: pc.median(t) for nm, (t, _) in zip(names, results)}
    valid = sum(counts)
    moved = valid * k + groups * n * k + valid * n * 2 + 4 * (valid * kb + groups * kb * -(-n // 128))
    return times, f_name, valid, moved


def bounded_int(lo, hi):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is not in [{lo}, {hi}]")
        return v
    return parse


def non_empty(text):
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def case_filter(text):
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in ("contiguous", "masked"):
        raise argparse.ArgumentTypeError(f"{text!r} is not LAYOUT:G:ROWS with LAYOUT contiguous or masked")
    return (parts[0], bounded_int(1, 1 << 16)(parts[1]), bounded_int(1, 1 << 20)(parts[2]))


def selected(cases, only):
    """The cases that match a filter of --only (all without one); a filter matching none is an error."""
    if not only:
        return cases
    chosen = [c for c in cases if (c[0], c[1], c[4]) in only]
    missing = [f for f in only if not any((c[0], c[1], c[4]) == f for c in cases)]
    if missing:
        raise SystemExit(f"--only: no suite case {':'.join(map(str, missing[0]))} (see --quick or the full suite)")
    return chosen


def parse_args(argv):
    """Options; a wrong, empty or huge value is a usage error (exit 2) before anything runs."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True, type=non_empty, help="libfp8jit.so")
    p.add_argument("--deepgemm", default="", help="DeepGEMM v1's source tree (left out: no v1)")
    p.add_argument("--deepgemm2", default="", help="DeepGEMM 2.6.1's tree, its extension built "
                   "(bench/peers/setup_deepgemm2.py and build_deepgemm2.sh; left out: no 2.6.1)")
    p.add_argument("--quick", action="store_true", help="six cases instead of the MoE suite")
    p.add_argument("--iters", type=bounded_int(1, 1000), default=15, help="timed calls per case")
    p.add_argument("--only", action="append", type=case_filter, default=[],
                   help="run only the suite's cases LAYOUT:G:ROWS (ROWS: rows per group, masked: the expected M); "
                        "repeatable, e.g. contiguous:8:4096 (to profile one case)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    import torch
    fj = Fp8jit(a.lib)
    declare(fj)
    dg = dg2 = None
    if a.deepgemm:
        from deepgemm_peers import DeepGemmProvider
        dg = DeepGemmProvider(torch, a.deepgemm, 0)
    if a.deepgemm2:
        from deepgemm_peers import load_deepgemm2
        try:
            dg2 = load_deepgemm2(a.deepgemm2)
        except Exception as e:  # reported, and the rest runs without it
            log(f"{DG2}: unavailable: {str(e)[:300]}")
    timer = Timer(torch, 512)
    bw, _ = copy_bandwidth(torch, timer)
    log(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s")
    print("| layout | G | rows/group (masked: expected) | N x K | fp8jit kernel | fp8jit µs | indexed µs | dense loop µs | "
          f"{DG1} µs | {DG2} µs | vs best DeepGEMM | indexed vs best | vs loop | fp8jit of copy bw |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios = {(layout, peer): [] for layout in ("contiguous", "masked", "indexed") for peer in (DG1, DG2, "best")}
    loops = []
    for case in selected(suite(a.quick), a.only):
        layout, groups, per, m_max, expected, n, k = case
        try:
            times, name, valid, moved = run_case(torch, timer, fj, dg, dg2, case, a.iters)
        except Exception as e:  # a failed case is reported, not hidden
            print(f"| {layout} | {groups} | {per or expected} | {n}x{k} | FAILED: {str(e)[:200]} |")
            continue
        f = times["fp8jit grouped"]
        lp = times["fp8jit dense loop"]
        ix = times.get("fp8jit indexed")
        best = best_deepgemm(times)
        for peer, us in ((DG1, times.get(DG1)), (DG2, times.get(DG2)), ("best", best and best[0])):
            if us:
                ratios[(layout, peer)].append(us / f)
                if ix:
                    ratios[("indexed", peer)].append(us / ix)
        if layout == "contiguous" and per <= 512:
            loops.append(lp / f)
        frac = moved / (f * 1e-6) / bw
        rows = per if layout == "contiguous" else f"{expected} (M_max {m_max})"
        cell = lambda us: f"{us:.1f}" if us else "-"  # noqa: E731
        vs = lambda us, mine: f"{us / mine:.3f}x" if us and mine else "-"  # noqa: E731
        b = best[0] if best else None
        print(f"| {layout} | {groups} | {rows} | {n}x{k} | {name} | {f:.1f} | {cell(ix)} | {lp:.1f} | "
              f"{cell(times.get(DG1))} | {cell(times.get(DG2))} | {vs(b, f)} | {vs(b, ix)} | "
              f"{lp / f:.2f}x | {frac:.2f} |", flush=True)
    for (layout, peer), r in ratios.items():
        if r:
            who = "the faster DeepGEMM per case" if peer == "best" else peer
            print(f"{layout}: fp8jit vs {who} geomean {pc.geomean(r):.3f}x over {len(r)} cases")
    if loops:
        print(f"contiguous, rows/group <= 512: grouped vs dense loop geomean {pc.geomean(loops):.2f}x")

if __name__ == "__main__":
    main()
