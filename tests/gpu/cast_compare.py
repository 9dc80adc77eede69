"""fp8jit cast against DeepSeek-V3's fp8_cast_bf16.py on the GPU machine: a synthetic sharded FP8
checkpoint (odd shapes, scales in another shard, 1-D and non-float extras) is cast by both; the
shards must be identical byte for byte, the index's weight maps equal. Then the speed of each
(GB/s of input), fp8jit's FP8 round trip (bf16 -> fp8 -> bf16 within the E4M3 bound) and its host
path (--device cpu) against its GPU path, byte for byte.

Usage: python3 tests/gpu/cast_compare.py --cli build/fp8jit --inference .carry/deepseek-v3/inference
       [--gib 2] [--work /tmp/fp8jit-cast]   (prints one line per check; exit 1 on a mismatch)"""

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import time

import torch
from safetensors.torch import load_file, save_file


def fp8_codes(shape, gen):
    # Finite E4M3 codes of both signs (0x7f and 0xff are NaN).
    c = torch.randint(0, 0x7F, shape, dtype=torch.uint8, generator=gen)
    c |= (torch.rand(shape, generator=gen) < 0.5).to(torch.uint8) << 7
    return c.view(torch.float8_e4m3fn)


def make_checkpoint(path, gib):
    """Shards of about 0.5 GiB: FP8 weights [N, K] (some not multiples of 128), their scales (the
    last weight's in the next shard), bf16 norms, an fp32 bias, an int64."""
    gen = torch.Generator().manual_seed(0)
    os.makedirs(path, exist_ok=True)
    shapes = [(7168, 2048), (2112, 7168), (1000, 3000), (4096, 7168), (129, 7168)]
    shards, weight_map, budget, n = [], {}, gib << 30, 0
    carry = {}
    while budget > 0 or carry:
        state, size = dict(carry), 0
        carry = {}
        while size < (512 << 20) and budget > 0:
            N, K = shapes[n % len(shapes)]
            name = f"model.layers.{n}.mlp.w{n % 3}.weight"
            state[name] = fp8_codes((N, K), gen)
            scale = (torch.rand((N + 127) // 128, (K + 127) // 128, generator=gen) * 0.01 + 1e-4).float()
            (carry if size + N * K >= (512 << 20) else state)[name + "_scale_inv"] = scale
            state[f"model.layers.{n}.input_layernorm.weight"] = torch.randn(K, generator=gen).bfloat16()
            size += N * K
            budget -= N * K
            n += 1
        if budget <= 0 and not carry:
            state["model.step"] = torch.tensor([n], dtype=torch.int64)
            state["model.bias"] = torch.randn(3, generator=gen)
        shards.append(state)
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for file, state in zip(names, shards):
        save_file(state, os.path.join(path, file))
        weight_map.update({k: file for k in state})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}, f)
    return sum(os.path.getsize(os.path.join(path, x)) for x in names)


def run(cmd, **kw):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        print(" ".join(cmd), "failed:", p.stdout[-2000:], p.stderr[-2000:])
        sys.exit(1)
    return dt, p.stdout + p.stderr


def drop_caches():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def same_shards(a, b):
    files = sorted(x for x in os.listdir(a) if x.endswith(".safetensors"))
    bad = [x for x in files if not filecmp.cmp(os.path.join(a, x), os.path.join(b, x), shallow=False)]
    return files, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--inference", required=True, help="DeepSeek-V3's inference/ (fp8_cast_bf16.py, kernel.py)")
    ap.add_argument("--gib", type=int, default=2)
    ap.add_argument("--work", default="/tmp/fp8jit-cast")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    src, ref, ours = (os.path.join(a.work, x) for x in ("fp8", "ref-bf16", "fp8jit-bf16"))
    in_bytes = make_checkpoint(src, a.gib)
    print(f"checkpoint: {in_bytes / 1e9:.2f} GB in {len(os.listdir(src)) - 2} shards")
    cold = drop_caches()
    t_ref, _ = run([sys.executable, os.path.join(a.inference, "fp8_cast_bf16.py"), "--input-fp8-hf-path", src,
                    "--output-bf16-hf-path", ref], cwd=a.inference)
    drop_caches()
    t_ours, log = run([a.cli, "cast", "--to", "bf16", src, ours])
    # The summary line splits the time: converting (GPU kernels and transfers) against disk I/O.
    print(next((line for line in log.splitlines() if "converting" in line), log.strip().splitlines()[-1]))
    files, bad = same_shards(ref, ours)
    print(f"byte for byte: {len(files) - len(bad)}/{len(files)} shards identical" + (f"; differ: {bad}" if bad else ""))
    with open(os.path.join(ref, "model.safetensors.index.json")) as f:
        ref_map = json.load(f)["weight_map"]
    with open(os.path.join(ours, "model.safetensors.index.json")) as f:
        our_map = json.load(f)["weight_map"]
    print(f"index weight maps equal: {ref_map == our_map}")
    print(f"speed ({'cold' if cold else 'warm'} page cache): fp8_cast_bf16.py {t_ref:.1f} s = "
          f"{in_bytes / t_ref / 1e9:.2f} GB/s; fp8jit cast {t_ours:.1f} s = {in_bytes / t_ours / 1e9:.2f} GB/s "
          f"({t_ref / t_ours:.2f}x)")
    # The FP8 round trip, and the host path against the GPU path on one shard's worth.
    q, back = os.path.join(a.work, "q"), os.path.join(a.work, "back")
    run([a.cli, "cast", "--to", "fp8", ours, q])
    run([a.cli, "cast", "--to", "bf16", q, back])
    worst = 0.0
    for file in files[:1]:
        x, y = load_file(os.path.join(ours, file)), load_file(os.path.join(back, file))
        for k, v in x.items():
            if v.dim() == 2:
                worst = max(worst, ((v.double() - y[k].double()).norm() / v.double().norm()).item())
    print(f"bf16 -> fp8 -> bf16: worst relative error {worst:.4f} (E4M3 bound ~0.04)")
    small = os.path.join(a.work, "small")
    os.makedirs(small)
    first = load_file(os.path.join(src, files[0]))
    weights = [k for k in first if k.endswith(".weight") and first[k].dim() == 2 and k + "_scale_inv" in first][:2]
    keep = {k: first[k] for w in weights for k in (w, w + "_scale_inv")}
    save_file(keep, os.path.join(small, "model.safetensors"))
    gpu_dir, cpu_dir = os.path.join(a.work, "small-gpu"), os.path.join(a.work, "small-cpu")
    run([a.cli, "cast", "--to", "bf16", small, gpu_dir, "--device", "gpu"])
    run([a.cli, "cast", "--to", "bf16", small, cpu_dir, "--device", "cpu"])
    _, bad_small = same_shards(gpu_dir, cpu_dir)
    print(f"host path = GPU path byte for byte: {not bad_small}")
    ok = not bad and ref_map == our_map and worst < 0.05 and not bad_small
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
