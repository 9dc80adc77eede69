#!/usr/bin/env python3
"""CPU self-test of the peer benchmark's GPU-free parts; standard library only (no torch, no GPU).

  python3 bench/peers/selftest.py            (from the repository root, or anywhere)

Checks: the shape lists and the CSV reader's errors; the roofline, ratio and geomean arithmetic;
the profiler-event grouping; the report (markdown, CSV, JSON) on made-up rows; fp8jit_ctypes'
structs and function table against include/fp8jit/fp8jit.h (parsed here, and compiled with a C
compiler when one is installed); and, when a built libfp8jit.so is found (FP8JIT_LIB, or
build-peers/, build-gpu/, build-shared/, build/), the C ABI calls that need no GPU.
Exit status 0 when every check passes.
"""
import csv
import io
import ctypes
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
HEADER = os.path.join(ROOT, "include", "fp8jit", "fp8jit.h")
sys.path.insert(0, HERE)
import fp8jit_ctypes as fj  # noqa: E402
import peers_core as pc  # noqa: E402

FAILURES = []
CHECKS = [0]


def check(cond, what):
    CHECKS[0] += 1
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def close(a, b, rel=1e-12):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return str(e) or True
    return None


# ---- shape lists --------------------------------------------------------------------------------

def test_shapes():
    ds = pc.read_shapes(pc.resolve_shape_list("deepseek-v3"))
    check(len(ds) == 19, f"deepseek_v3.csv: 19 shapes, got {len(ds)}")
    check(ds[0].mnk() == (64, 2112, 7168) and ds[-1].mnk() == (8192, 8192, 8192), "deepseek_v3.csv: first/last rows")
    om = pc.read_shapes(pc.resolve_shape_list("open-models"))
    check(len(om) >= 40, f"open_models.csv: at least 40 shapes, got {len(om)}")
    check(all(s.k % 16 == 0 for s in ds + om), "every K a multiple of 16")
    check(any(s.m <= pc.DECODE_MAX_M for s in om) and any(s.m > pc.DECODE_MAX_M for s in om),
          "open_models.csv has decode and prefill M")
    check(all(s.label for s in om), "every open_models.csv row has a label")
    check(om[0].label.startswith("Llama-3 8B, attention QKV"), f"first label: {om[0].label!r}")
    check(pc.list_name(pc.resolve_shape_list("open-models")) == "open_models", "list name")
    check(raises(pc.InputError, pc.resolve_shape_list, "no-such-suite") is not None, "unknown suite refused")
    with tempfile.TemporaryDirectory() as d:
        def case(text):
            p = os.path.join(d, "s.csv")
            with open(p, "w") as f:
                f.write(text)
            return p
        good = pc.read_shapes(case("# c\nm,n,k\n# grp: x\n1,16,32\n\n2, 32, 64\n"))
        check([s.mnk() for s in good] == [(1, 16, 32), (2, 32, 64)], "header, comments, blanks, spaces")
        check(good[0].label == "grp" and good[1].label == "grp", f"labels {[s.label for s in good]}")
        for bad, why in [("1,2\n", "fields"), ("1,2,x\n", "positive integers"), ("1,16,24\n", "multiple of 16"),
                         ("0,16,32\n", "[1, 2^31-1]"), ("# only comments\n", "no m,n,k rows"),
                         ("1,16,32\nm,n,k\n", "positive integers")]:
            msg = raises(pc.InputError, pc.read_shapes, case(bad))
            check(msg is not None and why in str(msg), f"bad CSV {bad!r}: {msg!r}")
    check(pc.parse_choice_list("block, tensor,block", pc.SCALES, "--scales") == ["block", "tensor"],
          "choice list dedup")
    check(raises(pc.InputError, pc.parse_choice_list, "blk", pc.SCALES, "--scales") is not None, "bad choice")


# ---- arithmetic ---------------------------------------------------------------------------------

def test_arithmetic():
    m, n, k = 64, 2112, 7168
    check(pc.scale_bytes(m, n, k, "block") == 4 * (64 * 56 + 17 * 56), "block scale bytes")
    check(pc.scale_bytes(m, n, k, "tensor") == 8 and pc.scale_bytes(m, n, k, "tensor-fast") == 8, "tensor scale bytes")
    check(pc.gemm_bytes(m, n, k, "tensor") == 64 * 7168 + 2112 * 7168 + 2 * 64 * 2112 + 8, "gemm bytes")
    check(pc.gemm_bytes(1, 16, 128, "block") == 128 + 16 * 128 + 32 + 4 * (1 + 1), "gemm bytes, tiny block")
    bw = pc.copy_bandwidth(2**30, 1e-3)
    check(close(bw, 2 * 2**30 / 1e-3), "copy bandwidth counts read + write")
    b = pc.gemm_bytes(m, n, k, "block")
    check(close(pc.roofline_fraction(m, n, k, "block", 10.0, 3e12), b / 3e12 / 10e-6), "roofline fraction")
    check(pc.roofline_fraction(m, n, k, "block", None, 3e12) is None, "roofline without a time")
    check(pc.matched_copy_bytes(m, n, k, "block") == (b + 1) // 2 and pc.matched_copy_bytes(1, 1, 1, "tensor") == 6,
          "the same-size copy moves the GEMM's bytes, half each way")
    check(close(pc.geomean([1, 4]), 2.0) and pc.geomean([None]) is None, "geomean")
    check(raises(ValueError, pc.geomean, [1, 0]) is not None, "geomean refuses 0")
    check(close(pc.speed_ratio(12.0, 10.0), 1.2) and pc.speed_ratio(None, 1) is None, "ratio = peer / fp8jit")
    check(pc.median([3, 1, 2]) == 2 and pc.median([4, 1, 2, 3]) == 2.5 and pc.median([]) is None, "median")


