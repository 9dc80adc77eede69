"""fp8jit.deepseek (the drop-in for DeepSeek-V3's inference/kernel.py) and fp8jit.torch.Linear on
a Hopper GPU. Against kernel.py's own Triton kernels where its source is laid out in
.carry/deepseek-v3/inference (lab/README.md); skip without torch or a GPU."""

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("needs a Hopper GPU (compute capability 9.0)", allow_module_level=True)

import fp8jit  # noqa: E402
import fp8jit.deepseek as ds  # noqa: E402
import fp8jit.torch as ft  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
KERNEL_PY = os.path.join(ROOT, ".carry", "deepseek-v3", "inference", "kernel.py")


def kernel_py():
    if not os.path.exists(KERNEL_PY):
        pytest.skip(f"DeepSeek-V3's kernel.py is not at {KERNEL_PY}")
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location("deepseek_kernel", KERNEL_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


@pytest.fixture(autouse=True)
def bf16_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # as DeepSeek-V3's model.py does
    yield
    torch.set_default_dtype(old)


def test_drop_in_shapes_and_dtypes():
    x = torch.randn(2, 5, 512, device="cuda")
    y, s = ds.act_quant(x)
    assert y.dtype == torch.float8_e4m3fn and y.shape == x.shape and s.shape == (2, 5, 4)
    y8, s8 = ds.act_quant(x, scale_fmt="ue8m0")
    assert torch.equal(torch.log2(s8), torch.round(torch.log2(s8)))
    w = torch.randn(384, 512, device="cuda")
    wq, ws = fp8jit.quantize(w, granularity="128x128")
    c = ds.fp8_gemm(y, s, wq, ws)
    assert c.shape == (2, 5, 384) and c.dtype == torch.bfloat16
    ref = (y.double().view(10, 4, 128) * s.double().view(10, 4, 1)).view(10, 512) @ \
        (wq.double() * ws.double().repeat_interleave(128, 0).repeat_interleave(128, 1)).t()
    assert rel(c.view(10, 384), ref) < 1e-2
    d = ds.weight_dequant(wq, ws)
    assert d.dtype == torch.bfloat16 and d.shape == (384, 512)
    with pytest.raises(ValueError, match="block_size"):
        ds.act_quant(x, block_size=64)
    with pytest.raises(ValueError, match="scale_fmt"):
        ds.act_quant(x, scale_fmt="e8m0")
    with pytest.raises(ValueError, match="contiguous"):
        ds.act_quant(x.transpose(0, 1))


def test_drop_in_against_kernel_py():
    kernel = kernel_py()
    torch.manual_seed(0)
    x = torch.randn(64, 7168, device="cuda")
    w = torch.randn(2112, 7168, device="cuda")
    wq, ws = kernel.act_quant(w.view(-1, 128))  # any FP8 weights with 128x128 scales will do
    wq = wq.view(2112, 7168)
    ws = torch.rand(17, 56, device="cuda", dtype=torch.float32) + 0.5
    # weight_dequant: one fp32 multiply and one rounding in both: the same bytes.
    assert torch.equal(ds.weight_dequant(wq, ws), kernel.weight_dequant(wq, ws))
    # act_quant: kernel.py's arithmetic (arithmetic="deepseek"), its bytes; with and without ue8m0,
    # on values spanning many binades and on all-zero groups (the 1e-4 floor).
    xs = x * torch.logspace(-6, 6, 7168, device="cuda")
    xs[:4, :256] = 0
    for inp in (x, xs):
        for fmt in (None, "ue8m0"):
            yq, ys = ds.act_quant(inp, scale_fmt=fmt)
            kq, ks = kernel.act_quant(inp, scale_fmt=fmt)
            bad = (ys != ks).nonzero()[:4].tolist()
            assert torch.equal(ys, ks), (f"scales differ in {(ys != ks).sum().item()} of {ks.numel()} ({fmt}); "
                                         f"first at {bad}: ours {[ys[i, j].item() for i, j in bad]}, kernel.py's "
                                         f"{[ks[i, j].item() for i, j in bad]}, group amax "
                                         f"{[inp.view(-1, 56, 128)[i, j].abs().max().item() for i, j in bad]}")
            assert torch.equal(yq.view(torch.uint8), kq.view(torch.uint8)), \
                f"{(yq.view(torch.uint8) != kq.view(torch.uint8)).sum().item()} FP8 bytes differ ({fmt})"
    # fp8jit's default IEEE arithmetic: scales within 2 ulp of kernel.py's; codes one rounding apart
    # at most (x * (448 / amax) rounded once against Triton's approximate x / s: 0.15 % of the
    # codes of this x differ, each by one step).
    iq, iscale = fp8jit.quantize(x)
    kq, ks = kernel.act_quant(x)
    assert ((iscale - ks).abs() <= ks * 2.0 ** -22).all()
    steps = (iq.view(torch.uint8).int() - kq.view(torch.uint8).int()).abs()
    assert int(steps.max()) <= 1, f"a code differs by {int(steps.max())} steps"
    same = (steps == 0).double().mean().item()
    assert same > 0.99, f"{same:.5f} of the FP8 bytes equal"
    # fp8_gemm on kernel.py's own operands: the same sums in another order.
    c = ds.fp8_gemm(kq, ks, wq, ws)
    assert rel(c, kernel.fp8_gemm(kq, ks, wq, ws)) < 1e-4


@pytest.mark.parametrize("scale", ["block", "tensor"])
def test_linear_against_float64_eager_compiled_and_captured(scale):
    torch.manual_seed(1)
    ref_layer = torch.nn.Linear(1024, 768, bias=True, device="cuda", dtype=torch.bfloat16)
    layer = ft.Linear.from_float(ref_layer, scale=scale)
    x = torch.randn(3, 40, 1024, device="cuda", dtype=torch.bfloat16)
    y = layer(x)
    assert y.shape == (3, 40, 768) and y.dtype == torch.bfloat16
    # The same FP8 operands in float64: what the layer computes, up to bf16 rounding.
    q, s = fp8jit.quantize(x.view(-1, 1024), granularity="1x128" if scale == "block" else "tensor")
    if scale == "block":
        xd = (q.double().view(120, 8, 128) * s.double().view(120, 8, 1)).view(120, 1024)
        wd = layer.weight.double() * layer.weight_scale.double().repeat_interleave(128, 0).repeat_interleave(128, 1)
    else:
        xd = q.double() * s.double()
        wd = layer.weight.double() * layer.weight_scale.double()
    ref = xd @ wd.t() + layer.bias.double()
    assert rel(y.view(120, 768), ref) < 1e-2
    assert rel(y, ref_layer(x)) < 0.1  # FP8 against bf16 weights: a sanity bound, not precision
    compiled = torch.compile(layer, fullgraph=True)
    assert torch.equal(compiled(x), y)
    static_x = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        layer(static_x)  # kernels compiled and loaded before the capture
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        static_y = layer(static_x)
    static_x.copy_(x * 2)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_y, layer(x * 2))


def test_linear_rejects_bad_input():
    with pytest.raises(ValueError, match="scale"):
        ft.Linear(128, 128, scale="rowwise")
    layer = ft.Linear(256, 128, device="cuda")
    with pytest.raises(ValueError, match="256"):
        layer(torch.randn(4, 128, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="CUDA"):
        ft.Linear.from_float(torch.nn.Linear(128, 128))


def test_hf_client_hub_kernel_path_refused_by_name(tmp_path):
    """--hub-kernel DIR of the Hugging Face client: a folder without the package (empty, missing,
    a file, a name too long for the system) is refused naming the option and the setup script."""
    path = os.path.join(ROOT, "python", "examples", "hf_fp8_client.py")
    spec = importlib.util.spec_from_file_location("hf_fp8_client", path)
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    (tmp_path / "file").write_text("x")
    for bad in ["", str(tmp_path), str(tmp_path / "missing"), str(tmp_path / "file"), "x" * 100000]:
        with pytest.raises(SystemExit, match="--hub-kernel .*no finegrained_fp8 package.*setup_hf_finegrained_fp8"):
            client.load_hub_kernel(bad)
