#!/usr/bin/env python3
"""The tuned rows shipped with fp8jit against its heuristic, in one process: two fp8jit runtimes
(fp8jit_runtime_options.shipped_tuning_dir set to the rows' folder, and to none), neither with a
tuning database, on the same inputs; each call checked against the float64 reference after a
poisoned output, then both timed back to back in one profiler session as the peer benchmark times
(kernel durations from CUPTI, L2 flushed before each call, warm-up, median). Large kernels move
by 10-25 % between calls of the device tool (docs/performance.md, open question 0a), so a gain
measured in two processes is not one.

Usage (repository root, on a Hopper GPU):
  python3 bench/peers/shipped_gain.py --lib build-gpu/libfp8jit.so --out DIR
      [--lists deepseek-v3-other-m] [--rows share/fp8jit/tuning] [--scales block,tensor,tensor-fast]
      [--iters 20] [--warmup 5] [--seed 1234] [--cache-dir /tmp/fp8jit-shipped-gain-cache]
Writes DIR/shipped_gain.{md,json}. Ratio = heuristic time / shipped-row time (> 1: the rows win).
Exit status: 0 every call checked, 1 set-up failed, 2 a result flagged.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import fp8jit_ctypes as fj  # noqa: E402
import peers_core as pc  # noqa: E402
from peer_util import log, short_error  # noqa: E402

VARIANTS = ("shipped", "heuristic")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for shipped_gain.{md,json}")
    p.add_argument("--lib", default=None, help="libfp8jit.so (default: build-peers/, build-gpu/ ... under the repo)")
    p.add_argument("--lists", default="deepseek-v3-other-m", help="shape lists: names in bench/shapes or CSV paths")
    p.add_argument("--rows", default=os.path.join(ROOT, "share", "fp8jit", "tuning"),
                   help="the folder of shipped rows (fp8jit db export documents)")
    p.add_argument("--scales", default="block,tensor", help="block,tensor,tensor-fast")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--flush-mib", type=int, default=256)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--cache-dir", default="/tmp/fp8jit-shipped-gain-cache",
                   help="the kernels' disk cache, shared by both runtimes (\"\": none)")
    a = p.parse_args(argv)
    try:
        a.scale_list = pc.parse_choice_list(a.scales, pc.SCALES, "--scales")
        a.list_paths = [pc.resolve_shape_list(x) for x in a.lists.split(",") if x.strip()]
        if not a.list_paths:
            raise pc.InputError("--lists: no list named")
        if a.iters < 1 or a.warmup < 0 or a.flush_mib < 1:
            raise pc.InputError(f"--iters {a.iters}, --warmup {a.warmup}, --flush-mib {a.flush_mib}: "
                                "at least 1, 0 and 1")
        if not os.path.isdir(a.rows):
            raise pc.InputError(f"--rows {a.rows}: not a folder")
        if a.lib is not None and not os.path.isfile(a.lib):
            raise pc.InputError(f"--lib {a.lib}: no such file (cmake --build BUILD --target fp8jit_shared)")
    except pc.InputError as e:
        p.error(str(e))
    return a


def summarize_ab(rows):
    """Per list and scale: the geomean ratio over every row where both variants ran and passed,
    and over the rows whose kernels differ (where the rows act; elsewhere the ratio is noise),
    with the worst and best of those."""
    out = {}
    for r in rows:
        s = out.setdefault(r["list"], {}).setdefault(
            r["scale"], {"rows": 0, "all": [], "changed": [], "flagged": 0})
        s["rows"] += 1
        v = [r["variants"].get(x, {}) for x in VARIANTS]
        if any(x.get("status") != "ok" or not x.get("us") for x in v):
            s["flagged"] += 1
            continue
        ratio = v[1]["us"] / v[0]["us"]
        s["all"].append(ratio)
        if v[0].get("config") != v[1].get("config"):
            s["changed"].append((ratio, f"{r['m']}x{r['n']}x{r['k']}"))
    for per_scale in out.values():
        for s in per_scale.values():
            ch = s.pop("changed")
            s["all"] = {"geomean": pc.geomean(s["all"]), "shapes": len(s["all"])}
            s["changed"] = {"geomean": pc.geomean([x for x, _ in ch]), "shapes": len(ch),
                            "worst": min(ch) if ch else None, "best": max(ch) if ch else None}
    return out


def markdown_ab(meta_lines, rows, summary):
    out = ["# Shipped tuning rows against the heuristic (fp8jit, one process)", ""]
    out += [f"{x}  " for x in meta_lines] + [""]
    out += ["| list | scale | rows | gain, all rows | rows with another kernel | their gain | worst | best | flagged |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for lst, per_scale in summary.items():
        for scale, s in per_scale.items():
            c = s["changed"]
            out.append(f"| {lst} | {scale} | {s['rows']} | {pc._fmt(s['all']['geomean'], '.3f')} | {c['shapes']} | "
                       f"{pc._fmt(c['geomean'], '.3f')} | "
                       + " | ".join(f"{x[0]:.3f} at {x[1]}" if x else "-" for x in (c["worst"], c["best"]))
                       + f" | {s['flagged']} |")
    out += ["", "| list | M | N | K | scale | shipped µs | heuristic µs | heuristic / shipped | shipped kernel | "
            "heuristic kernel |", "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        v = [r["variants"].get(x, {}) for x in VARIANTS]
        us = [f"{x['us']:.1f}" if x.get("us") else x.get("status", "") for x in v]
        ratio = f"{v[1]['us'] / v[0]['us']:.3f}" if all(x.get("us") for x in v) else ""
        out.append(f"| {r['list']} | {r['m']} | {r['n']} | {r['k']} | {r['scale']} | {us[0]} | {us[1]} | {ratio} | "
                   f"{v[0].get('config', '')} | {v[1].get('config', '')} |")
    return "\n".join(out) + "\n"


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    a = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("shipped_gain.py: needs torch with CUDA (the GPU machine has it)", file=sys.stderr)
        return 1
    import gemm_peers as gp
    if not torch.cuda.is_available():
        print("shipped_gain.py: no CUDA GPU visible to torch", file=sys.stderr)
        return 1
    _ = torch.zeros(1, device="cuda")  # torch's context first: fp8jit uses the current one
    lib_path = a.lib or fj.find_library(ROOT) or "build-peers/libfp8jit.so"
    variants = {}
    try:
        for name, rows_dir in zip(VARIANTS, (a.rows, "")):
            lib = fj.Fp8jit(lib_path, cache_dir=a.cache_dir, shipped_tuning=rows_dir)
            variants[name] = gp.Fp8jitProvider(torch, lib_path, lib=lib)
    except fj.Fp8jitError as e:
        print(f"shipped_gain.py: {e}", file=sys.stderr)
        return 1
    props = torch.cuda.get_device_properties(0)
    meta_lines = [f"GPU: {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}; "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
                  f"fp8jit {variants['shipped'].lib.version} ({lib_path}, commit {gp.git_commit()}); rows from {a.rows}",
                  f"{a.iters} timed calls (median) after {a.warmup} warm-up calls; L2 flush {a.flush_mib} MiB; "
                  f"seed {a.seed}"]
    timer = gp.Timer(torch, a.flush_mib)
    rows = []
    ga = argparse.Namespace(seed=a.seed, scale_list=a.scale_list, warmup=a.warmup, iters=a.iters)
    for path in a.list_paths:
        lst = pc.list_name(path)
        for shape in pc.read_shapes(path):
            t = time.time()
            try:
                got = gp.run_shape(torch, ga, shape, lst, variants, timer)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory: reported, the run goes on
                log(f"  {shape}: {short_error(e, 400)}")
                torch.cuda.synchronize()
                got = [{"list": lst, "m": shape.m, "n": shape.n, "k": shape.k, "scale": s,
                        "providers": {v: {"status": "error", "note": short_error(e)} for v in VARIANTS}}
                       for s in a.scale_list]
            for r in got:
                r["variants"] = r.pop("providers")
            rows += got
            torch.cuda.empty_cache()
            log(f"  {shape} ({time.time() - t:.1f} s) " + " | ".join(
                f"{r['scale']}: " + " ".join(f"{v}={pc.cell_time(r['variants'][v])}" for v in VARIANTS) for r in got))
    summary = summarize_ab(rows)
    os.makedirs(a.out, exist_ok=True)  # only now: a run that fails before leaves nothing behind
    base = os.path.join(a.out, "shipped_gain")
    write_atomic(base + ".json", json.dumps({"meta": meta_lines, "summary": summary, "rows": rows}, indent=1))
    write_atomic(base + ".md", markdown_ab(meta_lines, rows, summary))
    log(f"report: {base}.{{md,json}}")
    flagged = sum(s["flagged"] for per in summary.values() for s in per.values())
    for lst, per in summary.items():
        for scale, s in per.items():
            print(f"{lst} {scale}: gain {pc._fmt(s['all']['geomean'], '.3f')} over {s['all']['shapes']} rows, "
                  f"{pc._fmt(s['changed']['geomean'], '.3f')} over the {s['changed']['shapes']} with another kernel")
    return 0 if flagged == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