def test_events():
    fl = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >(int)"
    k1, k2 = "void fp8jit_gemm<1, 2>(Params)", "Memset (Device)"
    ev = [("early", 0, 5), (fl, 10, 100), (k1, 120, 20), (fl, 150, 100), (k1, 260, 30), (k2, 295, 2),
          (fl, 300, 100), ("after", 410, 1)]
    is_flush = lambda s: "FillFunctor" in s  # noqa: E731
    groups = pc.split_by_flush(list(reversed(ev)), is_flush, 2)
    check([[e[0] for e in g] for g in groups] == [[k1], [k1, k2]], f"groups {groups}")
    timed = pc.call_times(groups, 1)
    check(close(timed[0][0][0], 0.020) and close(timed[1][0][0], 0.032), f"µs per call {timed}")
    check(timed[1][1] == ["fp8jit_gemm", "Memset"], f"kernel names {timed[1][1]}")
    # Rounds of two combinations, three calls each: A B A B A B.
    rounds = [[("a", 0, 1000)], [("b", 0, 5000)], [("a", 0, 2000)], [("b", 0, 6000)], [("a", 0, 3000)],
              [("b", 0, 7000)]]
    inter = pc.interleaved_call_times(rounds, 2)
    check([t for t, _ in inter] == [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]] and [n for _, n in inter] == [["a"], ["b"]],
          f"interleaved calls back to their combinations {inter}")
    check(raises(ValueError, pc.interleaved_call_times, rounds[:5], 2) is not None, "an incomplete round refused")
    check(raises(ValueError, pc.split_by_flush, ev, is_flush, 3) is not None, "wrong call count refused")
    check(raises(ValueError, pc.split_by_flush, [(fl, 0, 1), (fl, 2, 1), (k1, 4, 1), (fl, 6, 1)], is_flush, 2)
          is not None, "a call without device work refused")
    check(pc.short_kernel_name("void cutlass::device_kernel<X<(int)3>>(Y)") == "cutlass::device_kernel", "short name")


# ---- report -------------------------------------------------------------------------------------

def _row(lst, m, n, k, scale, us):
    """us: {provider: µs, None (n/a) or a status}; providers left out were not asked for."""
    provs = {}
    for p, t in us.items():
        if t is None:
            provs[p] = {"status": "n/a"}
        elif isinstance(t, str):
            provs[p] = {"status": t, "note": "boom"}
        else:
            provs[p] = {"status": "ok", "us": t, "rel_err": 1.6e-3, "kernels": ["k"], "config": "c"}
    return {"list": lst, "label": "grp", "m": m, "n": n, "k": k, "scale": scale, "providers": provs}


def _us(fp8jit, v1, v2, cublaslt):
    return dict(zip(pc.PROVIDERS, (fp8jit, v1, v2, cublaslt)))


def test_report():
    bw = 3.0e12
    check(pc.PROVIDERS == ("fp8jit", "deepgemm", "deepgemm2", "cublaslt"), f"provider order {pc.PROVIDERS}")
    rows = [_row("a", 64, 2112, 7168, "block", _us(10.0, 12.0, "skipped", 11.0)),
            _row("a", 4096, 7168, 2048, "block", _us(100.0, 90.0, "skipped", 200.0)),
            _row("a", 64, 2112, 7168, "tensor", _us(9.0, None, "skipped", 8.0)),
            _row("a", 128, 4096, 7168, "tensor", _us(20.0, None, "skipped", "error"))]
    rows[1]["providers"]["cublaslt"]["status"] = "bad"
    rows[1]["providers"]["cublaslt"]["rel_err"] = 0.5
    rows[0]["copy_us"] = 5.0
    rows[1]["copy_us"] = 50.0  # M > 128: no share
    s = pc.summarize(rows, bw)
    share = s["block"]["copy_share"]
    check(share["fp8jit"]["shapes"] == 1 and close(share["fp8jit"]["geomean"], 0.5)
          and close(share["deepgemm"]["geomean"], 5 / 12) and "deepgemm2" not in share,
          f"same-size copy share: copy time / provider time, M <= 128 and timed only {share}")
    check(s["tensor"]["copy_share"] == {}, "no copy timed, no share")
    vs = s["block"]["vs"]
    check(close(vs["deepgemm"]["geomean"], math.sqrt(1.2 * 0.9)), f"DeepGEMM geomean {vs['deepgemm']}")
    check(vs["deepgemm"]["worst_shape"] == "4096x7168x2048" and vs["deepgemm"]["below_1"] == 1, "worst shape")
    check(vs["cublaslt"]["shapes"] == 1 and close(vs["cublaslt"]["geomean"], 1.1), "bad result left out of the ratio")
    check("deepgemm" not in s["tensor"]["vs"] and close(s["tensor"]["vs"]["cublaslt"]["geomean"], 8 / 9),
          "n/a and error left out")
    roof = s["block"]["roofline"]["fp8jit"]
    check(roof["shapes"] == 1 and close(roof["geomean"], pc.gemm_bytes(64, 2112, 7168, "block") / bw / 10e-6),
          "roofline only for M <= 128")
    check(len(s["block"]["flagged"]) == 1 and len(s["tensor"]["flagged"]) == 1, f"flagged {s['block']['flagged']}")
    with tempfile.TemporaryDirectory() as d:
        md, summaries = pc.write_report(d, "t", "Title", [("a", "list a", rows), ("b", "list b", rows[:1])], bw,
                                        {"x": float("nan")}, ["meta line"])
        check(set(os.listdir(d)) == {"t.md", "t.csv", "t.json"}, f"files {os.listdir(d)}")
        check("## list a" in md and "## list b" in md and "**1.039x**" in md, "markdown sections and geomean")
        check("1.0!" not in md and "200.0!" in md, "bad result marked with !")
        with open(os.path.join(d, "t.csv")) as f:
            got = list(csv.DictReader(f))
        check(len(got) == 5 and got[0]["ratio_deepgemm"] == "1.2000", f"CSV rows {len(got)}")
        check(got[0]["roofline_fp8jit"] != "" and got[1]["roofline_fp8jit"] == "", "CSV roofline only M <= 128")
        check(got[0]["copy_us"] == "5.000" and got[0]["copy_share_fp8jit"] == "0.5000"
              and got[1]["copy_share_fp8jit"] == "" and got[2]["copy_us"] == "", "CSV same-size copy")
        check("same-size copy / time" in md and "| 0.50 / 0.42 / - / 0.45 |" in md, "markdown same-size copy")
        with open(os.path.join(d, "t.json")) as f:
            js = json.load(f)
        check(js["meta"]["x"] is None and set(js["summary"]) == {"a", "b"} and len(js["rows"]) == 5, "JSON")
    lines = pc.summary_lines(summaries)
    check(len(lines) == 3 and "vs DeepGEMM v1 1.039x" in lines[0], f"summary lines {lines}")
    # One DeepGEMM only (2.6.1 not asked for): the best DeepGEMM is v1, shape by shape.
    check(close(vs[pc.BEST_DEEPGEMM]["geomean"], vs["deepgemm"]["geomean"]) and "deepgemm2" not in vs
          and vs[pc.BEST_DEEPGEMM]["won"] == {"deepgemm": 2, "deepgemm2": 0} and vs[pc.BEST_DEEPGEMM]["both"] == 0,
          f"best of one DeepGEMM {vs.get(pc.BEST_DEEPGEMM)}")


