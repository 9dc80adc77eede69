#!/usr/bin/env python3
"""Lays out the Hugging Face Hub kernel that transformers 5's fine-grained FP8 path loads
(kernels-community/finegrained-fp8, version 4: Triton, no build step) for the GPU machine, which
reaches no Hub; from a local git mirror, standard library only.

  python3 bench/peers/setup_hf_finegrained_fp8.py [--dest .carry/hf-kernels] [--repo GIT_DIR]

DEST/finegrained_fp8 is the package of finegrained-fp8/torch-ext at COMMIT, plus the `_ops.py`
that the Hub's build adds (the namespace its torch.library ops register under);
python/examples/hf_fp8_client.py --hub-kernel DEST imports it when transformers cannot fetch it.
Replaced whole, through a temporary directory.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from setup_deepgemm2 import MIRRORS, ROOT, dir_size, extract, lay_out, write_commits  # noqa: E402

# The last commit of finegrained-fp8/ in the mirror; build.toml there says version 4, the version
# transformers 5.17 asks the Hub for.
COMMIT = "1994f2b5518dabf3a305c785ab05ac25fb28ddda"

OPS = '''import torch

# What the Hub's build generates for a Triton-only kernel: one torch.library namespace.
_NAMESPACE = "_finegrained_fp8_local"
ops = getattr(torch.ops, _NAMESPACE)


def add_op_namespace_prefix(op_name: str) -> str:
    return f"{_NAMESPACE}::{op_name}"
'''


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", default=os.path.join(ROOT, ".carry", "hf-kernels"))
    p.add_argument("--repo", default=os.path.join(MIRRORS, "huggingface+kernels-community", "repo"))
    a = p.parse_args(argv)
    dest = os.path.abspath(a.dest)

    def fill(tmp):
        extract(a.repo, f"{COMMIT}:finegrained-fp8/torch-ext/finegrained_fp8", os.path.join(tmp, "finegrained_fp8"))
        with open(os.path.join(tmp, "finegrained_fp8", "_ops.py"), "w", encoding="utf-8") as f:
            f.write(OPS)
        write_commits(tmp, FINEGRAINED_FP8_COMMIT=COMMIT)

    try:
        lay_out(dest, ".hf-kernels.", fill)
    except subprocess.CalledProcessError:
        print(f"{a.repo}: no commit {COMMIT[:7]} of finegrained-fp8/ there; fetch github:huggingface/kernels-community "
              "(the search tool's fetch) or name its git directory with --repo; nothing written", file=sys.stderr)
        return 1
    print(f"{dest}: kernels-community/finegrained-fp8 {COMMIT[:7]} (version 4); {dir_size(dest) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
