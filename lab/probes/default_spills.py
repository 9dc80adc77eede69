"""Local memory in the heuristic's GEMM defaults, without a GPU: every distinct default spec of a
shape grid (select-gemm), per scale mode, bias, accumulation and output, compiled by the CLI and
its SASS searched for LDL/STL (cuobjdump on PATH: NVIDIA's PyPI wheels, lab/README "SASS without
a GPU"). Prints each default that spills, with a shape that takes it.

Usage: python3 lab/probes/default_spills.py build/fp8jit [--jobs 2] [--templates DIR]
  --templates DIR: compile with NVRTC from DIR, a changed copy of templates/ (the spec's source from
  the CLI's emit, the runtime's NVRTC options, no post-passes), to see a template change's spills
  before the CLI is rebuilt.
"""
import argparse
import concurrent.futures as cf
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

MS = [1, 16, 64, 128, 512, 1024, 2048, 4096, 8192, 16384]
NKS = [1024, 2048, 4096, 5120, 7168, 8192, 14336, 16384, 28672, 32768]
MODES = [("block", False, False), ("block", True, False), ("tensor", False, False), ("tensor", True, False),
         ("tensor", False, True), ("tensor", True, True), ("rowwise", False, False), ("rowwise", True, False),
         ("rowwise", False, True), ("rowwise", True, True)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cli")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--outs", default="bf16,fp32")
    p.add_argument("--templates", help="a changed copy of templates/ to compile from (NVRTC, no post-passes)")
    a = p.parse_args()
    # Arguments first, so that a wrong one is refused on any machine (with cuobjdump or not).
    if a.templates is not None and not os.path.isfile(os.path.join(a.templates, "fp8jit", "gemm", "sm90_fp8_gemm.cuh")):
        p.error(f"--templates {a.templates[:200]!r}: not a copy of templates/ (no fp8jit/gemm/sm90_fp8_gemm.cuh)")
    if not os.access(a.cli, os.X_OK):
        p.error(f"cli: {a.cli[:200]!r} is not an executable fp8jit CLI")
    if shutil.which("cuobjdump") is None:
        p.error("cuobjdump is not on PATH (NVIDIA's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels)")
    nvrtc = headers = None
    if a.templates is not None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import nvrtc_options
        nvrtc, headers = nvrtc_options.load_nvrtc(), nvrtc_options.template_headers(a.templates)
    queries = []
    for (scale, bias, fast), out, m, n, k in itertools.product(MODES, a.outs.split(","), MS, NKS, NKS):
        q = [a.cli, "select-gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--scale", scale, "--out", out]
        queries.append(q + (["--bias"] if bias else []) + (["--fast-accum"] if fast else []))

    def select(q):
        return q, subprocess.run(q, capture_output=True, text=True).stdout.strip()

    distinct = {}
    with cf.ThreadPoolExecutor(4 * a.jobs) as ex:
        for q, out in ex.map(select, queries):
            if out:
                distinct.setdefault(json.dumps(json.loads(out), sort_keys=True), q)
    print(f"{len(distinct)} distinct defaults", flush=True)

    def local_accesses(spec):
        with tempfile.TemporaryDirectory() as tmp:
            cubin = os.path.join(tmp, "k.cubin")
            if nvrtc is None:
                r = subprocess.run([a.cli, "compile", "--spec", spec, "--cubin", cubin], capture_output=True, text=True)
                if r.returncode:
                    return spec, f"compile failed: {r.stderr.strip()[-200:]}"
            else:
                src = subprocess.run([a.cli, "emit", "--spec", spec], capture_output=True).stdout
                _, binary, log = nvrtc_options.compile_once(nvrtc, src, headers, nvrtc_options.BASE_OPTIONS)
                if not binary:
                    return spec, f"compile failed: {log[-200:]}"
                with open(cubin, "wb") as f:
                    f.write(binary)
            sass = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True, check=True).stdout
        return spec, sum(1 for line in sass.splitlines() if "LDL" in line or "STL" in line)

    spills = 0
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for spec, n in ex.map(local_accesses, distinct):
            if n:
                spills += 1
                s = json.loads(spec)
                c, pr = s["config"], s["problem"]
                print(f"{n} local loads/stores: {pr['scale']} bias={pr['bias']} {pr['accum']} {pr['out']} "
                      f"{c['block_m']}x{c['block_n']} s{c['stages']} {c.get('epilogue', 'any')}; e.g. "
                      + " ".join(distinct[spec][3:8]), flush=True)
    print(f"{spills} of {len(distinct)} defaults use local memory")


if __name__ == "__main__":
    main()
