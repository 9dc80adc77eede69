#!/usr/bin/env python3
"""The K loops of a GEMM cubin in SASS, without a GPU: every backward branch whose body holds a
QGMMA, with its static instruction count split into QGMMA, FFMA, LDS, LDC, barriers (BAR, SYNCS)
and the rest, and the same per K block (QGMMAs / K-steps per block). Works on fp8jit's cubins
(`fp8jit compile --spec SPEC --cubin K.cubin`) and DeepGEMM's (lab/probes/deepgemm_sass.sh), so the
two K loops can be read side by side. Needs cuobjdump on PATH (lab/README.md, "SASS without a
GPU"). Counts are static: where a loop branches (fp8jit's promotion per split of a tile that
straddles two scale blocks) its paths all count, so a K block's executed count is lower.

Usage: python3 lab/probes/k_loop_sass.py [--ksteps 4] [--print] CUBIN...
  --ksteps: QGMMAs per K block and consumer warpgroup (BLOCK_K / 32 for one m64 slab: 4)
  --print: the K loop's instructions (the span marked *: fewest per K block), FFMAs left out
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\s+(0x[0-9a-f]+)")


def functions(cubin):
    """[(name, [(address, instruction)])] of the cubin's functions, from cuobjdump -sass."""
    r = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True)
    if r.returncode != 0:  # not a cubin cuobjdump reads
        print(f"k_loop_sass.py: cuobjdump failed on {cubin[:200]}: {r.stderr.strip()[:400]}", file=sys.stderr)
        sys.exit(2)
    out, name, body = [], None, []
    for line in r.stdout.splitlines():
        if line.strip().startswith("Function :"):
            if body:
                out.append((name, body))
            name, body = line.split(":", 1)[1].strip(), []
            continue
        m = LINE.match(line)
        if m:
            body.append((int(m.group(1), 16), m.group(2)))
    if body:
        out.append((name, body))
    return out


def opcode(text):
    parts = text.split()
    return parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]


def classify(body):
    counts = {"QGMMA": 0, "FFMA": 0, "LDS": 0, "LDC": 0, "barrier": 0, "other": 0}
    for _, text in body:
        op = opcode(text).split(".")[0]
        if op in ("QGMMA", "FFMA", "LDS", "LDC"):
            counts[op] += 1
        elif op in ("BAR", "SYNCS", "WARPGROUP"):
            counts["barrier"] += 1
        else:
            counts["other"] += 1
    return counts


def k_loops(body):
    """(start, end, instructions) of each innermost backward branch's span that holds a QGMMA: one
    that holds no other such span (a tile loop around the K loop holds it; a span that only
    overlaps another, as an unrolled loop's remainder jumping back, counts on its own)."""
    qgmma = [a for a, t in body if opcode(t).startswith("QGMMA")]
    spans = []
    for a, t in body:
        m = BRANCH.search(t)
        if m:
            target = int(m.group(1), 16)
            if target < a and any(target <= q < a for q in qgmma):
                spans.append((target, a))
    inner = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    return [(lo, hi, [(b, u) for b, u in body if lo <= b <= hi]) for lo, hi in sorted(inner)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ksteps", type=int, default=4)
    ap.add_argument("--print", action="store_true")
    ap.add_argument("cubins", nargs="+")
    a = ap.parse_args()
    if not 1 <= a.ksteps <= 64:
        ap.error(f"--ksteps {a.ksteps}: 1 to 64")
    for cubin in a.cubins:
        if not os.path.isfile(cubin):
            ap.error(f"{cubin[:200]!r}: no such file")
    if not shutil.which("cuobjdump"):
        ap.error("no cuobjdump on PATH (lab/README.md, 'SASS without a GPU')")
    for cubin in a.cubins:
        for name, body in functions(cubin):
            loops = k_loops(body)
            if not loops:
                continue
            local = sum(opcode(t).split(".")[0] in ("LDL", "STL") for _, t in body)
            print(f"{cubin}: {name[:90]}: {len(body)} instructions, local memory {local}")
            # The leanest span per K block is the K loop itself; the rest are spans that wrap or
            # overlap it (a remainder of an unrolled loop, a tile loop re-entering it).
            lean = min(loops, key=lambda loop: len(loop[2]) / max(1, classify(loop[2])["QGMMA"]))
            for loop in loops:
                start, end, instrs = loop
                c = classify(instrs)
                blocks = c["QGMMA"] / a.ksteps
                per = ", ".join(f"{k} {v / blocks:.1f}" for k, v in c.items()) if blocks else ""
                mark = "*" if loop is lean else " "
                print(f" {mark}loop {start:#x}-{end:#x}: {len(instrs)} static ({blocks:g} K blocks): "
                      f"{', '.join(f'{k} {v}' for k, v in c.items())}; per K block {per}")
            if a.print:
                for addr, text in lean[2]:
                    if opcode(text).split(".")[0] != "FFMA":
                        print(f"    {addr:05x} {text}")


if __name__ == "__main__":
    main()