def test_best_deepgemm():
    """The faster DeepGEMM per shape (the peer to beat): ratios, geomeans, wins, table and files,
    per shape list, with synthetic timings."""
    bw = 3.0e12
    a = [_row("a", 64, 2112, 7168, "block", _us(10.0, 12.0, 15.0, 11.0)),       # v1 faster: 1.2
         _row("a", 4096, 7168, 2048, "block", _us(100.0, 90.0, 80.0, 120.0)),   # 2.6.1 faster: 0.8
         _row("a", 128, 4096, 7168, "block", _us(20.0, 18.0, "error", 25.0)),   # 2.6.1 failed: v1, 0.9
         _row("a", 8192, 8192, 8192, "block", _us(50.0, 60.0, 40.0, 55.0)),     # 2.6.1 wrong (below): v1, 1.2
         _row("a", 16, 4096, 7168, "block", _us(30.0, 33.0, 33.0, 30.0)),       # a tie: v1, 1.1
         _row("a", 64, 2112, 7168, "tensor", _us(9.0, None, None, 8.0))]         # no DeepGEMM: no best
    a[3]["providers"]["deepgemm2"].update(status="bad", rel_err=0.3)
    b = [_row("b", 1, 4096, 4096, "block", _us(5.0, 4.0, 6.0, 5.0)),            # v1: 0.8
         _row("b", 8192, 4096, 4096, "block", _us(200.0, 260.0, 250.0, 210.0))]  # 2.6.1: 1.25

    check(pc.best_deepgemm(a[0]) == (12.0, "deepgemm") and pc.best_deepgemm(a[1]) == (80.0, "deepgemm2"),
          f"best_deepgemm {pc.best_deepgemm(a[0])}, {pc.best_deepgemm(a[1])}")
    check(pc.best_deepgemm(a[3]) == (60.0, "deepgemm"), "a wrong 2.6.1 result never sets the bar")
    check(pc.best_deepgemm(a[4]) == (33.0, "deepgemm"), "a tie goes to v1")
    check(pc.best_deepgemm(a[5]) is None and pc.row_ratio(a[5], pc.BEST_DEEPGEMM) is None, "n/a: no best")
    check(close(pc.row_ratio(a[1], pc.BEST_DEEPGEMM), 0.8) and close(pc.row_ratio(a[1], "deepgemm"), 0.9)
          and close(pc.row_ratio(a[1], "deepgemm2"), 0.8), "row ratios against v1, 2.6.1 and the best")

    sa, sb = pc.summarize(a, bw)["block"], pc.summarize(b, bw)["block"]
    best = sa["vs"][pc.BEST_DEEPGEMM]
    check(close(best["geomean"], (1.2 * 0.8 * 0.9 * 1.2 * 1.1) ** 0.2) and best["shapes"] == 5,
          f"best geomean {best}")
    check(best["won"] == {"deepgemm": 4, "deepgemm2": 1} and best["both"] == 3, f"wins {best}")
    check(best["worst_shape"] == "4096x7168x2048" and best["below_1"] == 2, f"best worst {best}")
    v1, v2 = sa["vs"]["deepgemm"], sa["vs"]["deepgemm2"]
    check(close(v1["geomean"], (1.2 * 0.9 * 0.9 * 1.2 * 1.1) ** 0.2) and v1["shapes"] == 5, f"v1 {v1}")
    check(close(v2["geomean"], (1.5 * 0.8 * 1.1) ** (1 / 3)) and v2["shapes"] == 3, f"2.6.1 {v2}")
    check(best["geomean"] <= min(v1["geomean"], v2["geomean"]) + 1e-12, "the best is never easier to beat")
    check(close(sb["vs"][pc.BEST_DEEPGEMM]["geomean"], math.sqrt(0.8 * 1.25))
          and sb["vs"][pc.BEST_DEEPGEMM]["won"] == {"deepgemm": 1, "deepgemm2": 1}, "list b on its own")
    roof = sa["roofline"]
    want = math.sqrt(pc.roofline_fraction(64, 2112, 7168, "block", 15.0, bw)
                     * pc.roofline_fraction(16, 4096, 7168, "block", 33.0, bw))
    check(roof["deepgemm2"]["shapes"] == 2 and roof["deepgemm"]["shapes"] == 3
          and close(roof["deepgemm2"]["geomean"], want), f"M <= 128 roofline per DeepGEMM {roof}")
    check(len(sa["flagged"]) == 2 and any("DeepGEMM 2.6.1: bad" in f for f in sa["flagged"]),
          f"flagged {sa['flagged']}")

    with tempfile.TemporaryDirectory() as d:
        md, summaries = pc.write_report(d, "t", "Title", [("a", "list a", a), ("b", "list b", b)], bw, {}, [])
        head = next(line for line in md.splitlines() if line.startswith("| M |"))
        for col in ("DeepGEMM v1 µs", "DeepGEMM 2.6.1 µs", "DeepGEMM v1 / fp8jit", "DeepGEMM 2.6.1 / fp8jit",
                    "best DeepGEMM / fp8jit", "roofline fp8jit / v1 / 2.6.1 / cuBLASLt"):
            check(f"| {col} |" in head, f"table column {col!r} in {head}")
        cells = [line.split(" | ") for line in md.splitlines() if line.startswith("| 4096 | 7168 | 2048 |")]
        check(len(cells) == 1 and len(cells[0]) == len(head.split(" | ")), "table rows as wide as the header")
        check("| 0.800 (2.6.1) |" in md and "| 1.200 (v1) |" in md and "| 40.0! |" in md, "best cells")
        check("won v1 4 / 2.6.1 1 (both ran: 3)" in md and "won v1 1 / 2.6.1 1 (both ran: 2)" in md,
              "summary wins per list")
        check(f"**{(1.2 * 0.8 * 0.9 * 1.2 * 1.1) ** 0.2:.3f}x** (5)" in md, "best geomean in the summary")
        with open(os.path.join(d, "t.csv")) as f:
            got = list(csv.DictReader(f))
        r = got[1]
        check((r["ratio_deepgemm"], r["ratio_deepgemm2"], r["ratio_deepgemm_best"], r["ratio_cublaslt"])
              == ("0.9000", "0.8000", "0.8000", "1.2000"), f"CSV ratios {r}")
        check(r["deepgemm_best"] == "deepgemm2" and r["deepgemm_best_us"] == "80.000"
              and r["deepgemm2_us"] == "80.000", "CSV best columns")
        check(got[3]["deepgemm_best"] == "deepgemm" and got[5]["deepgemm_best"] == "", "CSV best: wrong result, n/a")
        with open(os.path.join(d, "t.json")) as f:
            js = json.load(f)
        check(js["summary"]["b"]["block"]["vs"][pc.BEST_DEEPGEMM]["won"] == {"deepgemm": 1, "deepgemm2": 1},
              "JSON summary of the best DeepGEMM")
    lines = pc.summary_lines(summaries)
    check(any("vs best DeepGEMM" in x and "vs DeepGEMM 2.6.1" in x for x in lines), f"summary lines {lines}")


