#!/usr/bin/env python3
"""Compares fp8jit's GPU FP8 bytes with PyTorch's conversion of the same scaled values.

Input: the dump written by QuantizeGpuTorchDump (1x128 groups, power-of-two scales, so 1/scale is
exact and torch can form bit-identical scaled values). PyTorch's float8 casts do not saturate
(e4m3fn gives NaN above 448), so values are clamped to the format's max first, which is what
cvt.rn.satfinite does; NaN stays NaN.
"""
import sys
import numpy as np
import torch

M, K = 513, 1000
FMAX = {"e4m3": 448.0, "e5m2": 57344.0}
DT = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}

def check(dump_dir, fmt):
    x = torch.from_numpy(np.fromfile(f"{dump_dir}/{fmt}.x.f32", dtype=np.float32).reshape(M, K))
    q = torch.from_numpy(np.fromfile(f"{dump_dir}/{fmt}.q.u8", dtype=np.uint8).reshape(M, K))
    s = torch.from_numpy(np.fromfile(f"{dump_dir}/{fmt}.s.f32", dtype=np.float32))
    groups = (K + 127) // 128
    s = s[: M * groups].reshape(M, groups).repeat_interleave(128, dim=1)[:, :K]
    inv = 1.0 / s  # exact for powers of two
    scaled = (x * inv).clamp(-FMAX[fmt], FMAX[fmt])  # clamp keeps NaN
    ref = scaled.to(DT[fmt]).view(torch.uint8)
    nan = torch.isnan(scaled)
    # torch may keep the sign of NaN; the GPU's canonical NaN is 0x7F. Compare NaN-ness there.
    ok_nan = ((q[nan] & 0x7F) == 0x7F).all().item()
    diff = (ref[~nan] != q[~nan]).sum().item()
    print(f"torch check {fmt}: {M}x{K}, {int(nan.sum())} NaN inputs, {diff} differing FP8 bytes, NaN codes ok: {ok_nan}")
    return diff == 0 and ok_nan

if __name__ == "__main__":
    d = sys.argv[1]
    ok = all([check(d, f) for f in ("e4m3", "e5m2")])
    sys.exit(0 if ok else 1)
