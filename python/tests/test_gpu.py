"""The operations on a Hopper GPU through torch: results against float64 references computed from
the same FP8 operands, random inputs, poisoned outputs. Skip without torch or a GPU."""

import pytest

import fp8jit
from fp8jit import _fp8jit

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("needs a Hopper GPU (compute capability 9.0)", allow_module_level=True)

DEV = "cuda"


def poisoned(shape, dtype):
    t = torch.empty(shape, dtype=dtype, device=DEV)
    t.view(torch.uint8).fill_(0xFF)  # NaN in bf16, fp16, fp32 and both FP8 formats
    return t


def rel_err(got, ref):
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def dequant_1x128(q, s):
    m, k = q.shape
    return (q.double().view(m, -1, 128) * s.double().reshape(m, -1, 1)).view(m, k)


def dequant_128x128(q, s):
    n, k = q.shape
    full = s.double().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
    return q.double() * full


@pytest.mark.parametrize("m, k", [(1, 128), (37, 768), (300, 7168)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_quantize_1x128_round_trips_within_fp8_precision(m, k, dtype):
    x = torch.randn(m, k, dtype=dtype, device=DEV) * 3
    q, s = fp8jit.quantize(x)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (m, k) and s.shape == (m, k // 128)
    amax = x.double().abs().view(m, -1, 128).amax(-1)
    assert torch.allclose(s.double(), amax / 448, rtol=1e-6, atol=0)
    assert rel_err(dequant_1x128(q, s), x) < 0.04  # 3 mantissa bits
    assert (q.float().abs() <= 448).all()


def test_quantize_pow2_and_transpose_and_amax():
    x = torch.randn(256, 512, dtype=torch.bfloat16, device=DEV)
    q, s, qt, st, amax = fp8jit.quantize(x, pow2_scale=True, transpose=True, return_amax=True)
    assert torch.equal(torch.log2(s), torch.round(torch.log2(s)))
    assert qt.shape == (512, 256) and st.shape == (512, 2)
    assert amax.item() == x.float().abs().max().item()
    assert rel_err(dequant_1x128(qt, st), x.t()) < 0.04


@pytest.mark.parametrize("granularity", ["tensor", "row", "1x128", "128x128"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("m, k", [(300, 200), (4096, 384), (1, 16)])
def test_quantize_column_sums_are_the_columns_sums_and_leave_the_cast_alone(granularity, dtype, m, k):
    x = torch.randn(m, k, dtype=dtype, device=DEV) * 3 + 0.5
    *cast, sums = fp8jit.quantize(x, granularity=granularity, transpose=True, column_sums=True)
    assert sums.dtype == torch.float32 and sums.shape == (k,)
    # fp32 sums of m terms in a fixed tree per 128 rows, then the tiles in order.
    ref = x.double().sum(0)
    assert torch.allclose(sums.double(), ref, rtol=1e-5, atol=1e-5 * x.double().abs().sum(0).max().item())
    assert torch.allclose(sums, x.float().sum(0), rtol=1e-4, atol=1e-3)
    plain = fp8jit.quantize(x, granularity=granularity, transpose=True)
    bits = lambda t: t.view(torch.uint8) if t.element_size() == 1 else t  # noqa: E731
    for a, b in zip(cast, plain):
        assert torch.equal(bits(a), bits(b))
    # Deterministic: the same bits again.
    assert torch.equal(fp8jit.quantize(x, granularity=granularity, transpose=True, column_sums=True)[-1], sums)


def test_quantize_column_sums_refusals():
    x = torch.randn(64, 128, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="transpose=True"):
        fp8jit.quantize(x, column_sums=True)
    with pytest.raises(ValueError, match="arithmetic='ieee'"):
        fp8jit.quantize(x, transpose=True, column_sums=True, arithmetic="deepseek")
    # With the amax too: the sums come last.
    q, s, qt, st, amax, sums = fp8jit.quantize(x, "e4m3", "tensor", transpose=True, return_amax=True, column_sums=True)
    assert amax.shape == (1,) and sums.shape == (128,)


def test_quantize_then_dequantize_128x128_and_the_col_major_scales():
    w = torch.randn(384, 640, dtype=torch.bfloat16, device=DEV)
    q, s = fp8jit.quantize(w, granularity="128x128")
    assert s.shape == (3, 5)
    y = fp8jit.dequantize(q, s, "128x128", out=poisoned((384, 640), torch.bfloat16))
    assert torch.allclose(y.double(), dequant_128x128(q, s), rtol=1e-2, atol=0)
    q2, s2 = fp8jit.quantize(w[:130], scale_layout="col_major_tma")
    assert s2.stride() == (1, 132)  # 130 rows padded to 132: DeepGEMM's layout
    y2 = fp8jit.dequantize(q2, s2, "1x128")
    assert rel_err(y2, w[:130]) < 0.04


@pytest.mark.parametrize("m, n, k", [(64, 2112, 7168), (300, 512, 384), (1, 256, 128)])
def test_block_scaled_gemm_against_float64(m, n, k):
    a, sa = fp8jit.quantize(torch.randn(m, k, dtype=torch.bfloat16, device=DEV), scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(n, k, dtype=torch.bfloat16, device=DEV), granularity="128x128")
    d = fp8jit.gemm(a, b, sa, sb, out=poisoned((m, n), torch.bfloat16))
    ref = dequant_1x128(a, sa) @ dequant_128x128(b, sb).t()
    assert not d.isnan().any()
    assert rel_err(d, ref) < 1e-2


def test_per_tensor_gemm_with_bias_and_fp32_out():
    m, n, k = 200, 384, 1024
    a, sa = fp8jit.quantize(torch.randn(m, k, device=DEV), granularity="tensor")
    b, sb = fp8jit.quantize(torch.randn(n, k, device=DEV), granularity="tensor")
    bias = torch.randn(n, dtype=torch.float32, device=DEV)
    d = fp8jit.gemm(a, b, sa, sb, scale="tensor", out_dtype=torch.float32, bias=bias)
    ref = (a.double() * sa.double()) @ (b.double() * sb.double()).t() + bias.double()
    assert rel_err(d, ref) < 1e-3  # fp32 out; the tensor cores sum 128 of K before promotion


def test_gemm_runs_on_the_current_stream_and_under_graph_capture():
    a, sa = fp8jit.quantize(torch.randn(128, 512, dtype=torch.bfloat16, device=DEV), scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(256, 512, dtype=torch.bfloat16, device=DEV), granularity="128x128")
    d = torch.empty(128, 256, dtype=torch.bfloat16, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # compiles, loads and sets up outside the capture, on its stream
        fp8jit.gemm(a, b, sa, sb, out=d)
    s.synchronize()
    ref = d.clone()
    d.fill_(float("nan"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        fp8jit.gemm(a, b, sa, sb, out=d)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(d, ref)


def _checked_gemm(a, b, sa, sb, scale, out_dtype, out):
    """The checked Python path alone (what fp8jit.gemm falls back to)."""
    from fp8jit import _ops

    T = _ops._torch()
    dev, d, args = _ops._gemm_operands(T, a, b, sa, sb, scale, out_dtype, None, False, out)
    _fp8jit.gemm(*args, torch.cuda.current_stream().cuda_stream)
    return d


def test_gemm_fast_path_takes_the_common_cases_and_agrees_with_the_checks():
    """fp8jit.gemm reads the common case in C++ (_fp8jit.gemm_common): it must take these calls
    (not return None) and write the bytes the checked path writes; the rest falls through."""
    x = torch.randn(200, 640, dtype=torch.bfloat16, device=DEV)
    w = torch.randn(384, 640, dtype=torch.bfloat16, device=DEV)
    cases = []
    for layout in ("row_major", "col_major_tma"):
        a, sa = fp8jit.quantize(x, scale_layout=layout)
        b, sb = fp8jit.quantize(w, granularity="128x128")
        cases.append(("block", a, b, sa, sb))
    a, sa = fp8jit.quantize(x, "e4m3", "1x128")
    b, sb = fp8jit.quantize(w, "e4m3", "1x128")
    cases.append(("group", a, b, sa, sb))
    a, sa = fp8jit.quantize(x, "e4m3", "row")
    b, sb = fp8jit.quantize(w, "e5m2", "row")
    cases.append(("rowwise", a, b, sa, sb.view(-1)))
    a, sa = fp8jit.quantize(x, "e4m3", "tensor")
    b, sb = fp8jit.quantize(w, "e4m3", "tensor")
    cases.append(("tensor", a, b, sa, sb))
    for scale, a, b, sa, sb in cases:
        for out_dtype in (None, torch.float32):
            fast = _fp8jit.gemm_common(a, b, sa, sb, None, out_dtype, scale, None, False, 0, None)
            assert fast is not None, (scale, out_dtype)
            torch.cuda.synchronize()
            assert torch.equal(fast, _checked_gemm(a, b, sa, sb, scale, out_dtype, None)), (scale, out_dtype)
        out = poisoned((200, 384), torch.bfloat16)
        assert _fp8jit.gemm_common(a, b, sa, sb, out, None, scale, None, False, 0,
                                   torch.cuda.current_stream().cuda_stream) is out
        assert torch.equal(out, _checked_gemm(a, b, sa, sb, scale, None, None))
    scale, a, b, sa, sb = cases[0]
    bias = torch.zeros(384, dtype=torch.bfloat16, device=DEV)
    for call in (dict(bias=bias), dict(max_sms=True), dict(max_sms=-1), dict(scale="nope"),
                 dict(out=torch.empty(200, 384, dtype=torch.float16, device=DEV)),  # not out_dtype
                 dict(stream=torch.cuda.current_stream())):
        kw = dict(out=None, out_dtype=None, scale=scale, bias=None, fast_accum=False, max_sms=0, stream=None)
        kw.update(call)
        assert _fp8jit.gemm_common(a, b, sa, sb, kw["out"], kw["out_dtype"], kw["scale"], kw["bias"],
                                   kw["fast_accum"], kw["max_sms"], kw["stream"]) is None, call
    assert _fp8jit.gemm_common(a.cpu(), b, sa, sb, None, None, scale, None, False, 0, None) is None
    assert _fp8jit.gemm_common(a[:, :512], b, sa, sb, None, None, scale, None, False, 0, None) is None  # K differs
    assert _fp8jit.gemm_common(a, b, sa.t().contiguous().t()[:, :1], sb, None, None, scale, None, False, 0,
                               None) is None  # too few scales


def test_gemm_reads_torch_tensors_in_cpp_and_agrees_with_the_attribute_path():
    """Where torch is importable at build time fp8jit._fp8jit_torch is built, and gemm reads exact
    tensors through it; subclasses go through their attributes. Both must take the common case
    and write the same bytes, including column-major scales padded past a last row not a multiple
    of 4 (the reader's storage size) and row-sliced views."""
    import importlib

    importlib.import_module("fp8jit._fp8jit_torch")
    assert _fp8jit.torch_reader_loaded()

    class Sub(torch.Tensor):
        pass

    for m in (198, 200):
        x = torch.randn(m, 640, dtype=torch.bfloat16, device=DEV)
        w = torch.randn(384, 640, dtype=torch.bfloat16, device=DEV)
        a, sa = fp8jit.quantize(x, scale_layout="col_major_tma")
        b, sb = fp8jit.quantize(w, granularity="128x128")
        want = _checked_gemm(a, b, sa, sb, "block", None, None)
        for args in ((a, b, sa, sb), (a.as_subclass(Sub), b.as_subclass(Sub), sa.as_subclass(Sub), sb)):
            d = _fp8jit.gemm_common(*args, None, None, "block", None, False, 0, None)
            assert d is not None, (m, type(args[0]).__name__)
            torch.cuda.synchronize()
            assert torch.equal(d, want), (m, type(args[0]).__name__)
    # A column-major view of 198 rows whose storage ends before its last column's 2 padding rows:
    # the kernel would read past it, so both readers refuse it (and the checked path says why).
    a, sa = fp8jit.quantize(torch.randn(198, 640, dtype=torch.bfloat16, device=DEV), scale_layout="col_major_tma")
    cut = torch.empty(4 * 200 + 198, dtype=torch.float32, device=DEV).as_strided((198, 5), (1, 200))
    cut.copy_(sa)
    for scales in (cut, cut.as_subclass(Sub)):
        assert _fp8jit.gemm_common(a, b, scales, sb, None, None, "block", None, False, 0, None) is None
    with pytest.raises(ValueError, match="scale_a"):
        fp8jit.gemm(a, b, cut, sb)


def test_gemm_hands_what_its_common_case_refuses_to_the_checked_path(monkeypatch):
    """fp8jit.gemm is the binding: the common case must not reach _ops._gemm_checked, everything
    else must, with the caller's arguments, and its errors must reach the caller."""
    from fp8jit import _ops

    a, sa = fp8jit.quantize(torch.randn(200, 640, dtype=torch.bfloat16, device=DEV), scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(384, 640, dtype=torch.bfloat16, device=DEV), granularity="128x128")
    seen = []
    checked = _ops._gemm_checked

    def spy(*args):
        seen.append(args[4:])  # scale, out_dtype, bias, fast_accum, out, stream, max_sms
        return checked(*args)

    monkeypatch.setattr(_ops, "_gemm_checked", spy)
    want = _checked_gemm(a, b, sa, sb, "block", None, None)
    assert torch.equal(fp8jit.gemm(a, b, sa, sb), want) and seen == []
    bias = torch.randn(384, dtype=torch.bfloat16, device=DEV)
    stream = torch.cuda.current_stream()
    assert torch.equal(fp8jit.gemm(a, b, sa, sb, stream=stream), want)
    d = fp8jit.gemm(a, b, sa, sb, bias=bias, max_sms=7)
    assert rel_err(d, want.double() + bias.double()) < 1e-2
    assert seen == [("block", None, None, False, None, stream, 0), ("block", None, bias, False, None, None, 7)]
    for bad, match in ((dict(scale="nope"), "scale"), (dict(max_sms=-1), "max_sms"), (dict(out_dtype=torch.int8), "dtype")):
        with pytest.raises(ValueError, match=match):
            fp8jit.gemm(a, b, sa, sb, **bad)
    assert len(seen) == 5


def test_gemm_within_an_sm_budget():
    a, sa = fp8jit.quantize(torch.randn(512, 1024, dtype=torch.bfloat16, device=DEV), scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(768, 1024, dtype=torch.bfloat16, device=DEV), granularity="128x128")
    full = fp8jit.gemm(a, b, sa, sb)
    for budget in (100, 16, 1):
        d = fp8jit.gemm(a, b, sa, sb, max_sms=budget)
        assert rel_err(d, full.double()) < 1e-2, budget  # the same sums, maybe another kernel or split
    for bad in (-1, True, 2.0):
        with pytest.raises(ValueError, match="max_sms"):
            fp8jit.gemm(a, b, sa, sb, max_sms=bad)


def test_first_calls_inside_graph_capture():
    """No warm-up: the first quantize and gemm of these shapes and dtypes come inside the capture
    (torch's default, global mode); their set-up happens outside the graph and the replay writes
    what direct calls write."""
    x = torch.randn(192, 640, dtype=torch.float16, device=DEV)
    w = torch.randn(136, 640, dtype=torch.float16, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        a, sa = fp8jit.quantize(x, "e4m3", "row")
        b, sb = fp8jit.quantize(w, "e5m2", "row")
        d = fp8jit.gemm(a, b, sa, sb, scale="rowwise", out_dtype=torch.float16)
    d.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    a2, sa2 = fp8jit.quantize(x, "e4m3", "row")
    b2, sb2 = fp8jit.quantize(w, "e5m2", "row")
    assert torch.equal(a.view(torch.uint8), a2.view(torch.uint8)) and torch.equal(sa, sa2)
    assert torch.equal(d, fp8jit.gemm(a2, b2, sa2, sb2, scale="rowwise", out_dtype=torch.float16))


def _masked_operands(groups, m_max, n, k):
    """A [G * M_max, K] e4m3 with 1x128 scales (column-major), B [G * N, K] with 128x128 scales."""
    a, sa = fp8jit.quantize(torch.randn(groups * m_max, k, dtype=torch.bfloat16, device=DEV),
                            scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(groups * n, k, dtype=torch.bfloat16, device=DEV), granularity="128x128")
    return a, b, sa, sb


def test_masked_grouped_gemm_writes_only_the_valid_rows():
    groups, m_max, n, k = 4, 64, 256, 512
    a, b, sa, sb = _masked_operands(groups, m_max, n, k)
    counts = torch.tensor([0, 5, 64, 33], dtype=torch.int32, device=DEV)
    out = poisoned((groups, m_max, n), torch.bfloat16)
    d = fp8jit.grouped_gemm("masked", a.view(groups, m_max, k), b.view(groups, n, k), sa,
                            sb.view(groups, n // 128, k // 128), counts, out=out)
    ad = dequant_1x128(a, sa).view(groups, m_max, k)
    bd = dequant_128x128(b, sb).view(groups, n, k)  # 128x128 blocks never straddle experts here
    for g, c in enumerate(counts.tolist()):
        if c:
            assert rel_err(d[g, :c], ad[g, :c] @ bd[g].t()) < 1e-2
        assert d[g, c:].isnan().all()


def _block_operands(m, n, k):
    a, sa = fp8jit.quantize(torch.randn(m, k, dtype=torch.bfloat16, device=DEV), scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(n, k, dtype=torch.bfloat16, device=DEV), granularity="128x128")
    return a, b, sa, sb


def test_tune_times_candidates_and_gemm_stays_right():
    m, n, k = 192, 1536, 1024
    a, b, sa, sb = _block_operands(m, n, k)
    r = fp8jit.tune(a, b, sa, sb, top_k=4, warmup=1, iters=5)
    assert 1 <= len(r.candidates) <= 4
    assert r.best is not None and r.best["status"] == "passed" and r.best["median_us"] > 0
    assert r.best["name"] == fp8jit.spec_name(r.best["spec"])
    d = fp8jit.gemm(a, b, sa, sb, out=poisoned((m, n), torch.bfloat16))
    assert rel_err(d, dequant_1x128(a, sa) @ dequant_128x128(b, sb).t()) < 1e-2
    with pytest.raises(ValueError, match="iters"):
        fp8jit.tune(a, b, sa, sb, iters=0)
    with pytest.raises(ValueError, match="top_k"):
        fp8jit.tune(a, b, sa, sb, top_k=-1)


def test_tuned_kernel_is_selected_from_the_database():
    import os
    if not os.environ.get("FP8JIT_DB"):
        pytest.skip("FP8JIT_DB is not set: tune() keeps its winner in this runtime only")
    m, n, k = 320, 2048, 512
    a, b, sa, sb = _block_operands(m, n, k)
    r = fp8jit.tune(a, b, sa, sb, top_k=3, warmup=1, iters=5)
    assert r.best is not None
    assert fp8jit.select_gemm(m, n, k) == r.best["spec"]


def test_tune_grouped_masked():
    groups, m_max, n, k = 4, 64, 256, 512
    a, b, sa, sb = _masked_operands(groups, m_max, n, k)
    counts = torch.tensor([3, 64, 17, 40], dtype=torch.int32, device=DEV)
    r = fp8jit.tune_grouped("masked", a.view(groups, m_max, k), b.view(groups, n, k), sa,
                            sb.view(groups, n // 128, k // 128), counts, expected_m=32, top_k=3, warmup=1, iters=5)
    assert r.best is not None and r.best["status"] == "passed"
    assert r.best["spec"]["problem"]["layout"] == "masked"
    # Timed on a second routing too (the first is the one checked); a table unlike group_rows is refused.
    other = torch.tensor([64, 0, 50, 9], dtype=torch.int32, device=DEV)
    r2 = fp8jit.tune_grouped("masked", a.view(groups, m_max, k), b.view(groups, n, k), sa,
                             sb.view(groups, n // 128, k // 128), counts, expected_m=32, top_k=3, warmup=1, iters=5,
                             more_group_rows=[other])
    assert r2.best is not None and r2.best["status"] == "passed"
    with pytest.raises(ValueError, match="more_group_rows"):
        fp8jit.tune_grouped("masked", a.view(groups, m_max, k), b.view(groups, n, k), sa,
                            sb.view(groups, n // 128, k // 128), counts, expected_m=32, top_k=3,
                            more_group_rows=[other[:3]])


def test_bad_tensors_raise_value_error_and_launch_nothing():
    x = torch.randn(64, 256, dtype=torch.bfloat16, device=DEV)
    q, s = fp8jit.quantize(x)
    with pytest.raises(ValueError, match="dtype"):
        fp8jit.quantize(x.to(torch.int32))
    with pytest.raises(ValueError, match="contiguous"):
        fp8jit.quantize(x.t())
    with pytest.raises(ValueError, match="float8"):
        fp8jit.dequantize(x, s, "1x128")
    with pytest.raises(ValueError, match="floats"):
        fp8jit.dequantize(q, s[:10], "1x128")
    with pytest.raises(ValueError, match="K of a"):
        fp8jit.gemm(q, q[:, :128], s, s)
    with pytest.raises(ValueError, match="CUDA"):
        fp8jit.gemm(q, q, s.cpu(), s)
    out = poisoned((64, 64), torch.bfloat16)
    with pytest.raises(ValueError):
        fp8jit.gemm(q, q, s, s, scale="bogus", out=out)
    assert out.isnan().all()
