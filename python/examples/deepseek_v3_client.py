"""fp8jit inside DeepSeek-V3's own inference code (inference/model.py): a small model with FP8
weights (128x128 scales, made from random bf16 weights with fp8jit's quantize) runs a prefill
and a decode step with kernel.py's Triton kernels, with fp8jit.deepseek in their place, and
with kernel.py's act_quant but fp8jit's GEMM and dequantize (which separates the quantizer's
last-bit differences from the GEMM's summation order). Prints the time per forward of each and
how far their outputs agree, block by block and at the logits, and the greedy tokens.

A random-weight MoE model amplifies tiny differences (a different expert chosen for one token
changes that token's output entirely), so agreement is checked where it is exact (each kernel:
python/tests/test_gpu_clients.py) and followed here layer by layer.

Usage (GPU machine, DeepSeek-V3's inference/ laid out as lab/README.md says):
    PYTHONPATH=build-py/python python3 python/examples/deepseek_v3_client.py [--inference DIR]
"""

import argparse
import importlib.util
import os
import sys
import types

import torch

import fp8jit
import fp8jit.deepseek


def load(path: str, name: str, kernel_module) -> types.ModuleType:
    """inference/model.py as module `name`, its `from kernel import ...` served by kernel_module."""
    sys.modules["kernel"] = kernel_module
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, "model.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.gemm_impl = "fp8"  # act_quant + fp8_gemm for every FP8 linear layer
    return mod


def init_weights(model, mod) -> None:
    """Random bf16 weights; FP8 ones quantized by fp8jit per 128x128 block (as checkpoints are)."""
    for m in model.modules():
        if isinstance(m, mod.Linear) and m.weight.dtype == torch.float8_e4m3fn:
            w = torch.randn(m.weight.shape, dtype=torch.bfloat16) * 0.02
            q, s = fp8jit.quantize(w, granularity="128x128")
            m.weight.data.copy_(q)
            m.scale.data.copy_(s)
    for name, p in model.named_parameters():
        if p.dtype in (torch.bfloat16, torch.float32) and not name.endswith("scale"):
            if "norm" in name:
                p.data.fill_(1.0)
            else:
                p.data.normal_(0.0, 0.02)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def run(model, tokens: torch.Tensor, iters: int):
    """Logits of a prefill and of one decode step, the block outputs of each, and their times."""
    outputs = []
    hooks = [blk.register_forward_hook(lambda _m, _i, o: outputs.append(o.detach().clone())) for blk in model.layers]
    prefill = model(tokens, 0)
    nxt = prefill.argmax(-1, keepdim=True)
    decode = model(nxt, tokens.size(1))
    for h in hooks:
        h.remove()
    times = []
    for step in ("prefill", "decode"):
        args = (tokens, 0) if step == "prefill" else (nxt, tokens.size(1))
        for _ in range(2):
            model(*args)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            model(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return prefill, decode, nxt, outputs, times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--inference", default=os.path.join(here, "..", "..", ".carry", "deepseek-v3", "inference"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prefill", type=int, default=64)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.inference, "kernel.py")):
        print(f"no DeepSeek-V3 inference/ at {a.inference} (lab/README.md says how to lay it out)", file=sys.stderr)
        return 2
    torch.set_default_dtype(torch.bfloat16)
    torch.set_default_device("cuda")
    spec = importlib.util.spec_from_file_location("deepseek_kernel", os.path.join(a.inference, "kernel.py"))
    triton_kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(triton_kernel)
    hybrid = types.SimpleNamespace(act_quant=triton_kernel.act_quant, weight_dequant=fp8jit.deepseek.weight_dequant,
                                   fp8_gemm=fp8jit.deepseek.fp8_gemm)
    variants = {"kernel.py (Triton)": triton_kernel, "fp8jit.deepseek": fp8jit.deepseek,
                "kernel.py act_quant + fp8jit GEMM": hybrid}
    mods = {name: load(a.inference, f"ds_model_{i}", k) for i, (name, k) in enumerate(variants.items())}
    first = next(iter(mods.values()))
    args = first.ModelArgs(max_batch_size=a.batch, max_seq_len=4 * a.prefill, dtype="fp8", vocab_size=4096, dim=1024,
                           inter_dim=2048, moe_inter_dim=512, n_layers=a.layers, n_dense_layers=1, n_heads=8,
                           n_routed_experts=a.experts, n_shared_experts=1, n_activated_experts=4, kv_lora_rank=256)
    torch.manual_seed(0)
    models = {}
    for name, mod in mods.items():
        models[name] = mod.Transformer(args)
    base_name = next(iter(models))
    init_weights(models[base_name], mods[base_name])
    state = models[base_name].state_dict()
    for name in list(models)[1:]:
        models[name].load_state_dict(state)
    tokens = torch.randint(0, args.vocab_size, (a.batch, a.prefill))
    print(f"DeepSeek-V3 model.py, {a.layers} layers (1 dense), {a.experts} experts (4 active), dim 1024, "
          f"batch {a.batch}, prefill {a.prefill} tokens; {torch.cuda.get_device_name()}")
    results = {name: run(m, tokens, a.iters) for name, m in models.items()}
    base = results[base_name]
    print(f"{'kernels':36} {'prefill ms':>10} {'decode ms':>10}  logits rel. diff (prefill / decode)  tokens")
    for name, (pre, dec, nxt, outs, times) in results.items():
        same = (nxt == base[2]).sum().item()
        print(f"{name:36} {times[0]:10.2f} {times[1]:10.2f}  {rel(pre, base[0]):.3g} / {rel(dec, base[1]):.3g}"
              f"{'':18}{same}/{nxt.numel()} greedy tokens equal")
    print("block outputs, rel. diff to kernel.py (prefill blocks, then decode blocks):")
    for name, (_, _, _, outs, _) in list(results.items())[1:]:
        print(f"  {name}: " + " ".join(f"{rel(o, b):.2g}" for o, b in zip(outs, base[3])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
