"""FP8 training of one FFN block, Linear(d, 4d) -> GELU -> Linear(4d, d), forward + backward on
T tokens: bf16 eager against torchao's float8 training (tensorwise and rowwise, torch.compile) and
fp8jit's Float8Linear recipes (eager and compiled), plus what the six FP8 GEMMs alone cost
(torch._scaled_mm, operands already quantized, per-tensor scales). CUDA-event medians in one
process, the same inputs for every row; for fp8jit's rows also how the kernel time splits between
casts, GEMMs and the rest (torch.profiler, one step).

Usage: PYTHONPATH=build-py/python[:torchao's site] python3 bench/training/ffn_bench.py
       [--dims 2048,4096,8192,16384] [--tokens 8192] [--out FILE.json]
torchao's rows are left out (and said so) where torchao does not import.
"""
import argparse
import copy
import json
import os
import statistics
import time

import torch

import fp8jit.torch as ft

WARMUP, REPEATS = 3, 10
# The block's six GEMMs in the order a step launches them: the forward pass, then the second
# Linear's backward (its input gradient, then its weight gradient), then the first's.
GEMM_NAMES = ["Y1 = X W1^T", "Y2 = H W2^T", "dH = dY W2", "dW2 = dY^T H", "dX = dH' W1", "dW1 = dH'^T X"]


def ffn(d: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)).cuda().bfloat16()


def median_ms(fn, host_us=None) -> float:
    """CUDA-event median of REPEATS calls of ``fn`` after WARMUP. With ``host_us`` (a list), the
    median host time of a call, until ``fn`` returns, is appended to it: a step whose host time
    reaches its GPU time is host-bound, and the GPU idles while Python issues it."""
    for _ in range(WARMUP):
        fn()
    times, host = [], []
    for _ in range(REPEATS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1e6)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    if host_us is not None:
        host_us.append(round(statistics.median(host), 1))
    return statistics.median(times)


def step_time_ms(model, x, dy, host_us=None) -> float:
    """One forward + backward step (gradients dropped between steps). x requires its gradient, as
    a block inside a network does, so the step runs all six GEMMs."""
    def step():
        for p in model.parameters():
            p.grad = None
        x.grad = None
        model(x).backward(dy)

    return median_ms(step, host_us)


def six_gemms_ms(d: int, t: int) -> float:
    """The block's six GEMMs alone in FP8 (torch._scaled_mm, per-tensor scales, bf16 out): what
    a float8 Linear costs when its casts are free."""
    def fp8(*shape):
        return (torch.randn(*shape, device="cuda") * 0.5).to(torch.float8_e4m3fn)

    one = torch.ones((), device="cuda")
    x, w1, h, w2 = fp8(t, d), fp8(4 * d, d), fp8(t, 4 * d), fp8(d, 4 * d)
    dy2, dh = fp8(t, d), fp8(t, 4 * d)
    w1t, w2t = fp8(d, 4 * d), fp8(4 * d, d)  # the transposed copies, K-major
    dy2t, dht, ht, xt = fp8(d, t), fp8(4 * d, t), fp8(4 * d, t), fp8(d, t)
    mm = lambda a, b_nk: torch._scaled_mm(a, b_nk.t(), one, one, out_dtype=torch.bfloat16)  # noqa: E731

    def gemms():
        mm(x, w1), mm(h, w2)  # forward
        mm(dy2, w2t), mm(dy2t, ht)  # second layer: dH, dW2
        mm(dh, w1t), mm(dht, xt)  # first layer: dX, dW1

    return median_ms(gemms)


