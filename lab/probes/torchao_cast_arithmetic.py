"""fp8jit's cast arithmetic (runtime/reference/quant.cpp, which the GPU kernels reproduce bit for bit:
QuantizeGpu.*) restated in torch, against torchao's casts (tensor_to_scale, to_fp8_saturated: what
torchao's Float8Linear casts with) on the CPU: the FP8 bytes, plain and transposed, and how the
scales relate, for the tensorwise and rowwise recipes. No GPU; the GPU test that compares the kernels
themselves is python/tests/test_training.py::test_the_casts_give_torchaos_codes_and_scales.

Usage: PYTHONPATH=<torch>:<torchao 0.18 site> python3 lab/probes/torchao_cast_arithmetic.py [--seeds N]
"""
import argparse

# Imported by main() once the arguments are checked, so that a bad argument is refused on a
# machine without torch too.
torch = ao = Float8LinearConfig = ScalingGranularity = E4 = None


def fp8jit_cast(x, dim, pow2):
    """scale = amax / 448 in fp32 (pow2: rounded up to a power of two, inv its exact reciprocal),
    else inv = 448 / amax in fp32; codes cvt.satfinite.rn(x * inv)."""
    a = x.float().abs().amax() if dim is None else x.float().abs().amax(dim=dim, keepdim=True)
    a = a.clamp(min=1e-12)
    s = a / 448.0
    if pow2:
        mant, e = torch.frexp(s)
        s = torch.where(mant == 0.5, s, torch.ldexp(torch.ones_like(s), e))
        inv = 1.0 / s
    else:
        inv = 448.0 / a
    return (x.float() * inv).clamp(-448, 448).to(E4), s


def check(recipe, seed):
    pow2 = Float8LinearConfig.from_recipe_name(recipe).round_scales_to_power_of_2
    torch.manual_seed(seed)
    x = (torch.randn(384, 640) * 3).to(torch.bfloat16)
    x[7, 11] = 2.5e3
    x[100] *= 1e-3
    x[:, 33] *= 1e-3

    def ao_cast(dim):
        kw = {} if recipe == "tensorwise" else dict(scaling_granularity=ScalingGranularity.AXISWISE,
                                                    axiswise_dim=dim, round_scales_to_power_of_2=pow2)
        scale = ao.tensor_to_scale(x, E4, **kw)
        return ao.to_fp8_saturated(x.to(torch.float32) * scale, E4), scale

    (aq, a_s), (aqt, a_st) = ao_cast(-1), ao_cast(0)
    if recipe == "tensorwise":
        q, s = fp8jit_cast(x, None, False)
        qt, st = q.t(), s
    else:
        q, s = fp8jit_cast(x, -1, pow2)
        qt, st = fp8jit_cast(x.t(), -1, pow2)
    u8 = lambda t: t.contiguous().view(torch.uint8)  # noqa: E731
    same = torch.equal(u8(q), u8(aq)) and torch.equal(u8(qt), u8(aqt.t()))
    if recipe == "rowwise":
        scales = torch.equal(s.reshape(-1) * a_s.reshape(-1), torch.ones(384)) and torch.equal(
            st.reshape(-1) * a_st.reshape(-1), torch.ones(640))
    else:
        amax = x.abs().max().double()
        scales = s.item() == (amax / 448).float().item() and a_s.item() == (448 / amax).float().item()
    return pow2, same, scales


def main():
    global torch, ao, Float8LinearConfig, ScalingGranularity, E4
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=20, help="random tensors per recipe, 1 to 1000")
    n = p.parse_args().seeds
    if not 1 <= n <= 1000:
        p.error(f"--seeds {n}: 1 to 1000")
    import torch
    from torchao.float8 import float8_utils as ao
    from torchao.float8.config import Float8LinearConfig, ScalingGranularity
    E4 = torch.float8_e4m3fn
    for recipe in ("tensorwise", "rowwise"):
        results = [check(recipe, seed) for seed in range(n)]
        print(f"{recipe}: torchao's round_scales_to_power_of_2 {results[0][0]}; the same bytes on "
              f"{sum(r[1] for r in results)} of {n} tensors, the scales related as stated on {sum(r[2] for r in results)}")


if __name__ == "__main__":
    main()
