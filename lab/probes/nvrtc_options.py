#!/usr/bin/env python3
"""Cold NVRTC compile time of fp8jit kernels under extra NVRTC options, against the runtime's own
options: each spec's source (`fp8jit emit`) is compiled to an sm_90a cubin with the product's
options (runtime/jit/nvrtc.cpp: nvrtc_options) and the templates/ headers given to NVRTC by name,
as the runtime embeds them; then again with each option set, the variants interleaved ROUNDS
times so that machine load falls on all alike. Prints the median wall time per spec and variant,
and whether a variant's machine code (the cubin's .text sections, lab/cubin_text.py) is the
base's. Needs no GPU; NVRTC's own cache lives in the driver, so none is in play here, and on a
GPU machine run it with CUDA_CACHE_DISABLE=1.

Usage: python3 lab/probes/nvrtc_options.py [--fp8jit build/fp8jit] [--rounds 3]
           [--variant "NAME=OPT OPT ..."]... SPEC_JSON...
  e.g. --variant "split4=--split-compile=4" --variant "split0=--split-compile=0"
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "lab"))
from cubin_text import text_sections_of  # noqa: E402

# runtime/jit/nvrtc.cpp's nvrtc_options for sm_90a cubins; BASE_OPTIONS="..." replaces them (e.g.
# without --minimal, to time what it saves).
BASE_OPTIONS = os.environ.get("BASE_OPTIONS", "--gpu-architecture=sm_90a -std=c++17 --prec-div=true "
                              "--fmad=false -default-device --minimal -DNDEBUG").split()


def load_nvrtc():
    for name in ("libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.13", "libnvrtc.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("nvrtc_options.py: libnvrtc.so.13 not found (set LD_LIBRARY_PATH)")


def templates_dir():
    """TEMPLATES=DIR: another copy of the headers (an experiment's, whose paths it guards with
    macros that --variant "-DNAME" then turns on), the spec's source still the tree's; None where
    DIR is not such a copy."""
    base = os.environ.get("TEMPLATES") or os.path.join(ROOT, "templates")
    if not os.path.isfile(os.path.join(base, "fp8jit", "gemm", "sm90_fp8_gemm.cuh")):
        return None
    return base


def template_headers(base):
    names, contents = [], []
    for d, _, files in os.walk(base):
        for f in sorted(files):
            path = os.path.join(d, f)
            names.append(os.path.relpath(path, base).encode())
            with open(path, "rb") as fh:
                contents.append(fh.read())
    return names, contents


def compile_once(nvrtc, source, headers, options):
    """(seconds, cubin bytes, log) of one nvrtcCreateProgram + nvrtcCompileProgram + GetCUBIN."""
    names, contents = headers
    prog = ctypes.c_void_p()
    n = len(names)
    t0 = time.perf_counter()
    rc = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"kernel.cu", n,
                                  (ctypes.c_char_p * n)(*contents), (ctypes.c_char_p * n)(*names))
    if rc != 0:
        sys.exit(f"nvrtcCreateProgram failed ({rc})")
    argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    rc = nvrtc.nvrtcCompileProgram(prog, len(options), argv)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    cubin = b""
    if rc == 0:
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetCUBIN(prog, buf)
        cubin = buf.raw
    seconds = time.perf_counter() - t0
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    if rc != 0:
        sys.exit(f"NVRTC failed ({rc}) with {options}:\n{log.value.decode(errors='replace')}")
    return seconds, cubin, log.value.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp8jit", default=os.path.join(ROOT, "build", "fp8jit"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[], help="NAME=OPTION [OPTION...]")
    ap.add_argument("specs", nargs="+")
    a = ap.parse_args()
    if not 1 <= a.rounds <= 999:
        ap.error(f"--rounds {a.rounds}: 1 to 999")
    base = templates_dir()
    if base is None:
        ap.error(f"TEMPLATES={os.environ.get('TEMPLATES', '')[:200]!r}: not a copy of templates/ "
                 "(no fp8jit/gemm/sm90_fp8_gemm.cuh under it)")
    if not os.path.isfile(a.fp8jit):
        ap.error(f"--fp8jit {a.fp8jit}: no such file (build the CLI: cmake --build BUILD --target fp8jit_cli)")
    variants = [("base", [])]
    for v in a.variant:
        name, _, opts = v.partition("=")
        if not name or name in dict(variants) or not opts.split():
            ap.error(f"--variant '{v}': NAME=OPTION [OPTION...], a new name and at least one option")
        variants.append((name, opts.split()))
    sources = {}
    for spec in a.specs:
        r = subprocess.run([a.fp8jit, "emit", "--spec", spec], capture_output=True)
        if r.returncode != 0:
            ap.error(f"spec {spec[:200]!r}: fp8jit emit refused it: {r.stderr.decode(errors='replace').strip()[:400]}")
        sources[spec] = r.stdout
    nvrtc = load_nvrtc()
    headers = template_headers(base)
    print("| spec | " + " | ".join(f"{n} s" for n, _ in variants) + " | same code as base |")
    print("| --- |" + " ---: |" * len(variants) + " --- |")
    medians = {n: [] for n, _ in variants}
    for spec in a.specs:
        source = sources[spec]
        times = {n: [] for n, _ in variants}
        code = {}
        for _ in range(a.rounds):
            for n, extra in variants:
                s, cubin, _ = compile_once(nvrtc, source, headers, BASE_OPTIONS + extra)
                times[n].append(s)
                code.setdefault(n, text_sections_of(cubin, n))
        name = source.split(b"\n", 1)[0].split(b" ")[1].decode()
        same = ", ".join(f"{n}: {'yes' if code[n] == code['base'] else 'NO'}" for n, _ in variants[1:])
        for n, _ in variants:
            medians[n].append(statistics.median(times[n]))
        print(f"| {name} | " + " | ".join(f"{statistics.median(times[n]):.3f}" for n, _ in variants)
              + f" | {same or '-'} |", flush=True)
    print()
    for n, _ in variants:
        xs = medians[n]
        print(f"{n}: {len(xs)} kernels, mean {statistics.mean(xs):.3f} s, median {statistics.median(xs):.3f} s, "
              f"max {max(xs):.3f} s, {sum(x <= 0.5 for x in xs)} within 0.5 s")


if __name__ == "__main__":
    main()
