"""fp8jit inside Hugging Face transformers' fine-grained FP8 path: a small Qwen3 model with random
weights, quantized on load with FineGrainedFP8Config (128x128 weight blocks, 1x128 activations),
generates greedily with transformers' own Triton kernels, then with fp8jit's quantize
(DeepSeek arithmetic, which transformers' act_quant copies) and GEMM swapped in. Prints the
tokens of both, where they first differ, the logits' relative difference of one forward, and the
time per generate.

Usage (GPU machine with transformers):
    PYTHONPATH=build-py/python python3 python/examples/hf_fp8_client.py [--layers 4 --tokens 16]
"""

import argparse
import sys
import tempfile
import time

import torch

import fp8jit
import fp8jit.deepseek


def fp8jit_matmul(A, B, As, Bs, block_size, output_dtype=torch.float32):
    """transformers' w8a8_block_fp8_matmul_triton(A, B, As, Bs, block_size, output_dtype) on
    fp8jit: A [..., K] FP8 with As [..., K/128], B [N, K] with Bs [N/128, K/128]."""
    if list(block_size) != [128, 128]:
        raise ValueError(f"block_size {block_size}: fp8jit's block scaling is 128x128")
    k = A.shape[-1]
    a2, s2 = A.reshape(-1, k), As.reshape(-1, As.shape[-1])
    out = fp8jit.gemm(a2, B, s2, Bs, scale="block", out_dtype=output_dtype)
    return out.view(*A.shape[:-1], B.shape[0])


def greedy(model, prompt, tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(prompt, max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
    torch.cuda.synchronize()
    return out[:, prompt.shape[1]:], time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--prompt", type=int, default=32)
    a = p.parse_args()
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config, Qwen3Config
    from transformers.integrations import finegrained_fp8 as fg

    for name in ("act_quant", "w8a8_block_fp8_matmul_triton"):
        if not hasattr(fg, name):
            import transformers

            names = sorted(n for n in dir(fg) if "quant" in n.lower() or "matmul" in n.lower() or "fp8" in n.lower())
            print(f"transformers {transformers.__version__}: integrations.finegrained_fp8 has no {name}: this "
                  f"transformers routes its FP8 matmul elsewhere; update this client. The module has: {names}",
                  file=sys.stderr)
            return 2
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=4096, hidden_size=1024, intermediate_size=2048, num_hidden_layers=a.layers,
                      num_attention_heads=8, num_key_value_heads=4, head_dim=128, max_position_embeddings=1024)
    with tempfile.TemporaryDirectory() as d:
        AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).save_pretrained(d)
        model = AutoModelForCausalLM.from_pretrained(
            d, torch_dtype=torch.bfloat16, device_map="cuda",
            quantization_config=FineGrainedFP8Config(weight_block_size=[128, 128])).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, a.prompt), device="cuda")
    with torch.no_grad():
        ref_logits = model(prompt).logits.float()
        greedy(model, prompt, 2)  # Triton's compiles out of the timing
        ref_tokens, ref_s = greedy(model, prompt, a.tokens)
        originals = fg.act_quant, fg.w8a8_block_fp8_matmul_triton
        fg.act_quant = fp8jit.deepseek.act_quant
        fg.w8a8_block_fp8_matmul_triton = fp8jit_matmul
        try:
            logits = model(prompt).logits.float()
            greedy(model, prompt, 2)
            tokens, s = greedy(model, prompt, a.tokens)
        finally:
            fg.act_quant, fg.w8a8_block_fp8_matmul_triton = originals
    rel = ((logits - ref_logits).norm() / ref_logits.norm()).item()
    diff = (tokens != ref_tokens).nonzero()
    first = "none" if diff.numel() == 0 else f"token {diff[0, 1].item()}"
    print(f"Qwen3 {a.layers} layers, dim 1024, FineGrainedFP8Config 128x128, prompt {a.prompt}, "
          f"{a.tokens} greedy tokens; {torch.cuda.get_device_name()}")
    print(f"transformers' Triton kernels: {ref_s * 1e3:.1f} ms per generate; tokens {ref_tokens.tolist()[0]}")
    print(f"fp8jit's kernels:             {s * 1e3:.1f} ms per generate; tokens {tokens.tolist()[0]}")
    print(f"logits of the prompt's forward: relative difference {rel:.3g}; first differing token: {first}")
    return 0 if diff.numel() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