def kernel_split(model, x, dy) -> dict:
    """One step's kernel time by kind (µs): fp8jit's casts, its GEMMs, everything else; and under
    "top" the five costliest kernels that are not GEMMs (name, µs, launches)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for p in model.parameters():
            p.grad = None
        x.grad = None
        model(x).backward(dy)
        torch.cuda.synchronize()
    split = {"casts": 0.0, "gemms": 0.0, "rest": 0.0}
    others = []
    for e in prof.key_averages():
        us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        if us <= 0:
            continue
        # fp8jit's kernels are named by the generator: fp8jit_gemm (and its split-K fp8jit_gemm_reduce)
        # for GEMMs, fp8jit_amax / fp8jit_quantize / fp8jit_finalize for the casts.
        name = e.key
        kind = "gemms" if name.startswith("fp8jit_gemm") else "casts" if name.startswith("fp8jit_") else "rest"
        split[kind] += us
        if kind != "gemms":
            others.append((name[:60], round(us, 1), e.count))
    split["top"] = sorted(others, key=lambda o: -o[1])[:5]
    # Each fp8jit GEMM of the step in launch order (forward 1, 2; dX2, dW2; dX1, dW1 when there
    # are six): which of the three GEMMs of a Linear a recipe's time goes to. Device events only.
    # The event list's fields differ between torch releases: a missing one costs this detail, not
    # the benchmark's other rows.
    try:
        gemms = [e for e in prof.events() if e.name == "fp8jit_gemm" and e.device_time_total > 0]
        split["gemm_each"] = [round(e.device_time_total, 1) for e in sorted(gemms, key=lambda e: e.time_range.start)]
    except (AttributeError, TypeError) as e:
        split["gemm_each_error"] = f"{type(e).__name__}: {e}"
    return split


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dims", default="2048,4096,8192,16384")
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--out", default="")
    p.add_argument("--recipes", default=",".join(ft.RECIPES), help="fp8jit's recipes to time (comma list)")
    p.add_argument("--no-peers", action="store_true",
                   help="leave out torchao's rows and the six GEMMs alone (an A/B of two fp8jit builds)")
    p.add_argument("--eager-only", action="store_true", help="leave out the torch.compile rows")
    args = p.parse_args()
    recipes = args.recipes.split(",")
    for r in recipes:
        if r not in ft.RECIPES:
            p.error(f"--recipes: {r!r} is not one of {', '.join(ft.RECIPES)}")
    try:
        from torchao.float8 import Float8LinearConfig
        from torchao.float8 import convert_to_float8_training as ao_convert
        torchao_note = "torchao " + __import__("torchao").__version__
    except Exception as e:  # noqa: BLE001 - any import failure means: no torchao rows
        ao_convert, torchao_note = None, f"torchao not importable ({type(e).__name__}: {e}); its rows left out"
    if args.no_peers:
        ao_convert, torchao_note = None, "peers left out (--no-peers)"
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {torchao_note}, T = {args.tokens}")
    rows = []
    for d in map(int, args.dims.split(",")):
        x = torch.randn(args.tokens, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dy = torch.randn(args.tokens, d, device="cuda", dtype=torch.bfloat16)
        base = ffn(d)
        host = []
        row = {"d": d, "bf16_ms": step_time_ms(base, x, dy, host)}
        row["bf16_host_us"] = host[0]
        if not args.no_peers:
            row["six_fp8_gemms_ms"] = six_gemms_ms(d, args.tokens)
        if ao_convert is not None and not args.eager_only:  # torchao's float8 is meant compiled
            for recipe in ("tensorwise", "rowwise"):
                m = ao_convert(copy.deepcopy(base), config=Float8LinearConfig.from_recipe_name(recipe))
                row[f"torchao_{recipe}_compile_ms"] = step_time_ms(torch.compile(m), x, dy)
                del m
                torch._dynamo.reset()
        for recipe in recipes:
            m = ft.convert_to_float8_training(copy.deepcopy(base), recipe=recipe)
            host = []
            row[f"fp8jit_{recipe}_ms"] = step_time_ms(m, x, dy, host)
            row[f"fp8jit_{recipe}_host_us"] = host[0]
            row[f"fp8jit_{recipe}_split_us"] = kernel_split(m, x, dy)
            try:
                if not args.eager_only:
                    row[f"fp8jit_{recipe}_compile_ms"] = step_time_ms(torch.compile(m), x, dy)
            except Exception as e:  # noqa: BLE001 - reported in the table, not fatal for the others
                row[f"fp8jit_{recipe}_compile_ms"] = None
                row[f"fp8jit_{recipe}_compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            del m
            torch._dynamo.reset()  # compiled graphs hold their model: free it before the next copy
            torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), flush=True)  # a call cut short still leaves the finished dims
    cols = [k for k in rows[0] if k.endswith("_ms") and k != "bf16_ms"]
    print("speed-up over bf16 eager (bf16 ms in the second column)")
    print("| d | bf16 ms | " + " | ".join(c[:-3] for c in cols) + " |")
    print("|" + " --- |" * (len(cols) + 2))
    for r in rows:
        cells = [f"{r['bf16_ms'] / r[c]:.2f}x" if r.get(c) else "failed" for c in cols]
        print(f"| {r['d']} | {r['bf16_ms']:.2f} | " + " | ".join(cells) + " |")
    for r in rows:
        for recipe in recipes:
            s = r[f"fp8jit_{recipe}_split_us"]
            print(f"d={r['d']} {recipe}: casts {s['casts']:.0f} us, GEMMs {s['gemms']:.0f} us, rest {s['rest']:.0f} us, "
                  f"host {r.get(f'fp8jit_{recipe}_host_us', 0):.0f} us a step (bf16 {r.get('bf16_host_us', 0):.0f})"
                  + (f"; compile failed: {r[f'fp8jit_{recipe}_compile_error']}" if r.get(f"fp8jit_{recipe}_compile_error") else ""))
            print("    top non-GEMM kernels: " + "; ".join(f"{n} {us:.0f} us x{c}" for n, us, c in s.get("top", [])))
            each = s.get("gemm_each", [])
            names = GEMM_NAMES if len(each) == len(GEMM_NAMES) else [f"#{i + 1}" for i in range(len(each))]
            print("    GEMMs in launch order: " + "; ".join(f"{n} {us:.0f} us" for n, us in zip(names, each)))
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torchao": torchao_note, "rows": rows}, f, indent=1)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