# ---- DeepGEMM 2.6.1 set-up -----------------------------------------------------------------------

def test_gemm_peers_args():
    """gemm_peers.py's options: a wrong, empty-where-required or huge value is a usage error
    (argparse exits 2) before anything runs; good values parse."""
    import contextlib
    import gemm_peers as gp
    good = gp.parse_args(["--out", "/tmp/x", "--flush", "read", "--only", "64x2112x7168", "--flush-mib", "1"])
    check(good.flush == "read" and good.only_set == {(64, 2112, 7168)}, "good options parse")
    bad = [["--flush", "bogus"], ["--flush", ""], ["--flush-mib", "0"], ["--flush-mib", "99999999999"],
           ["--flush-mib", "x"], ["--only", "64x2112"], ["--jobs", "-1"], ["--max-seconds", "-5"],
           ["--iters", "0"], ["--scales", ""], ["--providers", "nope"], []]
    for extra in bad:
        argv = extra if not extra else ["--out", "/tmp/x"] + extra
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                gp.parse_args(argv)
            check(False, f"options {extra} accepted")
        except SystemExit as e:
            check(e.code == 2, f"options {extra}: exit {e.code}, want 2")


def test_baseline():
    """A second fp8jit build (--lib-base) as a provider and the last peer: its ratio is base time
    over fp8jit time in the summary, the tables, the CSV and the summary lines; bad options leave
    the report as it was; disable_baseline() restores the four providers."""
    import contextlib
    import gemm_peers as gp
    before = (pc.PROVIDERS, pc.PEERS, list(pc.CSV_FIELDS))
    try:
        for bad in (["--lib-base", "/no/such/libfp8jit.so"], ["--lib-base", __file__, "--providers", "cublaslt"],
                    ["--lib-base", ""], ["--lib-base", "x" * 100000], ["--lib-base"],
                    ["--lib-base", __file__, "--shipped-base", "/no/such/rows"],
                    ["--lib-base", __file__, "--shipped-base", ""], ["--lib-base", __file__, "--base-title", " "],
                    ["--shipped-base", "off"], ["--base-title", "tree"]):
            with contextlib.redirect_stderr(io.StringIO()):
                check(raises(SystemExit, gp.parse_args, ["--out", "/tmp/x"] + bad) is not None, f"{bad} refused")
            check(pc.PROVIDERS == before[0], f"{bad}: no baseline enabled")
        a = gp.parse_args(["--out", "/tmp/x", "--lib-base", __file__, "--base-title", "fp8jit tree",
                           "--shipped-base", "off"])
        check(a.lib_base == __file__ and pc.PROVIDERS[-1] == pc.BASELINE and pc.PEERS[-1] == pc.BASELINE,
              f"baseline added last: {pc.PROVIDERS} {pc.PEERS}")
        pc.enable_baseline("again")
        check(pc.PROVIDERS.count(pc.BASELINE) == 1 and pc.PEER_TITLES[pc.BASELINE] == "fp8jit tree", "idempotent")
        rows = [_row("a", 700, 2048, 768, "block", {"fp8jit": 6.8, pc.BASELINE: 7.6, "deepgemm": 5.4}),
                _row("a", 4096, 4096, 7168, "block", {"fp8jit": 170.0, pc.BASELINE: 168.0, "deepgemm": 180.0}),
                _row("a", 64, 2112, 7168, "tensor", {"fp8jit": 9.5, pc.BASELINE: "error", "cublaslt": 9.2}),
                _row("a", 64, 2048, 768, "tensor-fast", {"fp8jit": 4.5, pc.BASELINE: 4.6})]
        s = pc.summarize(rows, 3.0e12)
        vb = s["block"]["vs"][pc.BASELINE]
        check(close(vb["geomean"], math.sqrt(7.6 / 6.8 * 168.0 / 170.0)) and vb["below_1"] == 1
              and vb["worst_shape"] == "4096x4096x7168", f"baseline ratio {vb}")
        check(pc.BASELINE not in s["tensor"]["vs"] and len(s["tensor"]["flagged"]) == 1, "a failed base is flagged")
        check(pc.BASELINE in s["tensor-fast"]["roofline"], "the base has a roofline at M <= 128")
        with tempfile.TemporaryDirectory() as d:
            md, summaries = pc.write_report(d, "t", "Title", [("a", "list a", rows)], 3.0e12, {}, [])
            check("| fp8jit tree µs |" in md and "fp8jit tree / fp8jit" in md and "vs fp8jit tree" in md,
                  "baseline columns in the markdown")
            with open(os.path.join(d, "t.csv")) as f:
                got = list(csv.DictReader(f))
            check(got[0]["fp8jit_base_us"] == "7.600" and got[0]["ratio_fp8jit_base"] == f"{7.6 / 6.8:.4f}"
                  and got[0]["config_fp8jit_base"] == "c", f"baseline CSV columns {got[0].get('ratio_fp8jit_base')}")
        lines = pc.summary_lines(summaries)
        check("vs fp8jit tree 1.0" in lines[0] and lines[0].index("vs DeepGEMM v1") < lines[0].index("vs fp8jit tree"),
              f"summary line {lines[0]}")
    finally:
        pc.disable_baseline()
    check((pc.PROVIDERS, pc.PEERS, pc.CSV_FIELDS) == before, "disable_baseline restores the report")


