"""Checks the tuning sweeps of bench/multi_gpu/run.sh from their `fp8jit db export` files: every
shape of the list tuned exactly once in each database, the same shapes in all of them, and every
row naming the card that tuned it; prints the rows per card and how the cards' timings compare.

Usage: check_sweeps.py SHAPES.csv ONE_GPU.json ALL_GPUS.json MERGED.json    Exit 1 on a failed check.
"""
import collections
import csv
import json
import math
import sys


def shapes(path):
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return sorted((int(r["m"]), int(r["n"]), int(r["k"])) for r in rows)


def main():
    want = shapes(sys.argv[1])
    names = ("one GPU", "--all-gpus", "simulated hosts merged")
    docs = {name: json.load(open(p))["rows"] for name, p in zip(names, sys.argv[2:5])}
    ok = True
    for name, rows in docs.items():
        got = sorted((r["m"], r["n"], r["k"]) for r in rows)
        cards = collections.Counter(r["tuned_on"] for r in rows)
        print(f"{name}: {len(rows)} rows for {len(want)} shapes; rows per card: {dict(cards)}")
        if got != want:
            missing, extra = set(want) - set(got), len(got) - len(set(got))
            print(f"  FAIL: not every shape exactly once (missing {sorted(missing)}, {extra} repeated)")
            ok = False
        if "unknown" in cards:
            print("  FAIL: rows that do not name the card that tuned them")
            ok = False
    one = {(r["m"], r["n"], r["k"]): r for r in docs["one GPU"]}
    ratios = [one[key]["best_us"] / r["best_us"] for r in docs["--all-gpus"]
              if (key := (r["m"], r["n"], r["k"])) in one]
    same = sum(one[(r["m"], r["n"], r["k"])]["best_config"] == r["best_config"] for r in docs["--all-gpus"]
               if (r["m"], r["n"], r["k"]) in one)
    if ratios:
        print(f"best_us of one GPU over --all-gpus: geomean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}); the same winner for {same} of {len(ratios)} shapes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
