#!/usr/bin/env python3
"""NVRTC time the row-major scale copy (fp8jit_gemm_scale_columns) adds to a block-scaled GEMM
module: each spec's emitted source compiled with and without that entry, interleaved ROUNDS
times, the median of each. Needs no GPU; run from the repo root after building build/fp8jit.

Usage: python3 lab/probes/scale_columns_compile_cost.py [ROUNDS]
"""
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import nvrtc_options as n  # noqa: E402

PROBLEM = ('"family":"gemm","problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,'
           '"out":"bf16","scale":"block"}')
CONFIGS = ['{"block_m":64,"block_n":32,"cluster_m":1,"cluster_n":1,"group_m":8,"stages":16}',
           '{"block_m":128,"block_n":128,"cluster_m":1,"cluster_n":1,"group_m":8,"stages":5}']
ENTRY = '\nextern "C" __global__ void __launch_bounds__(256) fp8jit_gemm_scale_columns'


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and not (sys.argv[1].isdigit() and 1 <= int(sys.argv[1]) <= 100)):
        sys.exit(f"usage: {sys.argv[0]} [ROUNDS, 1 to 100; default 5]")
    rounds = int(sys.argv[1]) if len(sys.argv) == 2 else 5
    nvrtc, headers = n.load_nvrtc(), n.template_headers()
    for config in CONFIGS:
        spec = '{"config":' + config + ',' + PROBLEM + '}'
        src = subprocess.run(["./build/fp8jit", "emit", "--spec", spec], capture_output=True, text=True,
                             check=True).stdout
        variants = {"with": src, "without": src[:src.index(ENTRY)] + "\n"}
        times = {k: [] for k in variants}
        for _ in range(rounds):
            for name, text in variants.items():
                times[name].append(n.compile_once(nvrtc, text.encode(), headers, n.BASE_OPTIONS)[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{config}: with {med['with']:.3f} s, without {med['without']:.3f} s, "
              f"+{1000 * (med['with'] - med['without']):.0f} ms")


if __name__ == "__main__":
    main()