def test_grouped_peers_args():
    """grouped_peers.py's options: wrong, empty, huge and missing values are usage errors (exit 2)
    before torch is imported; good values parse."""
    import contextlib
    import grouped_peers as gp
    good = gp.parse_args(["--lib", "/tmp/libfp8jit.so", "--iters", "3", "--quick", "--only", "masked:32:64"])
    check(good.iters == 3 and good.quick and good.only == [("masked", 32, 64)], "good grouped options parse")
    check(good.deepgemm2 == "" and gp.parse_args(["--lib", "x", "--deepgemm2", "/p"]).deepgemm2 == "/p",
          "--deepgemm2 parses, empty by default")
    # The peer to beat: the faster DeepGEMM of a case (v1 on a tie), whichever ran.
    check(gp.best_deepgemm({gp.DG1: 10.0, gp.DG2: 9.0, "fp8jit grouped": 1.0}) == (9.0, gp.DG2), "best: 2.6.1 faster")
    check(gp.best_deepgemm({gp.DG1: 9.0, gp.DG2: 9.0}) == (9.0, gp.DG1), "best: a tie goes to v1")
    check(gp.best_deepgemm({gp.DG2: 7.0}) == (7.0, gp.DG2), "best: only 2.6.1 ran")
    check(gp.best_deepgemm({"fp8jit grouped": 1.0}) is None, "best: no DeepGEMM ran")
    cases = gp.suite(True)
    check(gp.selected(cases, []) == cases, "no --only: every case")
    check([c[:2] + (c[4],) for c in gp.selected(cases, [("contiguous", 8, 4096)])] == [("contiguous", 8, 4096)] * 2,
          "--only picks the case in both projections")
    try:
        gp.selected(cases, [("contiguous", 3, 4096)])
        check(False, "--only matching no case accepted")
    except SystemExit as e:
        check("no suite case contiguous:3:4096" in str(e.code), f"--only matching none: {e.code}")
    for argv in (["--lib", "x", "--iters", "abc"], ["--lib", ""], ["--lib", "x", "--iters", "1000000000"],
                 ["--lib", "x", "--iters", "0"], [], ["--lib", "x", "--only", ""], ["--lib", "x", "--only", "dense:8:128"],
                 ["--lib", "x", "--only", "masked:8"], ["--lib", "x", "--only", "masked:0:64"],
                 ["--lib", "x", "--only", "contiguous:8:99999999999"], ["--lib", "x", "--deepgemm2"]):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                gp.parse_args(argv)
            check(False, f"grouped options {argv} accepted")
        except SystemExit as e:
            check(e.code == 2, f"grouped options {argv}: exit {e.code}, want 2")


