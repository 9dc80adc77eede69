#!/usr/bin/env python3
"""Whether two cubins hold the same machine code: their .text sections (one per kernel and
device function) byte for byte, read from the ELF section table. Line tables, the embedded
source's hash and other metadata may differ. For machines without cuobjdump (the development
machine has NVRTC but not the toolkit's binary utilities).

Usage: python3 lab/cubin_text.py A.cubin B.cubin
Exit status 0: the same code, 1: different code, 2: a file missing or not a cubin.
"""
import struct
import sys


class NotACubin(ValueError):
    """The bytes are not a 64-bit little-endian ELF file with a readable section table."""


def text_sections_of(b, what="the data"):
    """{section name: bytes} of every .text section of a cubin's bytes."""
    try:
        if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
            raise NotACubin(f"{what}: not a 64-bit little-endian ELF file")
        shoff = struct.unpack_from("<Q", b, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
        hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
        names = hdrs[shstrndx][4]

        def name(off):
            return b[names + off:b.index(b"\0", names + off)].decode()

        return {name(h[0]): b[h[4]:h[4] + h[5]] for h in hdrs if name(h[0]).startswith(".text")}
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, NotACubin):
            raise
        raise NotACubin(f"{what}: its ELF section table cannot be read ({e})") from e


def text_sections(path):
    with open(path, "rb") as f:
        return text_sections_of(f.read(), path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        same = text_sections(sys.argv[1]) == text_sections(sys.argv[2])
    except (OSError, NotACubin) as e:
        print(f"cubin_text.py: {e}", file=sys.stderr)
        sys.exit(2)
    sys.exit(0 if same else 1)
