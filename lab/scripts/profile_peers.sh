#!/usr/bin/env bash
# fp8jit against DeepGEMM under Nsight Compute, and the cold first call of fp8jit's default
# configs split into its phases (issue 18, deliverables 2 and 6). Measurement only.
#
#   ncu    for each shape, one ncu call over bench/peers/gemm_peers.py (--only SHAPE, block scaling,
#          fp8jit and DeepGEMM, one warm-up and one timed call): the timed call of each provider
#          runs between cudaProfilerStart/Stop and `-k regex:fp8jit_gemm|fp8_gemm_kernel -c 2`
#          profiles exactly those two kernels (not the L2 flush, the reference or the checked
#          calls); same inputs, same process, `--clock-control none`, caches flushed by ncu before
#          each profiled kernel. Metrics: lab/scripts/ncu_common.sh's sections and wgmma
#          wavefronts, plus launch statistics, L2 hit rate and DRAM bytes. torch.profiler (CUPTI)
#          cannot run under ncu, so the harness's timer is replaced by CUDA events for these runs
#          (its times under ncu mean nothing; a plain run of the harness first gives the real ones).
#   cold   for each distinct default spec of bench/shapes/deepseek_v3.csv (block and tensor, from
#          `fp8jit select-gemm`): NVRTC's own phase split (`--time`, NVRTC called directly with the
#          runtime's options and -I templates), `fp8jit compile` (NVRTC + the cubin post-passes),
#          module load alone (cuModuleLoadData + cuModuleGetFunction), and through the C ABI the
#          first call with an empty cache, a warm call, and the first call of a new runtime on the
#          same cache directory (disk-cache hit).
#   extra  cold, then `fp8jit gemm --iters 1` cold and disk-hit (FP8JIT_LOG=3) on three shapes,
#          then DeepGEMM's tiles through lab/scripts/configs.sh where fp8jit's config space has them.
#   cfgncu fp8jit alone with explicit configs under the same ncu metrics (`fp8jit gemm --config`,
#          its third launch): CFG_ITEMS holds lines "M N K SCALE [CONFIG-JSON]"; the summary adds
#          them as columns of their shape.
#   compare  prep, ncu, cfgncu: the peers and chosen fp8jit configs in one call.
#   prep   a plain run of the harness on the shapes (the real kernel times; fills both JIT caches).
#   profile  prep, then ncu.
#   all    cold (at most COLD_BUDGET_S, default 80 s), prep, ncu. No ncu call starts after
#          BUDGET_S - NCU_RESERVE_S seconds (defaults 400 and 110); each ends by BUDGET_S.
#
# Usage (repo root, Hopper GPU, ncu, torch, .carry/deepgemm):
#   bash lab/scripts/profile_peers.sh [all|profile|extra|compare|cfgncu|prep|ncu|cold] [MxNxK ...]
#   OUT (default /tmp/fp8jit-profile-peers): summary.md, cold.md, profile.tgz (every log, ncu
#   report and raw CSV; kept to a few files because the device tool returns at most 8).
#   BUILD_DIR: libfp8jit.so and the fp8jit CLI (default build-prof-bin if both load there, with
#   LD_LIBRARY_PATH set to it; else build-peers, built as bench/peers/run.sh builds it). A carried
#   build-prof-bin/ (ignored, passed in `carry`) holds a local Release build's libfp8jit.so and
#   fp8jit, the libfmt.so.9 and libsqlite3.so.0 they link, COMMIT, and `git archive` of that commit
#   (templates/, for NVRTC's -I, and head.tar, built instead when the binaries do not load), so that
#   others' uncommitted edits in the travelling tree stay out of the measurement.
# Default shapes: 4096x32768x512 4096x4096x7168 4096x24576x1536 128x2112x7168 64x4096x7168
# 16x1536x2048 (the block shapes where fp8jit trails DeepGEMM most, bench/results/*/peers).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
ROOT=$PWD
mode=${1:-all}
[ $# -gt 0 ] && shift
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(4096x32768x512 4096x4096x7168 4096x24576x1536 128x2112x7168 64x4096x7168 16x1536x2048)
OUT=${OUT:-/tmp/fp8jit-profile-peers}
BUDGET_S=${BUDGET_S:-400}
WORK=${WORK:-/tmp/profile-peers}
mkdir -p "$OUT" "$WORK" || exit 1
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(elapsed)s] $*"; }
pack() {  # the logs, then the ncu reports apart (the device tool returns files of 16 MiB at most)
  tar czf "$OUT/profile.tgz" -C "$WORK" --exclude='*.ncu-rep' --exclude='fp8jit-cold-*' . 2>/dev/null
  (cd "$WORK" && ls ./*.ncu-rep > /dev/null 2>&1 && tar czf "$OUT/reports.tgz" ./*.ncu-rep)
}

export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-peers-cache}
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/deepgemm-cache}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] && export DG_JIT_NVCC_COMPILER=${DG_JIT_NVCC_COMPILER:-$CUDA_HOME/bin/nvcc}
export PATH="$CUDA_HOME/bin:$PATH" PYTHONUNBUFFERED=1

# ---- libfp8jit.so and the CLI ----------------------------------------------------------------
loads() {  # dir: both the library and the CLI run from there
  [ -f "$1/libfp8jit.so" ] && [ -x "$1/fp8jit" ] || return 1
  LD_LIBRARY_PATH="$1:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" "$1/fp8jit" --version > /dev/null 2>&1 &&
    LD_LIBRARY_PATH="$1:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" \
      python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$1/libfp8jit.so" 2> /dev/null
}
B=${BUILD_DIR:-}
if [ -z "$B" ] && loads build-prof-bin; then B=build-prof-bin; fi
if [ -n "$B" ] && loads "$B"; then
  export LD_LIBRARY_PATH="$ROOT/$B:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
  log "using $B (carried build of $(cat "$B/COMMIT" 2>/dev/null || echo '?'))"
else
  B=${BUILD_DIR:-build-peers}
  src=.
  if [ -f build-prof-bin/head.tar ]; then
    # The committed tree the carried binaries came from (others' uncommitted edits stay out).
    src=/tmp/fp8jit-head && rm -rf "$src" && mkdir -p "$src" && tar -xf build-prof-bin/head.tar -C "$src"
    B=$src/build
  fi
  log "building $B from $src"
  cfg=(-G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF -DFP8JIT_BUILD_BENCH=OFF)
  if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
    lib=$(ls /lib/x86_64-linux-gnu/libsqlite3.so* /usr/lib/x86_64-linux-gnu/libsqlite3.so* 2>/dev/null | head -1)
    cfg+=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY="${lib:-/lib/x86_64-linux-gnu/libsqlite3.so.0}")
  fi
  [ -f "$B/CMakeCache.txt" ] || cmake -S "$src" -B "$B" "${cfg[@]}" > "$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log"; exit 1; }
  cmake --build "$B" -j"$(nproc)" --target fp8jit_shared fp8jit_cli > "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
  log "built"
fi
case $B in /*) BD=$B ;; *) BD=$ROOT/$B ;; esac
LIB=$BD/libfp8jit.so
CLI=$BD/fp8jit
# The headers NVRTC is given in `cold`: those the binaries embed (a copy beside carried ones).
TPL=$ROOT/templates
[ -d "$BD/templates" ] && TPL=$BD/templates
[ -d "$BD/../templates" ] && [ "$BD" = /tmp/fp8jit-head/build ] && TPL=/tmp/fp8jit-head/templates

# ---- the Python side (written out once) ------------------------------------------------------
driver=$WORK/profile_peers_driver.py
cat > "$driver" <<'PY'
"""profile_peers.sh's Python side: `run` (gemm_peers.main for ncu), `summary`, `cold`."""
import csv, ctypes, glob, json, os, re, statistics, subprocess, sys, tempfile, time

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))


def run_harness(argv):
    """gemm_peers.main with its timer on CUDA events, the timed calls between
    cudaProfilerStart/Stop (what ncu --profile-from-start off profiles)."""
    import gemm_peers as gp

    def time_calls(self, fns, iters):
        torch = self.torch
        out = []
        torch.cuda.synchronize()
        for fn in fns:
            times = []
            for _ in range(iters):
                self.flush()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                torch.cuda.profiler.stop()
                times.append(e0.elapsed_time(e1) * 1e3)
            out.append((times, ["(CUDA events under ncu)"]))
        return out
    gp.Timer.time = time_calls
    # The device-to-device copy's timing would run inside the profiled range too: not needed here.
    gp.copy_bandwidth = lambda torch, timer, iters=10: (0.0, ["(skipped under ncu)"])
    return gp.main(argv)


# ---- summary of the ncu raw CSVs ---------------------------------------------------------------

def read_raw(path):
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.reader(f))
    # ncu prints ==PROF== lines before the CSV when it has any: start at the header.
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 3:
        return []
    head, units = rows[start], rows[start + 1]
    out = []
    for r in rows[start + 2:]:
        if len(r) != len(head):
            continue
        out.append({h: (v, u) for h, v, u in zip(head, r, units)})
    return out


def num(row, key):
    v = row.get(key)
    if v is None:
        return None
    try:
        return float(v[0].replace(",", ""))
    except ValueError:
        return None


def fmt(v, digits=1, scale=1.0):
    return "-" if v is None else f"{v * scale:,.{digits}f}"


def provider_of(name):
    return "fp8jit" if "fp8jit" in name else "DeepGEMM"


STALL = re.compile(r"issue_stalled_(\w+?)(?:_per_\w+)?\.(?:ratio|pct|sum|avg)$")


def stall_reasons(k):
    """[(value, reason)] from the WarpStateStats metrics, preferring the per-issue-active ratios
    (cycles a warp spends in the state per instruction issued); 'selected' is no stall."""
    best = {}
    for key in k:
        if "issue_stalled_" not in key or "not_issued" in key:
            continue
        m = STALL.search(key)
        v = num(k, key)
        if not m or v is None or m.group(1) == "selected":
            continue
        rank = 2 if key.endswith("_per_issue_active.ratio") else 1 if key.endswith(".ratio") else 0
        if m.group(1) not in best or rank > best[m.group(1)][0]:
            best[m.group(1)] = (rank, v)
    top = max((r for r, _ in best.values()), default=0)
    return sorted(((v, n) for n, (r, v) in best.items() if r == top), reverse=True)


# The tensor pipe's active share: ncu 2025.3 has no sm__pipe_tensor_op_gmma_cycles_active on gh100;
# SpeedOfLight's breakdown carries these (the first is the MMA types of the tensor pipe).
TENSOR_PIPE = ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed")


def first(g, keys):
    for key in keys:
        v = g(key)
        if v is not None:
            return v
    return None


def tensor_cycles(g):
    """Cycles per SM (averaged over all SMs) the tensor pipe was active."""
    pct, el = first(g, TENSOR_PIPE), g("sm__cycles_elapsed.avg")
    return pct / 100 * el if pct is not None and el else None


def kernel_rows(k):
    """(label, value) of one profiled kernel."""
    g = lambda key: num(k, key)  # noqa: E731
    cluster = [k.get(f"launch__cluster_dim_{a}", ("-", ""))[0] for a in "xyz"]
    el, act = g("sm__cycles_elapsed.avg"), g("sm__cycles_active.avg")
    stalls = stall_reasons(k)
    l2_read = g("lts__t_sectors_srcunit_tex_op_read.sum")
    rows = [
        ("kernel", k.get("Kernel Name", ("?", ""))[0][:60]),
        ("grid x block (cluster)", f"{k.get('Grid Size', ('?', ''))[0]} x {k.get('Block Size', ('?', ''))[0]} ({'x'.join(cluster)})"),
        ("registers / thread (at launch, before setmaxnreg)", fmt(g("launch__registers_per_thread"), 0)),
        ("dynamic smem (KiB)", fmt(g("launch__shared_mem_per_block_dynamic"), 1, 1 / 1024)),
        ("duration (µs)", fmt(g("gpu__time_duration.sum"), 2, 1e-3)),
        ("SM clock (GHz)", fmt(g("sm__cycles_elapsed.avg.per_second"), 3, 1e-9)),
        ("elapsed cycles / SM-active cycles (k)", f"{fmt(el, 1, 1e-3)} / {fmt(act, 1, 1e-3)}"),
        ("SMs active (% of elapsed)", fmt(act / el * 100 if el and act else None, 1)),
        ("SM throughput (%)", fmt(g("sm__throughput.avg.pct_of_peak_sustained_elapsed"))),
        ("tensor pipe (gmma) active (% elapsed)", fmt(first(g, TENSOR_PIPE))),
        ("tensor-active / idle cycles per SM (k)", f"{fmt(tensor_cycles(g), 1, 1e-3)} / "
         f"{fmt(el - tensor_cycles(g) if el and tensor_cycles(g) is not None else None, 1, 1e-3)}"),
        ("ALU / FMA pipe active (% elapsed)", f"{fmt(g('sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed'))} / "
         f"{fmt(g('sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed'))}"),
        ("issue slots busy (per scheduler-cycle)", fmt(g("smsp__issue_active.avg.per_cycle_active"), 3)),
        ("eligible / active warps per scheduler", f"{fmt(g('smsp__warps_eligible.avg.per_cycle_active'), 2)} / {fmt(g('smsp__warps_active.avg.per_cycle_active'), 2)}"),
        ("instructions executed (M)", fmt(g("smsp__inst_executed.sum"), 2, 1e-6)),
        ("cycles between issues per warp", fmt(g("smsp__average_warp_latency_per_inst_issued.ratio"), 2)),
        ("top stalls (cycles per issued instr.)", ", ".join(f"{n} {v:.2f}" for v, n in stalls[:4]) or "-"),
        ("L2 hit rate (%)", fmt(g("lts__t_sector_hit_rate.pct"))),
        ("L2 throughput (% peak) / GB/s", f"{fmt(g('lts__t_sectors.avg.pct_of_peak_sustained_elapsed'))} / {fmt(g('lts__t_bytes.sum.per_second'), 0, 1e-9)}"),
        ("L2 -> SM reads (MB)", fmt(l2_read * 32 if l2_read is not None else None, 1, 1e-6)),
        ("DRAM read / write (MB)", f"{fmt(g('dram__bytes_read.sum'), 1, 1e-6)} / {fmt(g('dram__bytes_write.sum'), 1, 1e-6)}"),
        ("DRAM throughput (% peak)", fmt(g("dram__throughput.avg.pct_of_peak_sustained_elapsed"))),
        ("smem wavefronts of wgmma (M)", fmt(g("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum"), 2, 1e-6)),
        ("smem pipe busy (% peak)", fmt(g("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"))),
    ]
    return rows


def peers_configs(path):
    """{provider: config text} and plain-run times from a gemm_peers.csv."""
    out = {}
    if not os.path.isfile(path):
        return out
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r.get("scale") != "block":
                continue
            key = f"{r['m']}x{r['n']}x{r['k']}"
            out[key] = {"fp8jit": r.get("config_fp8jit", ""), "DeepGEMM": r.get("config_deepgemm", ""),
                        "fp8jit_us": r.get("fp8jit_us", ""), "deepgemm_us": r.get("deepgemm_us", "")}
    return out


def summary(work, shapes, out_md):
    plain = peers_configs(os.path.join(work, "prep", "gemm_peers.csv"))
    lines = ["# fp8jit and DeepGEMM under Nsight Compute (block scaling, bf16 out)", "",
             "One ncu call per shape over bench/peers/gemm_peers.py (same process, same inputs), "
             "`--clock-control none`, caches flushed by ncu before each profiled kernel. "
             "Plain-run times: the same harness without ncu (kineto, L2 flushed, median).", ""]
    brief = ["| shape | fp8jit config | DeepGEMM config | plain µs fp8jit / DeepGEMM | ncu µs fp8jit / DeepGEMM |",
             "| --- | --- | --- | --- | --- |"]
    body = []
    for shape in shapes:
        raw = os.path.join(work, f"{shape}.raw.csv")
        ks = read_raw(raw) if os.path.isfile(raw) else []
        conf = peers_configs(os.path.join(work, f"peers_{shape}", "gemm_peers.csv")).get(shape) or plain.get(shape, {})
        p = plain.get(shape, {})
        by = {}
        for k in ks:
            by.setdefault(provider_of(k.get("Kernel Name", ("", ""))[0]), k)
        d = {n: num(k, "gpu__time_duration.sum") for n, k in by.items()}
        brief.append(f"| {shape} | {conf.get('fp8jit', '-')} | {conf.get('DeepGEMM', '-')} | "
                     f"{p.get('fp8jit_us', '-')} / {p.get('deepgemm_us', '-')} | "
                     f"{fmt(d.get('fp8jit'), 2, 1e-3)} / {fmt(d.get('DeepGEMM'), 2, 1e-3)} |")
        body += [f"## {shape}", ""]
        if not by and not glob.glob(os.path.join(work, f"cfg*_{shape}.raw.csv")):
            body += [f"(no profiled kernel: see {shape}.ncu.txt)", ""]
            continue
        names = [n for n in ("fp8jit", "DeepGEMM") if n in by]
        heads = [f"{n} ({conf.get(n, '')})" for n in names]
        cols = [kernel_rows(by[n]) for n in names]
        # fp8jit with an explicit config (`cfgncu`, through `fp8jit gemm --config`).
        for raw_cfg in sorted(glob.glob(os.path.join(work, f"cfg*_{shape}.raw.csv"))):
            kc = read_raw(raw_cfg)
            if not kc:
                continue
            with open(raw_cfg.replace(".raw.csv", ".label"), encoding="utf-8") as f:
                heads.append(f"fp8jit, `fp8jit gemm --config` ({f.read().strip()})")
            cols.append(kernel_rows(kc[0]))
        body.append("| metric | " + " | ".join(heads) + " |")
        body.append("| --- |" + " --- |" * len(heads))
        for i, (label, _) in enumerate(cols[0]):
            body.append(f"| {label} | " + " | ".join(c[i][1] for c in cols) + " |")
        body.append("")
    with open(out_md, "w", encoding="utf-8") as f:
        f.write("\n".join(lines + brief + [""] + body) + "\n")


# ---- cold first call ---------------------------------------------------------------------------

def cold(cli, lib_path, out_md, work, budget_s, templates):
    t_start = time.time()
    import torch
    import fp8jit_ctypes as fj
    import gemm_peers as gp
    import peers_core as pc
    torch.cuda.init()
    _ = torch.zeros(1, device="cuda")  # the context first, as the harness does
    env0 = dict(os.environ, FP8JIT_LOG="0")
    shapes = pc.read_shapes(os.path.join(ROOT, "bench", "shapes", "deepseek_v3.csv"))
    specs = {}
    for s in shapes:
        for scale in ("block", "tensor"):
            r = subprocess.run([cli, "select-gemm", "--m", str(s.m), "--n", str(s.n), "--k", str(s.k),
                                "--scale", scale], capture_output=True, text=True, env=env0)
            specs.setdefault(r.stdout.strip(), []).append((s, scale))
    print(f"cold: {len(specs)} distinct default specs for {len(shapes)} shapes x 2 scale modes", flush=True)

    nvrtc_path = next((p for p in ("/usr/local/cuda/lib64/libnvrtc.so.13", "libnvrtc.so.13") if
                       not p.startswith("/") or os.path.exists(p)), "libnvrtc.so.13")
    nv = ctypes.CDLL(nvrtc_path)
    cu = ctypes.CDLL("libcuda.so.1")
    major, minor = ctypes.c_int(), ctypes.c_int()
    nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    with open("/proc/self/maps", encoding="utf-8") as f:
        libs = sorted({ln.split()[-1] for ln in f if "libnvrtc" in ln})
    print(f"cold: NVRTC {major.value}.{minor.value}; loaded in this process: {libs}", flush=True)
    opts_base = ["--gpu-architecture=sm_90a", "-std=c++17", "--prec-div=true", "--fmad=false",
                 "-default-device", "-DNDEBUG", "-I", templates]

    def nvrtc_direct(src, tfile):
        if os.path.exists(tfile):
            os.remove(tfile)
        prog = ctypes.c_void_p()
        assert nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
        opts = [o.encode() for o in opts_base + [f"--time={tfile}"]]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        t = time.perf_counter()
        rc = nv.nvrtcCompileProgram(prog, len(opts), arr)
        wall = time.perf_counter() - t
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
        phases = {}
        if os.path.exists(tfile):
            with open(tfile, encoding="utf-8") as f:
                for line in f.read().splitlines()[1:]:
                    parts = [p.strip() for p in line.split(",")]
                    if len(parts) >= 4:
                        phases[parts[1]] = phases.get(parts[1], 0.0) + float(parts[2])
        return rc, wall, phases

    def module_load(cubin):
        mod = ctypes.c_void_p()
        fn = ctypes.c_void_p()
        t0 = time.perf_counter()
        rc = cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(cubin))
        t1 = time.perf_counter()
        rc2 = cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"fp8jit_gemm")
        t2 = time.perf_counter()
        cu.cuModuleUnload(mod)
        return rc, rc2, (t1 - t0) * 1e3, (t2 - t1) * 1e3

    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for i, (spec, uses) in enumerate(specs.items()):
        if time.time() - t_start > budget_s:
            print(f"cold: budget spent, {len(specs) - i} specs left out", flush=True)
            break
        try:
            name = json.loads(spec)
            cfg = name["config"]
            tag = f"{name['problem']['scale']}_{cfg['block_m']}x{cfg['block_n']}_s{cfg['stages']}_g{cfg['group_m']}" \
                  f"_c{cfg['cluster_m']}x{cfg['cluster_n']}"
            # First the C ABI, on the first shape that uses the spec: an empty cache (the first spec pays
            # the process's first NVRTC use, as a server's first new config would), then a disk-cache hit.
            s, scale = uses[0]
            inp = gp.Inputs(torch, s, 1234)
            D = torch.empty(s.m, s.n, dtype=torch.bfloat16, device="cuda")
            cache = tempfile.mkdtemp(prefix="fp8jit-cold-", dir=os.path.join(work, "cold"))
            timings = {}
            for phase in ("cold", "disk"):
                rt = fj.Fp8jit(lib_path, cache_dir=cache)
                args = rt.gemm_args(s.m, s.n, s.k, fj.SCALE_MODE_BLOCK if scale == "block" else fj.SCALE_MODE_TENSOR)
                args.a, args.b, args.d = inp.A.data_ptr(), inp.B.data_ptr(), D.data_ptr()
                if scale == "block":
                    args.scale_a, args.scale_b = inp.sa_buf.data_ptr(), inp.sb.data_ptr()
                else:
                    args.scale_a, args.scale_b = inp.ta.data_ptr(), inp.tb.data_ptr()
                torch.cuda.synchronize()
                t = time.perf_counter()
                rt.gemm(args, stream)
                torch.cuda.synchronize()
                timings[phase] = time.perf_counter() - t
                warm = []
                for _ in range(5):
                    t = time.perf_counter()
                    rt.gemm(args, stream)
                    torch.cuda.synchronize()
                    warm.append(time.perf_counter() - t)
                timings[phase + "_warm"] = statistics.median(warm)
                st = rt.cache_stats()
                timings[phase + "_stats"] = st
                if phase == "cold":
                    timings["selected"] = rt.select(args)
                rt.close()
            del inp, D
            torch.cuda.empty_cache()
            t = time.perf_counter()
            src = subprocess.run([cli, "emit", "--spec", spec], capture_output=True, text=True, env=env0).stdout
            emit_wall = time.perf_counter() - t
            rc, nv_wall, phases = nvrtc_direct(src, os.path.join(work, "cold", f"{tag}.time.csv"))
            # The same call again: NVRTC's own cache (CUDA 12.9+, kept in the driver's compute cache).
            _, nv_again, _ = nvrtc_direct(src, os.path.join(work, "cold", f"{tag}.again.csv"))
            # `fp8jit compile` in a fresh process with NVRTC's cache off (CUDA_CACHE_DISABLE=1).
            t = time.perf_counter()
            r0 = subprocess.run([cli, "compile", "--spec", spec], capture_output=True, text=True,
                                env=dict(env0, CUDA_CACHE_DISABLE="1"))
            nocache_wall = time.perf_counter() - t
            m0 = re.search(r"compiled in ([0-9.]+) s", r0.stdout)
            cubin_path = os.path.join(work, "cold", f"{tag}.cubin")
            t = time.perf_counter()
            r = subprocess.run([cli, "compile", "--spec", spec, "--cubin", cubin_path], capture_output=True,
                               text=True, env=env0)
            compile_wall = time.perf_counter() - t
            m = re.search(r"compiled in ([0-9.]+) s", r.stdout)
            cli_nvrtc = float(m.group(1)) if m else None
            post = [ln for ln in r.stdout.splitlines() if ln.startswith("post-pass")]
            with open(cubin_path, "rb") as f:
                cubin = f.read()
            loads = [module_load(cubin) for _ in range(3)]
            st = timings["cold_stats"]
            row = {
                "spec": tag, "uses": ", ".join(f"{u.m}x{u.n}x{u.k}" for u, _ in uses), "shape": f"{s.m}x{s.n}x{s.k}",
                "selected": timings["selected"], "emit_s": emit_wall, "nvrtc_rc": rc, "nvrtc_direct_s": nv_wall,
                "phases_ms": phases, "nvrtc_direct_again_s": nv_again,
                "cli_nocache_wall_s": nocache_wall, "cli_nocache_nvrtc_s": float(m0.group(1)) if m0 else None,
                "cli_compile_wall_s": compile_wall, "cli_nvrtc_s": cli_nvrtc,
                "post_pass_est_s": (compile_wall - cli_nvrtc - emit_wall) if cli_nvrtc is not None else None,
                "post_pass": post, "cubin_bytes": len(cubin),
                "module_load_ms": [round(x[2], 3) for x in loads], "get_function_ms": [round(x[3], 3) for x in loads],
                "load_rc": [(x[0], x[1]) for x in loads],
                "abi_cold_first_call_s": timings["cold"], "abi_cold_compile_s": st["compile_seconds"],
                "abi_cold_compiles": st["compiles"], "abi_warm_call_s": timings["cold_warm"],
                "abi_disk_first_call_s": timings["disk"], "abi_disk_warm_call_s": timings["disk_warm"],
                "abi_disk_hits": timings["disk_stats"]["disk_hits"], "abi_disk_compiles": timings["disk_stats"]["compiles"],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        except Exception as e:  # noqa: BLE001 - one spec's failure is reported, the rest go on
            print(f"cold: {spec}: {type(e).__name__}: {e}", flush=True)
            continue
        write_cold(rows, out_md)
    return 0


def write_cold(rows, out_md):
    L = ["# Cold first call of fp8jit's default configs (DeepSeek-V3 shapes, block and tensor)", "",
         "NVRTC phases from NVRTC's `--time` (direct call, runtime options + -I templates); "
         "`fp8jit compile` = NVRTC + post-passes (post-pass = its wall - its NVRTC time - `fp8jit emit`'s wall); "
         "module load = cuModuleLoadData + cuModuleGetFunction on the post-passed cubin (first of three); "
         "C ABI: first fp8jit_gemm call with an empty cache dir (host wall incl. sync, CUDA context already up), "
         "warm call (median of 5), first call of a new runtime on the same cache dir (disk hit).", "",
         "| spec | shape | C ABI cold first call s | its NVRTC s | `fp8jit compile`, fresh process, NVRTC cache off: NVRTC s | "
         "NVRTC direct s: front-end / NVVM opt / ptxas ms | NVRTC-cache hit s (`fp8jit compile` / direct again) | "
         "post-pass est. ms | module load + getfn ms | warm call ms | disk-hit first call ms | disk hit - warm ms |",
         "| --- | --- | ---: | ---: | ---: | --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        ph = r["phases_ms"]
        fe = ph.get("CUDA C++ Frontend")
        opt = ph.get("NVVM Optimizer")
        ptx = ph.get("PTX Translation")
        other = {k: v for k, v in ph.items() if k not in ("CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation")}
        ph_txt = f"{r['nvrtc_direct_s']:.3f}: {fe:.0f} / {opt:.0f} / {ptx:.0f}" if None not in (fe, opt, ptx) else json.dumps(ph)
        if other:
            ph_txt += " (" + ", ".join(f"{k} {v:.0f}" for k, v in other.items()) + ")"
        post = r["post_pass_est_s"]
        nc = r.get("cli_nocache_nvrtc_s")
        L.append(f"| {r['spec']} | {r['shape']} | {r['abi_cold_first_call_s']:.3f} | {r['abi_cold_compile_s']:.3f} | "
                 f"{'-' if nc is None else f'{nc:.3f}'} | {ph_txt} | "
                 f"{r['cli_nvrtc_s'] if r['cli_nvrtc_s'] is not None else '-'} / {r.get('nvrtc_direct_again_s', 0):.3f} | "
                 f"{'-' if post is None else f'{post * 1e3:.0f}'} | "
                 f"{r['module_load_ms'][0]:.2f} + {r['get_function_ms'][0]:.2f} | "
                 f"{r['abi_warm_call_s'] * 1e3:.3f} | {r['abi_disk_first_call_s'] * 1e3:.2f} | "
                 f"{(r['abi_disk_first_call_s'] - r['abi_disk_warm_call_s']) * 1e3:.2f} |")
    with open(out_md, "w", encoding="utf-8") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "run":
        sys.exit(run_harness(sys.argv[2:]))
    if cmd == "summary":
        summary(sys.argv[2], sys.argv[4:], sys.argv[3])
        sys.exit(0)
    if cmd == "cold":
        sys.exit(cold(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6]), sys.argv[7]))
    sys.exit(f"unknown command {cmd}")
PY

only=$(IFS=,; echo "${shapes[*]}")
lists=deepseek-v3,open-models

# ---- prep: the harness without ncu (real times; fills the JIT caches) ---------------------------
do_prep() {
  log "prep: gemm_peers.py --only $only (block; fp8jit, DeepGEMM)"
  timeout -k 5 "${PREP_TIMEOUT_S:-160}" python3 bench/peers/gemm_peers.py --lib "$LIB" --out "$WORK/prep" --lists "$lists" --only "$only" \
    --scales block --providers fp8jit,deepgemm --iters 20 --warmup 3 > "$WORK/prep.log" 2>&1
  log "prep: status $? ($(grep -c '^\[' "$WORK/prep.log") log lines)"
  grep -E "^\| [0-9]" "$WORK/prep/gemm_peers.md" 2>/dev/null | head -20
}

# ---- ncu --------------------------------------------------------------------------------------
source lab/scripts/ncu_common.sh  # ncu_sections, ncu_gmma_metrics, ncu_summary_lines
want=(gpu__time_duration.sum sm__cycles_elapsed.avg.per_second sm__cycles_elapsed.avg sm__cycles_active.avg
  sm__throughput.avg.pct_of_peak_sustained_elapsed
  sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
  smsp__issue_active.avg.per_cycle_active smsp__warps_eligible.avg.per_cycle_active
  smsp__warps_active.avg.per_cycle_active smsp__inst_executed.sum
  lts__t_sector_hit_rate.pct lts__t_sectors.avg.pct_of_peak_sustained_elapsed lts__t_bytes.sum.per_second
  lts__t_sectors_srcunit_tex_op_read.sum lts__t_sectors_srcunit_tex_op_write.sum
  dram__bytes_read.sum dram__bytes_write.sum dram__throughput.avg.pct_of_peak_sustained_elapsed
  launch__grid_size launch__registers_per_thread)
IFS=, read -r -a gm <<< "$ncu_gmma_metrics"
want+=("${gm[@]}")
# The metrics profile.sh has used on these machines: the fallback if this ncu refuses a name.
safe=gpu__time_duration.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second
safe+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
safe+=,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
safe+=,sm__cycles_elapsed.avg.per_second,launch__grid_size,launch__registers_per_thread,$ncu_gmma_metrics

pick_metrics() {
  local known m keep=() dropped=()
  known=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
  for m in "${want[@]}"; do
    if [ -z "$known" ] || [[ $m == launch__* || $m == gpu__* ]] || grep -qx "${m%%.*}" <<< "$known"; then
      keep+=("$m")
    else
      dropped+=("$m")
    fi
  done
  metrics=$(IFS=,; echo "${keep[*]}")
  echo "metrics: $metrics" > "$WORK/metrics.txt"
  echo "dropped (not in ncu --query-metrics): ${dropped[*]:-none}" >> "$WORK/metrics.txt"
  cat "$WORK/metrics.txt"
}

profiled() {  # report -> number of profiled kernels in it
  [ -f "$1" ] || { echo 0; return; }
  ncu -i "$1" --page raw --csv --print-units base 2>/dev/null | awk -F'","' 'NR > 2 && NF > 5' | wc -l
}

ncu_shape() {  # shape
  local s=$1 tag=$1 rep=$WORK/$1.ncu-rep n
  local base=(ncu --clock-control none --cache-control all --target-processes application-only -f
    -k "regex:fp8jit_gemm|fp8_gemm_kernel" "${ncu_sections[@]}" --section LaunchStats --print-units base)
  local list=open-models
  grep -q "^${s//x/,}\b" bench/shapes/deepseek_v3.csv && list=deepseek-v3
  local app=(python3 "$driver" run --lib "$LIB" --out "$WORK/peers_$tag" --lists "$list" --only "$s"
    --scales block --providers fp8jit,deepgemm --iters 1 --warmup 1)
  rm -f "$rep"
  local tl=$(( BUDGET_S - $(elapsed) - 10 ))
  [ "$tl" -gt 240 ] && tl=240
  [ "$tl" -lt 30 ] && tl=30
  timeout -k 5 "$tl" "${base[@]}" --profile-from-start off -c 2 --metrics "$metrics" -o "${rep%.ncu-rep}" "${app[@]}" \
    > "$WORK/$tag.ncu.txt" 2>&1
  n=$(profiled "$rep")
  if [ "$n" -lt 2 ] && grep -q "metric" "$WORK/$tag.ncu.txt" && grep -q "==ERROR==" "$WORK/$tag.ncu.txt"; then
    log "$s: ncu refused a metric; again with profile.sh's list"
    metrics=$safe
    timeout -k 5 "$tl" "${base[@]}" --profile-from-start off -c 2 --metrics "$metrics" -o "${rep%.ncu-rep}" "${app[@]}" \
      > "$WORK/$tag.ncu.txt" 2>&1
    n=$(profiled "$rep")
  fi
  if [ "$n" -lt 2 ] && [ "$(elapsed)" -lt $(( BUDGET_S - 60 )) ]; then
    # Without the profiler range: fp8jit's checked call, DeepGEMM's two checked calls, then the
    # warm-up calls (fp8jit, DeepGEMM): skip 3, take 2.
    log "$s: $n kernels with the profiler range; again by launch count"
    timeout -k 5 "$tl" "${base[@]}" --launch-skip 3 -c 2 --metrics "$metrics" -o "${rep%.ncu-rep}" "${app[@]}" \
      > "$WORK/$tag.ncu.txt" 2>&1
    n=$(profiled "$rep")
  fi
  ncu -i "$rep" --page details --print-units base > "$WORK/$tag.log" 2>&1
  ncu -i "$rep" --page raw --csv --print-units base > "$WORK/$tag.raw.csv" 2>&1
  log "$s: $n kernels profiled ($(grep -E '^  [^ ]' "$WORK/$tag.log" | cut -c1-60 | tr '\n' ';'))"
}

ncu_config() {  # index "M N K SCALE [CONFIG-JSON]": fp8jit alone through `fp8jit gemm --config`
  local i=$1 m n k scale config tag rep tl
  read -r m n k scale config <<< "$2"
  tag=cfg${i}_${m}x${n}x${k}
  rep=$WORK/$tag.ncu-rep
  echo "$scale ${config:-default}" > "$WORK/$tag.label"
  local args=(gemm --m "$m" --n "$n" --k "$k" --scale "$scale" --iters 3)
  [ -n "$config" ] && args+=(--config "$config")
  tl=$(( BUDGET_S - $(elapsed) - 10 ))
  [ "$tl" -gt 180 ] && tl=180
  # The third launch of the kernel (past the checked call), as lab/scripts/profile_configs.sh does.
  timeout -k 5 "$tl" ncu --clock-control none --cache-control all -f -k 'regex:^fp8jit_gemm$' --launch-skip 2 -c 1 \
    "${ncu_sections[@]}" --section LaunchStats --print-units base --metrics "$metrics" -o "${rep%.ncu-rep}" \
    "$CLI" "${args[@]}" > "$WORK/$tag.ncu.txt" 2>&1
  ncu -i "$rep" --page details --print-units base > "$WORK/$tag.log" 2>&1
  ncu -i "$rep" --page raw --csv --print-units base > "$WORK/$tag.raw.csv" 2>&1
  log "$tag ($2): $(profiled "$rep") kernel(s) profiled; $(tail -1 "$WORK/$tag.ncu.txt" | cut -c1-150)"
}

do_cfgncu() {  # CFG_ITEMS: lines "M N K SCALE [CONFIG-JSON]"
  local i=0 item
  [ -n "${metrics:-}" ] || pick_metrics
  while IFS= read -r item; do
    [ -z "$item" ] && continue
    if [ "$(elapsed)" -gt $(( BUDGET_S - 40 )) ]; then log "cfgncu: time budget: '$item' and after not profiled"; break; fi
    ncu_config $((i += 1)) "$item"
    python3 "$driver" summary "$WORK" "$OUT/summary.md" "${shapes[@]}" || true
    cp "$OUT/summary.md" "$WORK/summary.md" 2>/dev/null
    pack
  done <<< "${CFG_ITEMS:-}"
}

do_ncu() {
  pick_metrics
  local done_shapes=()
  for s in "${shapes[@]}"; do
    if [ "$(elapsed)" -gt $(( BUDGET_S - ${NCU_RESERVE_S:-110} )) ]; then
      log "ncu: time budget: $s and the shapes after it not profiled"; break
    fi
    ncu_shape "$s"
    done_shapes+=("$s")
    python3 "$driver" summary "$WORK" "$OUT/summary.md" "${shapes[@]}" || true
    cp "$OUT/summary.md" "$WORK/summary.md" 2>/dev/null
    pack
  done
}

do_cold() {
  mkdir -p "$WORK/cold"
  local left=$(( BUDGET_S - $(elapsed) - 15 ))
  [ -n "${COLD_BUDGET_S:-}" ] && [ "$COLD_BUDGET_S" -lt "$left" ] && left=$COLD_BUDGET_S
  [ "$left" -lt 20 ] && { log "cold: no time left"; return; }
  log "cold: up to $left s"
  PYTHONPATH="$ROOT/bench/peers:${PYTHONPATH:-}" python3 "$driver" cold "$CLI" "$LIB" "$OUT/cold.md" "$WORK" "$left" "$TPL" \
    > "$WORK/cold.log" 2>&1
  log "cold: status $?"
  cp "$OUT/cold.md" "$WORK/cold.md" 2>/dev/null
  rm -rf "$WORK"/cold/fp8jit-cold-*
  rm -f "$WORK"/cold/*.cubin
  cat "$OUT/cold.md" 2>/dev/null
}

# ---- the CLI's own cold first call, and a few configs against the defaults --------------------
do_cli() {
  # `fp8jit gemm --iters 1` with FP8JIT_LOG=3, an empty cache and NVRTC's cache off, then again on
  # the filled cache: a whole process each (context creation, reference and check included).
  local item m n k scale dir t0 t1
  for item in "64 2112 7168 block" "4096 24576 1536 block" "4096 4096 7168 tensor"; do
    read -r m n k scale <<< "$item"
    dir=$(mktemp -d /tmp/fp8jit-cli-cold-XXXX)
    for pass in cold disk-hit; do
      t0=$(date +%s.%N)
      FP8JIT_LOG=3 FP8JIT_CACHE_DIR=$dir CUDA_CACHE_DISABLE=1 "$CLI" gemm --m "$m" --n "$n" --k "$k" --scale "$scale" \
        --iters 1 > "$WORK/cli_${m}x${n}x${k}_${scale}_$pass.log" 2>&1
      t1=$(date +%s.%N)
      echo "cli $m x $n x $k $scale $pass: process wall $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}') s; " \
        "$(grep -E 'compiled in|disk cache|resident|TFLOP' "$WORK/cli_${m}x${n}x${k}_${scale}_$pass.log" | tr '\n' ' ')"
    done
    rm -rf "$dir"
  done | tee "$WORK/cli_cold.txt"
}

do_configs() {
  # The tiles DeepGEMM picks, where fp8jit's config space has them (lab/scripts/configs.sh).
  cat > "$WORK/configs_list.txt" <<'LIST'
128 2112 7168 block
128 2112 7168 block {"block_m":64,"block_n":32,"stages":8}
64 4096 7168 block
64 4096 7168 block {"block_m":64,"block_n":32,"stages":8}
16 1536 2048 block
16 1536 2048 block {"block_m":64,"block_n":16,"stages":8}
4096 32768 512 block
4096 32768 512 block {"block_m":256,"block_n":128,"stages":3}
4096 32768 512 block {"block_m":256,"block_n":128,"stages":3,"cluster_n":2}
4096 32768 512 block {"block_n":128,"stages":5,"cluster_n":2}
LIST
  FP8JIT_CACHE_DIR=/tmp/fp8jit-configs-cache timeout -k 5 120 bash lab/scripts/configs.sh "$WORK/configs_list.txt" "$B" \
    | tee "$WORK/configs.md"
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  > "$WORK/gpu.txt" 2>&1
ncu --version >> "$WORK/gpu.txt" 2>&1
git log -1 --format='commit %h %cd' >> "$WORK/gpu.txt" 2>/dev/null
cat "$WORK/gpu.txt"
case $mode in
  prep) do_prep ;;
  extra) do_cold; pack; do_cli; pack; do_configs ;;
  cfgncu) do_cfgncu ;;
  compare) do_prep; pack; do_ncu; do_cfgncu ;;
  profile) do_prep; pack; do_ncu ;;
  ncu) do_ncu ;;
  cold) do_cold ;;
  all) COLD_BUDGET_S=${COLD_BUDGET_S:-80} do_cold; pack; do_prep; pack; do_ncu ;;
  *) echo "usage: $0 [all|profile|extra|compare|cfgncu|prep|ncu|cold] [MxNxK ...]" >&2; exit 2 ;;
esac
pack
[ -f "$OUT/summary.md" ] && sed -n '1,20p' "$OUT/summary.md"
log "done; $OUT: $(ls "$OUT" | tr '\n' ' ')"