def test_deepgemm2_setup():
    """The CUTLASS header closure of setup_deepgemm2.py and the config text of deepgemm_peers.py (both
    importable without torch)."""
    import deepgemm_peers as gp
    import setup_deepgemm2 as sd
    with tempfile.TemporaryDirectory() as d:
        def put(rel, text=""):
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        put("inc/cute/a.hpp", '#include "b.hpp"\n#include <cuda/std/cstdint>\n')
        put("inc/cute/b.hpp", "#if 0\n  #  include <cutlass/c.h>\n#endif\n")
        put("inc/cutlass/c.h", '#include "cutlass/d.h"\n#include "a.hpp"\n')
        put("inc/cutlass/d.h", "")
        put("inc/cutlass/unused.h", "")
        put("src/k.cuh", "#include <cute/a.hpp>\n")
        got = sd.include_closure(os.path.join(d, "inc"), [os.path.join(d, "src")])
        check(got == ["cute/a.hpp", "cute/b.hpp", "cutlass/c.h", "cutlass/d.h"], f"include closure {got}")
    line = ("GemmDesc(gemm_type=0, kernel_type=1, m=64, n=2112, k=7168, num_sms=132, tc_util=100): "
            "GemmConfig(layout=Layout(swap_ab=0, block_m=64, block_n=112, block_k=128, cluster_m=1, cluster_n=2), "
            "storage_config=StorageConfig(load_block_m=64), pipeline_config=PipelineConfig(smem_size=1, num_stages=8), "
            "launch_config=LaunchConfig(num_sms=132, num_sms_per_cluster=2, num_threads=256)), LayoutInfo(num_waves=1)")
    check(gp.deepgemm2_config_text(line) == "64x112 s8 mc2A sms132", f"config text {gp.deepgemm2_config_text(line)}")
    check(gp.deepgemm2_config_text("nothing here") is None, "no config printed")
    # DeepGEMM 2.6.1 where there is none: a clear error from the loader, and the build script
    # says so with status 1 and writes nothing.
    with tempfile.TemporaryDirectory() as d:
        try:
            gp.load_deepgemm2(d)
            check(False, "load_deepgemm2 of an empty directory succeeded")
        except RuntimeError as e:
            check("no deep_gemm package" in str(e), f"load_deepgemm2 of an empty directory: {e}")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build_deepgemm2.sh")
        missing = os.path.join(d, "missing")
        r = subprocess.run(["bash", script, missing], capture_output=True, text=True)
        check(r.returncode == 1 and "no tree at" in r.stdout, f"build_deepgemm2.sh on a missing tree: {r.returncode} {r.stdout}")
        check(os.listdir(d) == [], f"build_deepgemm2.sh on a missing tree left {os.listdir(d)}")
    # v1's layout from mirrors that are not there: an error, and nothing left at the destination.
    import setup_deepgemm1 as s1
    with tempfile.TemporaryDirectory() as d:
        dest = os.path.join(d, "deepgemm")
        try:
            s1.main(["--dest", dest, "--deepgemm", os.path.join(d, "no-mirror"), "--cutlass", os.path.join(d, "no")])
            check(False, "setup_deepgemm1 without mirrors succeeded")
        except subprocess.CalledProcessError:
            pass
        check(os.listdir(d) == [], f"setup_deepgemm1 without mirrors left {os.listdir(d)}")


# ---- ctypes against the header ------------------------------------------------------------------

def _strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", re.sub(r"//[^\n]*", " ", text, flags=re.S), flags=re.S)


