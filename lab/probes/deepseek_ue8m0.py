"""How DeepSeek-V3's act_quant (inference/kernel.py, Triton) rounds a scale to ue8m0 on this GPU:
the PTX its log2/exp2/ceil lower to, and the groups where 2^ceil(log2(s)) computed exactly (from
its own unrounded s) differs from its ue8m0 scale.
Usage (repo root, GPU machine): python3 lab/probes/deepseek_ue8m0.py [.carry/deepseek-v3/inference]"""
import re
import sys

import torch

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".carry/deepseek-v3/inference")
import kernel  # noqa: E402

torch.manual_seed(0)
x = torch.randn(64, 7168, device="cuda")
_, s = kernel.act_quant(x)
_, s8 = kernel.act_quant(x, scale_fmt="ue8m0")
exact = torch.exp2(torch.ceil(torch.log2(s.double()))).float()
bad = (exact != s8).nonzero().tolist()
print(f"{len(bad)} of {s.numel()} ue8m0 scales differ from 2^ceil(log2(s)) in float64")
amax = x.view(64, 56, 128).abs().amax(-1)
for i, j in bad[:12]:
    v = s[i, j].item()
    print(f"  [{i},{j}] amax {amax[i, j].item():.9g} s {v:.9g} ({s[i, j].view(torch.int32).item():#010x}) "
          f"log2 {torch.log2(s[i, j].double()).item():.9f} kernel.py {s8[i, j].item():g} exact {exact[i, j].item():g}")
# The launch returns the compiled kernel (Triton 3): its PTX shows what log2/exp2/ceil became.
y = torch.empty_like(x, dtype=torch.float8_e4m3fn)
handle = kernel.act_quant_kernel[(x.numel() // 128,)](x, y, torch.empty_like(s), BLOCK_SIZE=128, scale_fmt="ue8m0")
ptx = handle.asm.get("ptx", "") if hasattr(handle, "asm") else ""
print("PTX lines with lg2/ex2/cvt.rpi/div/rcp/call:" if ptx else f"no PTX from {type(handle)}")
for line in ptx.splitlines():
    if re.search(r"lg2|ex2|cvt\.rpi|div\.|rcp\.|call", line):
        print("   ", line.strip())
