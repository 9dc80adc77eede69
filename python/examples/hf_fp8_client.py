"""fp8jit inside Hugging Face transformers' fine-grained FP8 path: a small Qwen3 model with random
weights, quantized on load with FineGrainedFP8Config (128x128 weight blocks, 1x128 activations),
generates greedily with transformers' own kernels, then with fp8jit's quantize and GEMM swapped in
(transformers 4.5x: act_quant and w8a8_block_fp8_matmul_triton; transformers 5: fp8_linear).
transformers 5 loads its FP8 kernels from the Hugging Face Hub; where they cannot load (no network)
the reference is the same FP8 weights dequantized to float32. Prints the tokens of both, where they
first differ, the logits' relative difference of one forward, and the time per generate.

Usage (GPU machine with transformers):
    PYTHONPATH=build-py/python python3 python/examples/hf_fp8_client.py [--layers 4 --tokens 16]
"""

import argparse
import sys
import tempfile
import time
from unittest import mock

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


def fp8jit_linear(input, weight, weight_scale_inv, block_size=None, bias=None, activation_scale=None,
                  allow_deepgemm=True):
    """transformers 5's fp8_linear(input, weight, weight_scale_inv, block_size, bias,
    activation_scale, allow_deepgemm) on fp8jit: dynamic 1x128 activation scales, 128x128 weights."""
    if activation_scale is not None or weight.dtype != torch.float8_e4m3fn or list(block_size or []) != [128, 128]:
        raise NotImplementedError("fp8jit_linear: dynamic activation scales and E4M3 weights in 128x128 blocks only")
    k = input.shape[-1]
    q, s = fp8jit.quantize(input.reshape(-1, k).contiguous())
    out = fp8jit.gemm(q, weight, s, weight_scale_inv, scale="block", out_dtype=input.dtype)
    if bias is not None:
        out += bias
    return out.view(*input.shape[:-1], weight.shape[0])


def dequantized_linear(input, weight, weight_scale_inv, block_size=None, bias=None, activation_scale=None,
                       allow_deepgemm=True):
    """The float reference of the same layer: the FP8 weight times its block scales, in float32,
    on the unquantized activations (what the FP8 path approximates)."""
    n, k = weight.shape
    s = weight_scale_inv.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
    out = torch.nn.functional.linear(input.float(), weight.float() * s, None if bias is None else bias.float())
    return out.to(input.dtype)


def greedy(model, prompt, tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(prompt, max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
    torch.cuda.synchronize()
    return out[:, prompt.shape[1]:], time.perf_counter() - t0


def run(model, prompt, tokens):
    """(logits of the prompt's forward, greedy tokens, seconds per generate) with what is swapped in."""
    logits = model(prompt).logits.float()
    greedy(model, prompt, 2)  # compiles out of the timing
    out, seconds = greedy(model, prompt, tokens)
    return logits, out, seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--prompt", type=int, default=32)
    a = p.parse_args()
    import transformers
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config, Qwen3Config
    from transformers.integrations import finegrained_fp8 as fg

    # transformers 4.5x: act_quant + w8a8_block_fp8_matmul_triton, Triton kernels in the package.
    # transformers 5: fp8_linear, whose kernels (DeepGEMM, or Triton's finegrained-fp8) come from
    # the Hugging Face Hub through the `kernels` package.
    v4 = hasattr(fg, "act_quant") and hasattr(fg, "w8a8_block_fp8_matmul_triton")
    if not v4 and not hasattr(fg, "fp8_linear"):
        names = sorted(n for n in dir(fg) if "quant" in n.lower() or "matmul" in n.lower() or "fp8" in n.lower())
        print(f"transformers {transformers.__version__}: integrations.finegrained_fp8 has neither act_quant nor "
              f"fp8_linear; update this client. The module has: {names}", file=sys.stderr)
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
    print(f"Qwen3 {a.layers} layers, dim 1024, FineGrainedFP8Config 128x128, prompt {a.prompt}, {a.tokens} greedy "
          f"tokens; transformers {transformers.__version__}; {torch.cuda.get_device_name()}")
    with torch.no_grad():
        if v4:
            name = "transformers' Triton kernels"
            ref = run(model, prompt, a.tokens)
            with mock.patch.multiple(fg, act_quant=fp8jit.deepseek.act_quant,
                                     w8a8_block_fp8_matmul_triton=fp8jit_matmul):
                ours = run(model, prompt, a.tokens)
        else:
            name = "transformers' own kernels"
            try:
                ref = run(model, prompt, a.tokens)
            except Exception as e:  # noqa: BLE001 - whatever the Hub loader raises offline
                # Without network access the Hub kernels cannot load: compare with the float
                # reference of the same FP8 weights instead, and say so.
                print(f"transformers' own FP8 kernels did not run here ({type(e).__name__}: {str(e)[:160]}); "
                      "the reference is the dequantized weights in float32")
                name = "dequantized float32 weights"
                with mock.patch.multiple(fg, fp8_linear=dequantized_linear):
                    ref = run(model, prompt, a.tokens)
            with mock.patch.multiple(fg, fp8_linear=fp8jit_linear):
                ours = run(model, prompt, a.tokens)
    (ref_logits, ref_tokens, ref_s), (logits, tokens, s) = ref, ours
    rel = ((logits - ref_logits).norm() / ref_logits.norm()).item()
    diff = (tokens != ref_tokens).nonzero()
    first = "none" if diff.numel() == 0 else f"token {diff[0, 1].item()}"
    print(f"{name + ':':32s} {ref_s * 1e3:.1f} ms per generate; tokens {ref_tokens.tolist()[0]}")
    print(f"{'fp8jit:':32s} {s * 1e3:.1f} ms per generate; tokens {tokens.tolist()[0]}")
    print(f"logits of the prompt's forward: relative difference {rel:.3g}; first differing token: {first}")
    if name.startswith("dequantized"):
        # Against float weights and unquantized activations the FP8 path differs by its rounding
        # of the activations (E4M3: ~2-3 % per layer), so greedy tokens may part at a close call.
        return 0 if rel < 0.1 else 1
    return 0 if diff.numel() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
