#!/usr/bin/env python3
"""Joins lab/scripts/training_ab.sh's FFN runs: for each width and recipe, the tree's and the
patched build's step time (ms, CUDA-event median) and their ratio, then each build's GEMMs in
launch order (µs, one profiled step). The bf16 step of each run shows the drift between them.

Usage: python3 lab/scripts/training_ab_join.py OUT_DIR   (reads OUT_DIR/ffn_{tree,patch}_D.json)
"""
import glob
import json
import os
import re
import sys


def load(out_dir):
    """{(variant, d): row} from the run files; a missing or unreadable file is left out."""
    rows = {}
    for path in glob.glob(os.path.join(out_dir, "ffn_*_*.json")):
        m = re.fullmatch(r"ffn_(tree|patch)_(\d+)\.json", os.path.basename(path))
        if not m:
            continue
        try:
            with open(path) as f:
                for row in json.load(f)["rows"]:
                    rows[(m.group(1), row["d"])] = row
        except (OSError, ValueError, KeyError) as e:
            print(f"training_ab_join.py: {path}: {e}", file=sys.stderr)
    return rows


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    rows = load(argv[1])
    widths = sorted({d for _, d in rows})
    print("| d | recipe | tree ms | patch ms | tree / patch | bf16 ms tree / patch |")
    print("| --- | --- | --- | --- | --- | --- |")
    for d in widths:
        tree, patch = rows.get(("tree", d), {}), rows.get(("patch", d), {})
        recipes = [k[len("fp8jit_"):-len("_ms")] for k in tree if k.startswith("fp8jit_") and k.endswith("_ms")]
        for r in recipes:
            t, p = tree.get(f"fp8jit_{r}_ms"), patch.get(f"fp8jit_{r}_ms")
            ratio = f"{t / p:.3f}x" if t and p else "-"
            fmt = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
            print(f"| {d} | {r} | {fmt(t)} | {fmt(p)} | {ratio} | {fmt(tree.get('bf16_ms'))} / "
                  f"{fmt(patch.get('bf16_ms'))} |")
    print()
    for d in widths:
        for variant in ("tree", "patch"):
            row = rows.get((variant, d), {})
            for key, split in row.items():
                if key.endswith("_split_us"):
                    each = ", ".join(f"{us:.0f}" for us in split.get("gemm_each", []))
                    print(f"d={d} {variant} {key[len('fp8jit_'):-len('_split_us')]}: casts {split['casts']:.0f}, "
                          f"GEMMs {split['gemms']:.0f} ({each}), rest {split['rest']:.0f} µs")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
