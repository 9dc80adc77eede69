#!/usr/bin/env python3
"""Lays out DeepGEMM v1 (the first DeepGEMM peer: 8dfa329, its last pure-Python JIT) for the GPU
machine, from local git mirrors; standard library only, no GPU, no network.

  python3 bench/peers/setup_deepgemm1.py [--dest .carry/deepgemm] [--deepgemm GIT_DIR] [--cutlass GIT_DIR]

DeepGEMM at 8dfa329 (git archive) with, in deep_gemm/include/{cute,cutlass}, the headers of
CUTLASS eefa171's include/ that deep_gemm/include reaches (the #include closure, as
setup_deepgemm2.py takes it): the JIT compiles with -I deep_gemm/include and nvcc. Nothing to
build: import deep_gemm from DEST (bench/peers/deepgemm_peers.py does). Replaced whole, through a
temporary directory.
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from setup_deepgemm2 import (MIRRORS, ROOT, copy_headers, dir_size, extract, include_closure, lay_out,  # noqa: E402
                             write_commits)

DEEPGEMM_COMMIT = "8dfa3298274bfe6b242f6f8a3e6f3eff2707dd9f"
CUTLASS_COMMIT = "eefa171318b79cbe2e78514d4cce5cd0fe919d0c"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", default=os.path.join(ROOT, ".carry", "deepgemm"))
    p.add_argument("--deepgemm", default=os.path.join(MIRRORS, "deepseek-ai+DeepGEMM", "repo"))
    p.add_argument("--cutlass", default=os.path.join(MIRRORS, "NVIDIA+cutlass", "repo"))
    a = p.parse_args(argv)
    dest = os.path.abspath(a.dest)

    def fill(tmp):
        extract(a.deepgemm, DEEPGEMM_COMMIT, tmp)
        cutlass_tmp = os.path.join(tmp, ".cutlass-include")
        extract(a.cutlass, f"{CUTLASS_COMMIT}:include", cutlass_tmp)
        inc = os.path.join(tmp, "deep_gemm", "include")
        files = include_closure(cutlass_tmp, [inc])
        copy_headers(cutlass_tmp, files, inc)
        shutil.rmtree(cutlass_tmp)
        write_commits(tmp, DEEPGEMM_COMMIT=DEEPGEMM_COMMIT, CUTLASS_COMMIT=CUTLASS_COMMIT)
        with open(os.path.join(tmp, "LAYOUT.txt"), "w", encoding="utf-8") as f:
            f.write(f"DeepGEMM v1 ({DEEPGEMM_COMMIT}), laid out by bench/peers/setup_deepgemm1.py; "
                    f"deep_gemm/include/{{cute,cutlass}}: {len(files)} headers of CUTLASS {CUTLASS_COMMIT} "
                    "include/ (the #include closure of deep_gemm/include).\n")
        return files

    files = lay_out(dest, ".deepgemm1.", fill)
    print(f"{dest}: DeepGEMM v1 {DEEPGEMM_COMMIT[:7]}, CUTLASS {CUTLASS_COMMIT[:7]} ({len(files)} headers); "
          f"{dir_size(dest) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
