"""Where an FP8 training step leaves the GPU idle: one FFN block (bench/training/ffn_bench.py's),
forward + backward, profiled with CPU and CUDA activities; for each step, the GPU's busy time, the
wait before its first kernel, and every gap between two GPU activities whose second launch came
from the host after the first activity had ended (the GPU waiting for Python), each with the
top-level host ops that ran between the two launches. Eager and torch.compile, bf16 beside.

Usage (repo root, on the device, the Python module built):
  PYTHONPATH=build-py/python python3 lab/probes/step_gaps.py [--d 2048] [--recipe tensorwise]
      [--modes bf16,eager,compile] [--steps 3] [--out FILE.md]
"""
import argparse
import collections
import copy
import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "training"))
import ffn_bench  # noqa: E402  (the benchmark's block, inputs and step)

import fp8jit.torch as ft  # noqa: E402

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}


def profile_steps(model, x, dy, steps: int) -> dict:
    """The chrome trace of ``steps`` steps, each inside a record_function range "step<i>"."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def one():
        for p in model.parameters():
            p.grad = None
        x.grad = None
        model(x).backward(dy)

    for _ in range(3):
        one()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            with record_function(f"step{i}"):
                one()
            torch.cuda.synchronize()  # as the benchmark's timing: each step starts on an idle GPU
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)


def top_level(ops):
    """The ops of one thread that no other op of that thread contains."""
    out, end = [], -1.0
    for o in sorted(ops, key=lambda o: (o["ts"], -o["dur"])):
        if o["ts"] >= end:
            out.append(o)
            end = o["ts"] + o["dur"]
    return out


def analyse(trace: dict, min_gap_us: float = 2.0) -> list:
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    cpu_ops = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            cpu_ops[e["tid"]].append(e)
    tops = [o for ops in cpu_ops.values() for o in top_level(ops)]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("step")),
                   key=lambda e: e["ts"])
    report = []
    for s in steps:
        s0, s1 = s["ts"], s["ts"] + s["dur"]
        mine = []
        for k in gpu:
            ln = launches.get(k.get("args", {}).get("correlation"))
            if ln is not None and s0 <= ln["ts"] <= s1:
                mine.append((k, ln))
        mine.sort(key=lambda p: p[0]["ts"])
        if not mine:
            continue
        busy = sum(k["dur"] for k, _ in mine)
        first, last = mine[0][0], mine[-1][0]
        span = last["ts"] + last["dur"] - s0
        gaps = []
        for (pk, pl), (k, ln) in zip(mine, mine[1:]):
            gap = k["ts"] - (pk["ts"] + pk["dur"])
            if gap < min_gap_us or ln["ts"] < pk["ts"] + pk["dur"] - 1.0:
                continue  # overlapped work, or launched before the GPU ran dry: not the host's wait
            between = [o for o in tops if o["ts"] < ln["ts"] and o["ts"] + o["dur"] > pl["ts"]]
            gaps.append({"gap_us": round(gap, 1), "before": k["name"][:50], "after": pk["name"][:50],
                         "host_ops": [(o["name"][:48], round(o["dur"], 1)) for o in between][:8]})
        lead_ops = [o for o in tops if s0 <= o["ts"] < mine[0][1]["ts"]]
        report.append({"span_us": round(span, 1), "busy_us": round(busy, 1), "lead_us": round(first["ts"] - s0, 1),
                       "host_gaps_us": round(sum(g["gap_us"] for g in gaps), 1), "gaps": gaps,
                       "lead_ops": [(o["name"][:48], round(o["dur"], 1)) for o in lead_ops][:10]})
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, default=2048)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--recipe", default="tensorwise", choices=list(ft.RECIPES))
    p.add_argument("--modes", default="bf16,eager,compile")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", default="")
    a = p.parse_args()
    modes = a.modes.split(",")
    for m in modes:
        if m not in ("bf16", "eager", "compile"):
            p.error(f"--modes: {m!r} is not one of bf16, eager, compile")
    x = torch.randn(a.tokens, a.d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(a.tokens, a.d, device="cuda", dtype=torch.bfloat16)
    base = ffn_bench.ffn(a.d)
    lines = [f"# Step gaps: {torch.cuda.get_device_name()}, d = {a.d}, T = {a.tokens}, {a.recipe}", ""]
    for mode in modes:
        m = base if mode == "bf16" else ft.convert_to_float8_training(copy.deepcopy(base), recipe=a.recipe)
        if mode == "compile":
            m = torch.compile(m)
        host = []
        ms = ffn_bench.step_time_ms(m, x, dy, host)
        rep = analyse(profile_steps(m, x, dy, a.steps))
        lines.append(f"## {mode}: {ms * 1000:.0f} µs a step (events, median), host {host[0]:.0f} µs")
        if not rep:
            lines.append("no step found in the trace")
            continue
        med = lambda key: statistics.median(r[key] for r in rep)  # noqa: E731
        lines.append(f"profiled steps (median of {len(rep)}): span {med('span_us'):.0f} µs, GPU busy "
                     f"{med('busy_us'):.0f}, wait before the first kernel {med('lead_us'):.0f}, host-bound gaps "
                     f"{med('host_gaps_us'):.0f}")
        r = rep[len(rep) // 2]
        lines.append(f"host ops before the first kernel: {r['lead_ops']}")
        lines.append("largest host-bound gaps of that step (µs: launch ending it <- activity before; host ops between):")
        for g in sorted(r["gaps"], key=lambda g: -g["gap_us"])[:12]:
            lines.append(f"- {g['gap_us']}: {g['before']} <- {g['after']}; {g['host_ops']}")
        lines.append("")
        if mode != "bf16":
            del m
            torch._dynamo.reset()
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