def parse_header():
    with open(HEADER, encoding="utf-8") as f:
        text = _strip_comments(f.read())
    enums = set(re.findall(r"typedef\s+enum\s+(\w+)", text))
    structs = {}
    for name, body in re.findall(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", text, flags=re.S):
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            m = re.match(r"(.*?)(\w+(?:\s*,\s*\w+)*)$", decl)
            ctype, names = m.group(1).strip(), [x.strip() for x in m.group(2).split(",")]
            if ctype.endswith("*") is False and "*" in names[0]:
                raise ValueError(decl)
            for n in names:
                fields.append((n, ctype))
        structs[name] = fields
    funcs = {}
    for ret, name, args in re.findall(r"FP8JIT_API\s+([\w\s\*]+?)\s*(\w+)\s*\(([^)]*)\)\s*;", text):
        args = [" ".join(a.split()) for a in args.split(",") if a.strip() and a.strip() != "void"]
        funcs[name] = (" ".join(ret.split()), args)
    return enums, structs, funcs


def c_kind(ctype, enums):
    """(size, alignment, ctypes type) of a C type on x86-64."""
    t = ctype.replace("const ", "").strip()
    if t.endswith("*"):
        return 8, 8, ctypes.c_void_p
    table = {"int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "double": ctypes.c_double,
             "int": ctypes.c_int, "size_t": ctypes.c_size_t}
    if t in table:
        c = table[t]
        return ctypes.sizeof(c), ctypes.alignment(c), c
    if t in enums:
        return 4, 4, ctypes.c_int
    raise ValueError(f"unknown C type {ctype!r}")


def layout(fields, enums):
    off, offsets, align_max = 0, {}, 1
    for name, ctype in fields:
        size, align, _ = c_kind(ctype, enums)
        off = -(-off // align) * align
        offsets[name] = off
        off += size
        align_max = max(align_max, align)
    return offsets, -(-off // align_max) * align_max


def arg_kind(arg, enums):
    t = re.sub(r"\s*\b\w+$", "", arg) if not arg.endswith("*") else arg  # drop the parameter name
    t = t.replace("const ", "").strip()
    if t.endswith("*") or t in ("fp8jit_stream_t",):
        if t in ("char*",):
            return "char*"
        return "ptr"
    if t in enums or t == "int":
        return "int"
    return {"int64_t": "i64", "size_t": "size_t", "void": "void", "double": "double"}.get(t, t)


def ctypes_kind(c):
    if c is None:
        return "void"
    if c is ctypes.c_char_p:
        return "char*"
    if c is ctypes.c_void_p or (isinstance(c, type) and issubclass(c, ctypes._Pointer)):
        return "ptr"
    return {ctypes.c_int: "int", ctypes.c_int64: "i64", ctypes.c_size_t: "size_t", ctypes.c_double: "double"}.get(c, repr(c))


def test_header():
    enums, structs, funcs = parse_header()
    expected = {"fp8jit_gemm_args": (fj.GEMM_ARGS_C_LAYOUT, fj.GEMM_ARGS_C_SIZE),
                "fp8jit_cache_stats": (fj.CACHE_STATS_C_LAYOUT, fj.CACHE_STATS_C_SIZE),
                "fp8jit_runtime_options": (fj.RUNTIME_OPTIONS_C_LAYOUT, fj.RUNTIME_OPTIONS_C_SIZE)}
    for cname, cls in fj.STRUCTS.items():
        fields = structs.get(cname)
        check(fields is not None, f"{cname} in the header")
        if not fields:
            continue
        check([n for n, _ in fields] == [n for n, _ in cls._fields_],
              f"{cname}: fields in header order {[n for n, _ in fields]} vs {[n for n, _ in cls._fields_]}")
        for (n, ctype), (pn, ptype) in zip(fields, cls._fields_):
            check(c_kind(ctype, enums)[2] is ptype, f"{cname}.{n}: C {ctype} vs ctypes {ptype.__name__}")
        offsets, size = layout(fields, enums)
        got = {n: getattr(cls, n).offset for n, _ in cls._fields_}
        check(offsets == got, f"{cname}: header layout {offsets} vs ctypes {got}")
        check(size == ctypes.sizeof(cls), f"{cname}: sizeof {size} vs ctypes {ctypes.sizeof(cls)}")
        check(expected[cname] == (offsets, size), f"{cname}: recorded layout constants")
    for name, (restype, argtypes) in fj.FUNCTIONS.items():
        decl = funcs.get(name)
        check(decl is not None, f"{name} declared in the header")
        if not decl:
            continue
        ret, args = decl
        want_ret = "void" if ret == "void" else arg_kind(ret + " x", enums)
        check(ctypes_kind(restype) == want_ret, f"{name}: returns {ret}, ctypes {ctypes_kind(restype)}")
        check(len(args) == len(argtypes), f"{name}: {len(args)} parameters, ctypes {len(argtypes)}")
        for arg, at in zip(args, argtypes):
            check(arg_kind(arg, enums) == ctypes_kind(at), f"{name}: parameter {arg!r} vs ctypes {ctypes_kind(at)}")


def test_c_compiler():
    """offsetof/sizeof from a real C compiler, where one is installed."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        print("note: no C compiler here: the compiled layout check is skipped")
        return
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "fp8jit"))
        with open(os.path.join(d, "fp8jit", "version.hpp"), "w") as f:  # configure_file's output stand-in
            f.write('#define FP8JIT_VERSION_STRING "0.0.0"\n')
        lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "fp8jit/fp8jit.h"', "int main(void) {"]
        for cname, cls in fj.STRUCTS.items():
            for n, _ in cls._fields_:
                lines.append(f'  printf("{cname} {n} %zu\\n", offsetof({cname}, {n}));')
            lines.append(f'  printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        lines += ["  return 0;", "}"]
        src, exe = os.path.join(d, "t.c"), os.path.join(d, "t")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([cc, "-std=c99", "-I", d, "-I", os.path.join(ROOT, "include"), src, "-o", exe],
                           capture_output=True, text=True)
        if r.returncode != 0:
            check(False, f"C compile of the layout probe failed: {r.stderr[:500]}")
            return
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split("\n")
        for line in filter(None, out):
            cname, field, value = line.split()
            cls = fj.STRUCTS[cname]
            got = ctypes.sizeof(cls) if field == "sizeof" else getattr(cls, field).offset
            check(int(value) == got, f"C compiler: {cname}.{field} = {value}, ctypes {got}")
        print(f"note: layouts match {os.path.basename(cc)}'s offsetof/sizeof")


def test_library():
    """The C ABI calls that need no GPU, on a built library (skipped when none is found)."""
    path = os.environ.get("FP8JIT_LIB") or fj.find_library(ROOT)
    if not path:
        print("note: no libfp8jit.so found (FP8JIT_LIB, build*/): the library checks are skipped")
        return
    try:
        lib = fj.Fp8jit(path, cache_dir="")
    except fj.Fp8jitError as e:
        check(False, f"loading {path}: {e}")
        return
    with lib:
        check(re.fullmatch(r"\d+\.\d+\.\d+", lib.version) is not None, f"version {lib.version}")
        a = fj.GemmArgs()
        lib.lib.fp8jit_gemm_args_init(ctypes.byref(a))
        check((a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.scale_a_layout, a.scale_b_layout, a.fast_accum,
               a.m, a.lda, a.a, a.bias) == (fj.FP8_E4M3, fj.FP8_E4M3, fj.DTYPE_BF16, fj.SCALE_MODE_BLOCK,
                                            fj.LAYOUT_COL_MAJOR_TMA, fj.LAYOUT_ROW_MAJOR, 0, 0, 0, None, None),
              "fp8jit_gemm_args_init defaults read back through the ctypes layout")
        check(lib.scale_count(fj.GRANULARITY_GROUP128, fj.LAYOUT_COL_MAJOR_TMA, 37, 768) == 6 * 40,
              "scale_count 1x128 col_major_tma pads M to 4")
        check(lib.scale_count(fj.GRANULARITY_BLOCK128, fj.LAYOUT_ROW_MAJOR, 2112, 7168) == 17 * 56,
              "scale_count 128x128")
        args = lib.gemm_args(64, 2112, 7168, fj.SCALE_MODE_BLOCK)
        check(args.scale_a_size == 56 * 64 and args.scale_b_size == 17 * 56, "gemm_args scale sizes")
        msg = raises(fj.Fp8jitError, lib.gemm, args, 0)  # NULL operands: refused before any launch
        check(msg is not None and "invalid argument" in msg, f"fp8jit_gemm with NULL operands: {msg}")
        # Selection reads the pointers' alignment only: made-up aligned addresses will do.
        args.a, args.b, args.d, args.scale_a, args.scale_b = 1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20
        try:
            name = lib.select(args)
            check(bool(name), "fp8jit_gemm_select names a kernel")
            print(f"note: {path}: version {lib.version}, 64x2112x7168 block -> {name}")
        except fj.Fp8jitError as e:
            check(False, f"fp8jit_gemm_select: {e}")
        st = lib.cache_stats()
        check(set(st) == {n for n, _ in fj.CacheStats._fields_}, "cache stats")
    # Runtimes from fp8jit_runtime_options: no shipped rows, the installed ones, a folder; the same
    # selection where no row is for this GPU; shipped_tuning without a cache string is refused.
    names = []
    for shipped in ("", fj.Fp8jit.INSTALLED_ROWS, os.path.join(ROOT, "share", "fp8jit", "tuning")):
        try:
            with fj.Fp8jit(path, cache_dir="", shipped_tuning=shipped) as other:
                a2 = other.gemm_args(64, 2112, 7168, fj.SCALE_MODE_BLOCK)
                a2.a, a2.b, a2.d, a2.scale_a, a2.scale_b = 1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20
                names.append(other.select(a2))
        except fj.Fp8jitError as e:
            check(False, f"fp8jit_runtime_create_with_options (shipped_tuning {shipped!r}): {e}")
    check(len(names) == 3 and len(set(names)) == 1, f"selection with and without shipped rows off a GPU: {names}")
    check(raises(fj.Fp8jitError, fj.Fp8jit, path, None, "") is not None, "shipped_tuning without cache_dir")
    # gemm_peers.py --lib-base: a second copy of the library loads beside the first as an object
    # of its own (another path, the same SONAME), with its own runtime, and selects alike.
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "libfp8jit.so")
        shutil.copyfile(os.path.realpath(path), copy)
        try:
            with fj.Fp8jit(path, cache_dir="", shipped_tuning="") as one, \
                    fj.Fp8jit(copy, cache_dir=os.path.join(d, "cache"), shipped_tuning="") as two:
                picks = []
                for lib in (one, two):
                    a3 = lib.gemm_args(4096, 32768, 512, fj.SCALE_MODE_TENSOR, fast_accum=True)
                    a3.a, a3.b, a3.d, a3.scale_a, a3.scale_b = 1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20
                    picks.append(lib.select(a3))
                with open("/proc/self/maps", encoding="utf-8") as f:
                    mapped = {line.split()[-1] for line in f if "libfp8jit" in line}
                check(copy in mapped and os.path.realpath(path) in mapped, f"two libraries mapped: {mapped}")
                check(picks[0] == picks[1] and one.lib._handle != two.lib._handle, f"two runtimes: {picks}")
            import types
            import gemm_peers as gp
            for shipped, want in (("off", "off"), (os.path.join(ROOT, "share", "fp8jit", "tuning"), None)):
                lib, rows = gp.base_library(types.SimpleNamespace(lib_base=copy, shipped_base=shipped))
                with lib:
                    check(lib.path == copy and rows == (want or shipped), f"base_library rows {rows}")
        except fj.Fp8jitError as e:
            check(False, f"a second copy of {path}: {e}")


def test_shipped_gain():
    import shipped_gain as sg
    def row(m, scale, shipped, heuristic, cs="k1", ch="k1", status="ok"):
        return {"list": "l", "m": m, "n": 64, "k": 128, "scale": scale,
                "variants": {"shipped": {"status": status, "us": shipped, "config": cs},
                             "heuristic": {"status": "ok", "us": heuristic, "config": ch}}}
    rows = [row(1, "block", 10.0, 10.2), row(2, "block", 10.0, 12.0, ch="k2"), row(3, "block", 10.0, 8.0, ch="k3"),
            row(4, "block", None, 9.0, status="error"), row(5, "tensor", 5.0, 5.0)]
    s = sg.summarize_ab(rows)
    b = s["l"]["block"]
    check(b["rows"] == 4 and b["flagged"] == 1 and b["all"]["shapes"] == 3, f"shipped gain counts {b}")
    close(b["all"]["geomean"], (1.02 * 1.2 * 0.8) ** (1 / 3))
    check(b["changed"]["shapes"] == 2 and b["changed"]["worst"] == (0.8, "3x64x128")
          and b["changed"]["best"] == (1.2, "2x64x128"), f"shipped gain changed rows {b['changed']}")
    close(b["changed"]["geomean"], (1.2 * 0.8) ** 0.5)
    t = s["l"]["tensor"]
    check(t["changed"]["shapes"] == 0 and t["changed"]["geomean"] is None and t["changed"]["worst"] is None,
          f"no changed rows {t}")
    md = sg.markdown_ab(["meta"], rows, s)
    check("| l | block | 4 | 0.993 | 2 | 0.980 | 0.800 at 3x64x128 | 1.200 at 2x64x128 | 1 |" in md, md[:600])
    check("| l | 4 | 64 | 128 | block | error | 9.0 |  |" in md, "a failed call's row")
    out = os.path.join(tempfile.mkdtemp(prefix="fp8jit_sg_"), "never")
    for bad in (["--scales", "block,fp4"], ["--scales", ""], ["--iters", "0"], ["--iters", "-5"],
                ["--warmup", "-1"], ["--flush-mib", "0"], ["--rows", "/nonexistent/rows"], ["--rows", HEADER],
                ["--rows", "r" * 100000], ["--lists", "no-such-list"], ["--lists", ""], ["--lists", ",,"],
                ["--lib", "/nonexistent/libfp8jit.so"], ["--lib", ""], ["--iters", "many"]):
        check(raises(SystemExit, sg.parse_args, ["--out", out] + bad) is not None, f"shipped_gain.py {bad} refused")
        check(raises(SystemExit, sg.main, ["--out", out] + bad) is not None and not os.path.exists(out),
              f"shipped_gain.py {bad}: nothing written")
    check(raises(SystemExit, sg.parse_args, []) is not None, "shipped_gain.py without --out refused")


def run_tests(tests, *args):
    """Runs each test (a test that raises is one failure, the rest still run), prints the count;
    the exit status: 1 if any check failed. lab/selftest.py runs its tests through it too."""
    for t in tests:
        try:
            t(*args)
        except Exception as e:  # noqa: BLE001
            FAILURES.append(f"{t.__name__}: {type(e).__name__}: {e}")
            print(f"FAIL: {t.__name__} raised {type(e).__name__}: {e}")
    print(f"{CHECKS[0]} checks, {len(FAILURES)} failed")
    return 1 if FAILURES else 0


def main():
    return run_tests((test_shapes, test_arithmetic, test_events, test_report, test_best_deepgemm,
                      test_deepgemm2_setup, test_gemm_peers_args, test_baseline, test_grouped_peers_args,
                      test_shipped_gain, test_header, test_c_compiler, test_library))


if __name__ == "__main__":
    sys.exit(main())
