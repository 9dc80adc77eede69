#!/usr/bin/env python3
"""Two runs of bench/peers/gemm_peers.py (a tree and a patched tree, one after the other on one
machine) joined line by line: fp8jit's kernel time in each, their ratio, and the same ratio for
DeepGEMM (the faster of its two versions) and cuBLASLt, whose kernels did not change between the
runs, so their ratios are the comparison's noise floor. Geometric means per list and scale mode.

One run with both builds (gemm_peers.py --lib-base TREE_LIB, the patched library as --lib) is
read the same way from its one CSV: the tree is its fp8jit_base columns, the patch its fp8jit
ones, both timed in each shape's profiling window, so there is no run-to-run noise to show.

Usage: python3 lab/scripts/peers_ab.py TREE.csv PATCH.csv > peers_ab.md
       python3 lab/scripts/peers_ab.py RUN.csv > peers_ab.md      (a run with --lib-base)
"""
import csv
import math
import sys


KEY = ("list", "m", "n", "k", "scale")


def rows(path):
    """The CSV's rows by (list, m, n, k, scale); exits (status 2) naming the file where it cannot
    be read or is not a gemm_peers.csv."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            need = set(KEY) | {"fp8jit_us", "fp8jit_status", "config_fp8jit"}
            if not reader.fieldnames or not need <= set(reader.fieldnames):
                fail(f"{path}: not a gemm_peers.csv (columns {', '.join(sorted(need))} needed)")
            return {tuple(r[c] for c in KEY): r for r in reader}
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        fail(f"{path}: {e}")


def fail(message):
    print(f"peers_ab.py: {message}", file=sys.stderr)
    sys.exit(2)


def us(r, col):
    """A provider's time where its result was checked correct (status ok), else None."""
    status = r.get(col.replace("_us", "_status"))
    if status is not None and status != "ok":
        return None
    try:
        v = float(r.get(col) or "")
    except ValueError:
        return None
    return v if v > 0 else None


def ratio(a, b):
    return a / b if a and b else None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, spec=".3f"):
    return format(x, spec) if x is not None else "-"


def tile(r):
    """The fp8jit kernel's tile and build from its name (gemm_sm90_..._128x96x128_s6_g8_tma)."""
    parts = (r.get("config_fp8jit") or "").split("_")
    for i, p in enumerate(parts):
        if p.count("x") == 2 and p.split("x")[0].isdigit():
            return " ".join([p.rsplit("x", 1)[0]] + parts[i + 1:])
    return r.get("config_fp8jit") or "-"


def baseline_rows(path):
    """A --lib-base run's rows as the tree's: its fp8jit_base columns under fp8jit's names."""
    out = {}
    for k, r in rows(path).items():
        if "fp8jit_base_us" not in r:
            fail(f"{path}: no fp8jit_base columns (a run without --lib-base): give two CSVs")
        t = dict(r)
        for col in ("us", "status", "rel_err"):
            t[f"fp8jit_{col}"] = r[f"fp8jit_base_{col}"]
        t["config_fp8jit"] = r["config_fp8jit_base"]
        out[k] = t
    return out


def main(tree_csv, patch_csv):
    if patch_csv is None:
        tree, patch = baseline_rows(tree_csv), rows(tree_csv)
    else:
        tree, patch = rows(tree_csv), rows(patch_csv)
    if not any(k in patch for k in tree):
        fail("the two runs share no (list, M, N, K, scale) line")
    keys = [k for k in tree if k in patch]
    groups = {}
    lines = ["| list | M | N | K | scale | fp8jit tile (patch) | tree µs | patch µs | tree / patch "
             "| DeepGEMM best run2 / run1 | cuBLASLt run2 / run1 | patch vs best DeepGEMM | patch vs cuBLASLt |",
             "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k in keys:
        t, p = tree[k], patch[k]
        gain = ratio(us(t, "fp8jit_us"), us(p, "fp8jit_us"))
        dg = ratio(us(t, "deepgemm_best_us"), us(p, "deepgemm_best_us"))
        cl = ratio(us(t, "cublaslt_us"), us(p, "cublaslt_us"))
        vs_dg = ratio(us(p, "deepgemm_best_us"), us(p, "fp8jit_us"))
        vs_cl = ratio(us(p, "cublaslt_us"), us(p, "fp8jit_us"))
        vs_dg_tree = ratio(us(t, "deepgemm_best_us"), us(t, "fp8jit_us"))
        vs_cl_tree = ratio(us(t, "cublaslt_us"), us(t, "fp8jit_us"))
        g = groups.setdefault((k[0], k[4]), {x: [] for x in ("gain", "dg", "cl", "vs_dg", "vs_cl", "vs_dg_tree",
                                                                "vs_cl_tree", "changed")})
        for name, v in (("gain", gain), ("dg", dg), ("cl", cl), ("vs_dg", vs_dg), ("vs_cl", vs_cl),
                        ("vs_dg_tree", vs_dg_tree), ("vs_cl_tree", vs_cl_tree)):
            g[name].append(v)
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {tile(p)} | {fmt(us(t, 'fp8jit_us'))} "
                     f"| {fmt(us(p, 'fp8jit_us'))} | {fmt(gain)} | {fmt(dg)} | {fmt(cl)} | {fmt(vs_dg)} | {fmt(vs_cl)} |")
    out = [f"# fp8jit tree ({tree_csv}) against patch ({patch_csv}), kernel times from the profiler",
           "",
           "Ratios: tree / patch (> 1: the patch is faster); the peers' run2 / run1 is the same ratio "
           "for kernels that did not change (the noise floor); 'vs' columns: peer time / fp8jit time.",
           "",
           "| list | scale | lines | fp8jit tree / patch | DeepGEMM best run2/run1 | cuBLASLt run2/run1 "
           "| vs best DeepGEMM tree -> patch | vs cuBLASLt tree -> patch |",
           "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for (lst, scale), g in sorted(groups.items()):
        out.append(f"| {lst} | {scale} | {len(g['gain'])} | {fmt(geomean(g['gain']), '.4f')} "
                   f"| {fmt(geomean(g['dg']), '.4f')} | {fmt(geomean(g['cl']), '.4f')} "
                   f"| {fmt(geomean(g['vs_dg_tree']))} -> {fmt(geomean(g['vs_dg']))} "
                   f"| {fmt(geomean(g['vs_cl_tree']))} -> {fmt(geomean(g['vs_cl']))} |")
    print("\n".join(out + [""] + lines))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
