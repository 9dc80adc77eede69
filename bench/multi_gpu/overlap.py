"""Block-scaled GEMMs beside an NCCL all-reduce, one process per GPU, for several SM budgets.

Serving a tensor-parallel model overlaps a layer's GEMMs with the all-reduce of the layer before:
NCCL's kernels need SMs of their own, and a persistent GEMM that holds every SM makes them wait.
For each budget (fp8jit.gemm(..., max_sms=B)) this times, on every rank:
  alone     N GEMMs on one stream; R all-reduces on another (each after the other, not together)
  together  the same N GEMMs and R all-reduces enqueued together on the two streams
and reports the GEMM time per call, the all-reduce bus bandwidth and the time until both streams
are done (the makespan; the worst rank's). R is chosen once so that the all-reduces alone take about
as long as the GEMMs alone on every SM: the best budget is the one with the shortest makespan.

Usage: torchrun --nproc-per-node 2 bench/multi_gpu/overlap.py [--out FILE.json] [--shapes MxNxK,...]
Needs the fp8jit package on PYTHONPATH (build-py/python). NVLink multicast stays off (see lab/README.md).
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist

import fp8jit

REPEATS = 5  # medians of this many timed rounds per measurement


def operands(m, n, k, sets, dev):
    """`sets` independent block-scaled operand sets: together larger than L2, so that back-to-back
    GEMMs read their inputs from memory as a layer's GEMM does."""
    out = []
    for _ in range(sets):
        a = (torch.randn(m, k, device=dev) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device=dev) * 0.5).to(torch.float8_e4m3fn)
        sa = torch.rand(m, (k + 127) // 128, device=dev) * 0.01 + 0.001
        sb = torch.rand((n + 127) // 128, (k + 127) // 128, device=dev) * 0.01 + 0.001
        out.append((a, b, sa, sb, torch.empty(m, n, device=dev, dtype=torch.bfloat16)))
    return out


def check(ops, budget):
    """The budgeted GEMM against float64 on the dequantized operands (relative Frobenius error)."""
    a, b, sa, sb, d = ops[0]
    fp8jit.gemm(a, b, sa, sb, out=d, max_sms=budget)
    ad = a.double() * sa.double().repeat_interleave(128, 1)[:, : a.shape[1]]
    bd = b.double() * sb.double().repeat_interleave(128, 0)[: b.shape[0]].repeat_interleave(128, 1)[:, : b.shape[1]]
    ref = ad @ bd.T
    err = ((d.double() - ref).norm() / ref.norm()).item()
    if not err < 1e-2:
        raise RuntimeError(f"max_sms={budget}: relative error {err:.3g} against float64")
    return err


def timed(start_stream, work):
    """Runs `work(comp, comm)` (enqueueing on the two streams) and returns the ms from a common
    start to the end of each stream."""
    comp, comm = torch.cuda.Stream(), torch.cuda.Stream()
    start = torch.cuda.Event(enable_timing=True)
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    start.record(start_stream)
    comp.wait_event(start)
    comm.wait_event(start)
    work(comp, comm)
    ends[0].record(comp)
    ends[1].record(comm)
    torch.cuda.synchronize()
    return start.elapsed_time(ends[0]), start.elapsed_time(ends[1])


def run_round(ops, bufs, n_gemm, n_ar, budget, gemms_on, ars_on):
    """One round: GEMMs (if gemms_on) and all-reduces (if ars_on), interleaved as enqueued."""
    def work(comp, comm):
        g = r = 0
        while (gemms_on and g < n_gemm) or (ars_on and r < n_ar):
            # Keep the two queues in the same proportion as they are enqueued.
            if gemms_on and g < n_gemm and (not ars_on or r >= n_ar or g * n_ar <= r * n_gemm):
                a, b, sa, sb, d = ops[g % len(ops)]
                with torch.cuda.stream(comp):
                    fp8jit.gemm(a, b, sa, sb, out=d, max_sms=budget)
                g += 1
            else:
                with torch.cuda.stream(comm):
                    dist.all_reduce(bufs[r % len(bufs)])
                r += 1

    dist.barrier()
    torch.cuda.synchronize()
    return timed(torch.cuda.current_stream(), work)


def measure(ops, bufs, n_gemm, n_ar, budget):
    alone_g = statistics.median(run_round(ops, bufs, n_gemm, n_ar, budget, True, False)[0] for _ in range(REPEATS))
    alone_r = statistics.median(run_round(ops, bufs, n_gemm, n_ar, budget, False, True)[1] for _ in range(REPEATS))
    together = [run_round(ops, bufs, n_gemm, n_ar, budget, True, True) for _ in range(REPEATS)]
    return {
        "gemm_alone_ms": alone_g, "ar_alone_ms": alone_r,
        "gemm_together_ms": statistics.median(t[0] for t in together),
        "ar_together_ms": statistics.median(t[1] for t in together),
        "makespan_ms": statistics.median(max(t) for t in together),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="4096x7168x2048,4096x4096x7168")
    p.add_argument("--budgets", default="0,120,100", help="SM budgets; 0: every SM of the GPU")
    p.add_argument("--gemms", type=int, default=60, help="GEMMs per round")
    p.add_argument("--out", default="")
    args = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    budgets = [b if b > 0 else sms for b in map(int, args.budgets.split(","))]
    results = []
    for shape in args.shapes.split(","):
        m, n, k = map(int, shape.split("x"))
        ops = operands(m, n, k, 4, dev)
        # What the layer's tensor-parallel all-reduce moves: its [M, N] bf16 output.
        bufs = [torch.randn(m, n, device=dev, dtype=torch.bfloat16) for _ in range(2)]
        errs = {b: check(ops, b) for b in budgets}  # also compiles each budget's kernel
        # Calibrate R on every SM, so that the two streams' work is about even there.
        alone = run_round(ops, bufs, args.gemms, 1, sms, True, False)[0]
        one_ar = run_round(ops, bufs, args.gemms, 20, sms, False, True)[1] / 20
        n_ar = torch.tensor([max(1, round(alone / one_ar))], device=dev)
        dist.all_reduce(n_ar, op=dist.ReduceOp.MAX)
        n_ar = int(n_ar.item())
        ar_bytes = m * n * 2
        for b in budgets:
            r = measure(ops, bufs, args.gemms, n_ar, b)
            gathered = [None] * world
            dist.all_gather_object(gathered, r)
            worst = {key: max(g[key] for g in gathered) for key in r}
            row = {"shape": shape, "budget": b, "sms": sms, "gemms": args.gemms, "all_reduces": n_ar,
                   "all_reduce_bytes": ar_bytes, "rel_err": errs[b], "ranks": gathered, "worst": worst}
            # Bus bandwidth of a ring all-reduce: 2 (w - 1) / w of the bytes per rank, over the time.
            bus = 2 * (world - 1) / world * ar_bytes * n_ar
            row["gemm_us_alone"] = worst["gemm_alone_ms"] * 1e3 / args.gemms
            row["gemm_us_together"] = worst["gemm_together_ms"] * 1e3 / args.gemms
            row["ar_busbw_gbs_alone"] = bus / (worst["ar_alone_ms"] * 1e-3) / 1e9
            row["ar_busbw_gbs_together"] = bus / (worst["ar_together_ms"] * 1e-3) / 1e9
            row["serial_ms"] = worst["gemm_alone_ms"] + worst["ar_alone_ms"]
            row["makespan_ms"] = worst["makespan_ms"]
            results.append(row)
    if rank == 0:
        print(f"{world} ranks, {torch.cuda.get_device_name(dev)}, {sms} SMs; NCCL_NVLS_ENABLE="
              f"{os.environ.get('NCCL_NVLS_ENABLE')}; worst rank; medians of {REPEATS} rounds")
        print(f"{'shape':<16} {'SMs':>4} {'GEMM us alone':>13} {'together':>9} {'AR GB/s alone':>13} "
              f"{'together':>9} {'serial ms':>9} {'makespan':>9} {'rel err':>8}")
        for r in results:
            print(f"{r['shape']:<16} {r['budget']:>4} {r['gemm_us_alone']:>13.1f} {r['gemm_us_together']:>9.1f} "
                  f"{r['ar_busbw_gbs_alone']:>13.1f} {r['ar_busbw_gbs_together']:>9.1f} {r['serial_ms']:>9.2f} "
                  f"{r['makespan_ms']:>9.2f} {r['rel_err']:>8.1e}")
        for shape in dict.fromkeys(r["shape"] for r in results):
            rows = [r for r in results if r["shape"] == shape]
            best = min(rows, key=lambda r: r["makespan_ms"])
            full = next(r for r in rows if r["budget"] == sms)
            print(f"{shape}: best total with {best['budget']} SMs: {best['makespan_ms']:.2f} ms "
                  f"({full['makespan_ms'] / best['makespan_ms']:.3f}x the {sms}-SM makespan; "
                  f"{best['serial_ms'] / best['makespan_ms']:.2f}x faster than one after the other)")
        if args.out:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(results, f, indent=1)
            os.replace(tmp, args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
