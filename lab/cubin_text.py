#!/usr/bin/env python3
"""Whether two cubins hold the same machine code: their .text sections (one per kernel and
device function) byte for byte, read from the ELF section table. Line tables, the embedded
source's hash and other metadata may differ. For machines without cuobjdump (the development
machine has NVRTC but not the toolkit's binary utilities).

Usage: python3 lab/cubin_text.py A.cubin B.cubin   (exit status 0: same code, 1: different)
"""
import struct
import sys


def text_sections(path):
    with open(path, "rb") as f:
        b = f.read()
    if b[:4] != b"\x7fELF" or b[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF file")
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = hdrs[shstrndx][4]

    def name(off):
        return b[names + off:b.index(b"\0", names + off)].decode()

    return {name(h[0]): b[h[4]:h[4] + h[5]] for h in hdrs if name(h[0]).startswith(".text")}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(0 if text_sections(sys.argv[1]) == text_sections(sys.argv[2]) else 1)
