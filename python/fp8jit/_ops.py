"""The operations on torch CUDA tensors: every tensor is checked here (type, device, dtype, shape,
strides, how much memory it reaches) before its pointer goes to the runtime, which checks the
arguments again and launches on the current stream. A bad argument is a ValueError and nothing
is launched or written."""

from __future__ import annotations

from typing import Any, Tuple

from . import _fp8jit

_BLOCK = 128


class _Torch:
    """torch and what the checks look up on every call, resolved once: the operations' host cost
    is most of a small GEMM's (the bar: <= 5 us over the C++ call)."""

    def __init__(self, torch):
        self.torch = torch
        self.Tensor = torch.Tensor
        self.dtype_names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
        self.fp8_names = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
        self.fp8_dtypes = {v: k for k, v in self.fp8_names.items()}
        self.float32 = torch.float32
        # torch.cuda.current_device() re-checks lazy initialisation on every call (~0.25 us); an
        # operation has a CUDA tensor in hand, so CUDA is initialised and the raw getter does.
        self.current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.raw_stream = raw if raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)


_T = None


def _torch() -> _Torch:
    global _T
    if _T is None:
        try:
            import torch
        except ImportError as e:  # the spec functions work without torch; the operations do not
            raise RuntimeError("fp8jit's operations take torch CUDA tensors: install torch") from e
        _T = _Torch(torch)
    return _T


def _dtype_name(T, dtype) -> str:
    name = T.dtype_names.get(dtype)
    if name is None:
        raise ValueError(f"dtype {dtype}: expected torch.bfloat16, torch.float16 or torch.float32")
    return name


def _fp8_name(T, dtype, what: str) -> str:
    name = T.fp8_names.get(dtype)
    if name is None:
        raise ValueError(f"{what}: dtype {dtype}, expected torch.float8_e4m3fn or torch.float8_e5m2")
    return name


def _fp8_dtype(T, fmt: str):
    if fmt not in T.fp8_dtypes:
        raise ValueError(f"format '{fmt}': expected 'e4m3' or 'e5m2'")
    return T.fp8_dtypes[fmt]


def _launch(T, device: int, fn, *args) -> None:
    """fn(*args) with `device` current (the runtime launches in the current device's context)."""
    if device == T.current_device():
        fn(*args)
    else:
        with T.torch.cuda.device(device):
            fn(*args)


def _check_cuda(T, t, what: str, device: int = -1) -> int:
    """The tensor's CUDA device index, after checking it is a CUDA tensor (on `device` if given)."""
    if not isinstance(t, T.Tensor):
        raise ValueError(f"{what}: expected a torch.Tensor, got {type(t).__name__}")
    index = t.get_device()  # -1 for a CPU tensor: one query answers both questions
    if index < 0 or not t.is_cuda:
        raise ValueError(f"{what}: a tensor on {t.device}; fp8jit's operations take CUDA tensors")
    if device >= 0 and index != device:
        raise ValueError(f"{what}: on cuda:{index}, the other operands on cuda:{device}")
    return index


def _rows(t, what: str, shape=None, strides=None) -> int:
    """The row stride of a 2-D tensor whose rows are contiguous (stride 1 along the last dim).
    Callers that already hold the tensor's shape and strides pass them: each torch query costs
    ~0.1 us, and the checks are most of a small GEMM's host time."""
    if shape is None:
        shape, strides = t.shape, t.stride()
    if len(shape) != 2:
        raise ValueError(f"{what}: shape {tuple(shape)}, expected 2-D")
    if shape[1] > 1 and strides[1] != 1:
        raise ValueError(f"{what}: strides {strides}, the last dimension must be contiguous")
    if shape[0] > 1 and strides[0] < shape[1]:
        raise ValueError(f"{what}: row stride {strides[0]} below the row length {shape[1]}")
    return strides[0]


def _floats_reachable(t, shape=None, strides=None) -> int:
    """fp32 elements a kernel may read from the tensor's first element: its view's extent, plus,
    for a column-major view (rows padded to 4), the padding rows of its last column where its
    storage holds them."""
    if shape is None:
        shape, strides = t.shape, t.stride()
    if len(shape) == 2:
        rows, cols = shape
        column_major = strides[0] == 1 and rows % 4 != 0 and rows * cols > 0
        if not column_major and strides[1] == 1 and (rows < 2 or strides[0] == cols):
            return rows * cols  # contiguous
    elif t.is_contiguous():
        return t.numel()
    else:
        column_major = False
    extent = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))
    if not column_major:
        return extent  # torch keeps every view inside its storage
    return min(extent + -shape[0] % 4, t.untyped_storage().nbytes() // 4 - t.storage_offset())


def _scale_tensor(T, t, what: str, need: int, shape=None, strides=None) -> int:
    """Checks a fp32 scale tensor (a CUDA tensor on the operands' device: _check_cuda first) reaching
    at least `need` floats; returns how many it reaches."""
    if t.dtype != T.float32:
        raise ValueError(f"{what}: dtype {t.dtype}, expected torch.float32")
    reach = _floats_reachable(t, shape, strides)
    if reach < need:
        raise ValueError(f"{what}: reaches {reach} floats, {need} needed")
    return reach


def _scale_layout_of(t, rows: int, shape=None, strides=None) -> str:
    """row_major for a contiguous [rows, groups] tensor; col_major_tma for a column-major one
    whose columns are padded to 4 rows (DeepGEMM's get_col_major_tma_aligned_tensor)."""
    if shape is None:
        shape, strides = t.shape, t.stride()
    if len(shape) == 2 and strides[0] == 1:
        if shape[1] > 1 and strides[1] == (rows + 3) // 4 * 4:
            return "col_major_tma"
        if shape[1] == 1 and rows % 4 == 0:
            return "row_major"  # one scale column: both layouts are the same memory
    if not t.is_contiguous():
        raise ValueError(f"scales: strides {strides} are neither row-major nor column-major padded to 4 rows")
    return "row_major"


def _stream(T, device: int, stream) -> int:
    if stream is None:
        return int(T.raw_stream(device))
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    raise ValueError(f"stream: expected a torch.cuda.Stream or an int handle, got {type(stream).__name__}")


def _ptr(t) -> int:
    return 0 if t is None else int(t.data_ptr())


def _scales_shape(granularity: str, m: int, k: int) -> Tuple[int, ...]:
    kb = (k + _BLOCK - 1) // _BLOCK
    return {"tensor": (1,), "row": (m, 1), "1x128": (m, kb), "128x128": ((m + _BLOCK - 1) // _BLOCK, kb)}[granularity]


def _new_scales(torch, granularity: str, layout: str, m: int, k: int, device):
    shape = _scales_shape(granularity, m, k)
    if layout == "row_major" or len(shape) == 1:
        return torch.empty(shape, dtype=torch.float32, device=device)
    rows, cols = shape
    padded = (rows + 3) // 4 * 4
    return torch.empty((cols, padded), dtype=torch.float32, device=device)[:, :rows].t()


def _more_outputs(torch, qdtype, granularity: str, scale_layout: str, m: int, k: int, device, transpose: bool,
                  amax: bool, column_sums: bool):
    """quantize's outputs besides q and its scales, each None where not asked for: (qt [K, M],
    its scales where they are not q's, amax [1], column sums [K])."""
    qt = st = None
    if transpose:
        qt = torch.empty((k, m), dtype=qdtype, device=device)
        # 1x128 and per-row scaling scale the transpose by its own groups or rows (x's columns).
        st = _new_scales(torch, granularity, scale_layout, k, m, device) if granularity in ("1x128", "row") else None
    return (qt, st, torch.empty((1,), dtype=torch.float32, device=device) if amax else None,
            torch.empty((k,), dtype=torch.float32, device=device) if column_sums else None)


def quantize(x, format: str = "e4m3", granularity: str = "1x128", *, scale_layout: str = "row_major",
             pow2_scale: bool = False, static_scale: Any = None, transpose: bool = False, return_amax: bool = False,
             out: Any = None, scales: Any = None, stream: Any = None, arithmetic: str = "ieee",
             column_sums: bool = False):
    """x [..., K] (bf16/fp16/fp32, CUDA) -> (q [..., K] FP8, scales fp32) with scales per
    ``granularity``: 'tensor', 'row', '1x128' (per 128 of a row) or '128x128'. ``pow2_scale``
    rounds scales up to powers of two; ``static_scale`` (per tensor) is used instead of the amax.
    With ``transpose`` also (qt [K, M], scales_t: per 128 of qt's rows for '1x128', per row of qt
    [K, 1] for 'row', else ``scales``); with ``return_amax`` also the amax (fp32 [1]).
    ``arithmetic="deepseek"`` (1x128, e4m3): DeepSeek-V3 kernel.py's act_quant arithmetic, its
    bytes (amax floored at 1e-4, Triton's approximate divisions) instead of IEEE rounding.
    ``column_sums`` (needs ``transpose``, IEEE arithmetic): also, last, the fp32 sum over the rows
    of every column of x ([K]; a Linear layer's bias gradient when x is dY), from the same read,
    in a fixed order (the same bits on every run)."""
    T = _torch()
    torch = T.torch
    dev = _check_cuda(T, x, "x")
    if x.dim() < 1:
        raise ValueError("x: a 0-d tensor; expected [..., K]")
    lead = tuple(x.shape[:-1])
    k = int(x.shape[-1])
    x2 = x.reshape(-1, k) if x.dim() != 2 else x
    m = int(x2.shape[0])
    ldx = _rows(x2, "x")
    fmt = format
    qdtype = _fp8_dtype(T, fmt)
    if transpose and x.dim() != 2:
        raise ValueError("transpose: takes a 2-D x")
    if column_sums and not transpose:
        raise ValueError("column_sums: come with the transposed output; pass transpose=True")
    if column_sums and arithmetic != "ieee":
        raise ValueError(f"column_sums: need arithmetic='ieee', not {arithmetic!r}")
    if out is None:
        q = torch.empty((m, k), dtype=qdtype, device=x.device)
    else:
        _check_cuda(T, out, "out", dev)
        if out.dtype != qdtype or tuple(out.shape) not in ((m, k), lead + (k,)):
            raise ValueError(f"out: {out.dtype} {tuple(out.shape)}, expected {qdtype} {lead + (k,)}")
        try:
            q = out.view(m, k)  # a view: the kernel must write into `out` itself
        except RuntimeError as e:
            raise ValueError(f"out: strides {out.stride()} cannot be viewed as [{m}, {k}]") from e
    ldq = _rows(q, "out")
    if granularity not in ("tensor", "row", "1x128", "128x128"):
        raise ValueError(f"granularity '{granularity}': expected 'tensor', 'row', '1x128' or '128x128'")
    need = _fp8jit.scale_count(granularity, scale_layout, m, k)
    if scales is None:
        s = _new_scales(torch, granularity, scale_layout, m, k, x.device)
    else:
        _check_cuda(T, scales, "scales", dev)
        s = scales
    _scale_tensor(T, s, "scales", need)
    static = None
    if static_scale is not None:
        static = static_scale if isinstance(static_scale, torch.Tensor) else torch.tensor(
            [float(static_scale)], dtype=torch.float32, device=x.device)
        _check_cuda(T, static, "static_scale", dev)
        _scale_tensor(T, static, "static_scale", 1)
    qt, st, amax, sums = _more_outputs(torch, qdtype, granularity, scale_layout, m, k, x.device, transpose,
                                       return_amax, column_sums)
    _launch(T, dev, _fp8jit.quantize, _ptr(x2), _dtype_name(T, x.dtype), m, k, ldx, _ptr(q), fmt, ldq, _ptr(s),
            granularity, scale_layout, pow2_scale, _ptr(static), _ptr(qt), m if qt is not None else 0, _ptr(st),
            _ptr(amax), _stream(T, dev, stream), arithmetic, _ptr(sums))
    # Per-row scale sets take x's leading dimensions (as DeepSeek's act_quant returns them) where
    # that is a view; 128x128, tensor and column-major scales keep their own shape.
    per_row = granularity in ("1x128", "row") and scale_layout == "row_major" and s.is_contiguous()
    result = [q.view(lead + (k,)) if x.dim() != 2 else q,
              s.view(lead + tuple(s.shape[1:])) if x.dim() != 2 and per_row else s]
    if transpose:
        result += [qt, st if st is not None else s]
    if return_amax:
        result.append(amax)
    if column_sums:
        result.append(sums)
    return tuple(result)


def _quantize_transposed(x, fmt: str, granularity: str, scale_layout: str, pow2: bool, static, want_amax: bool,
                         column_sums: bool):
    """quantize(x, transpose=True, ...) for Float8Linear's casts, whose inputs the layer has made
    2-D and contiguous on a CUDA device: (q, s, qt, st or None, amax or None, sums or None), the
    outputs allocated and the binding called without the public wrapper's checks, which were most
    of a cast's host time in the eager training step (the GPU waited for it at d = 2048). Any
    other input takes the public path, which checks it."""
    T = _torch()
    name = T.dtype_names.get(x.dtype)
    if name is None or x.dim() != 2 or not x.is_cuda or not x.is_contiguous():
        out = quantize(x, fmt, granularity, scale_layout=scale_layout, pow2_scale=pow2, static_scale=static,
                       transpose=True, return_amax=want_amax, column_sums=column_sums)
        q, s, qt, st = out[:4]
        rest = list(out[4:])
        amax = rest.pop(0) if want_amax else None
        return q, s, qt, (st if st is not s else None), amax, (rest[0] if column_sums else None)
    torch = T.torch
    m, k = x.shape
    device = x.device
    qdtype = _fp8_dtype(T, fmt)
    q = torch.empty((m, k), dtype=qdtype, device=device)
    s = _new_scales(torch, granularity, scale_layout, m, k, device)
    qt, st, amax, sums = _more_outputs(torch, qdtype, granularity, scale_layout, m, k, device, True, want_amax,
                                       column_sums)
    index = x.get_device()
    _launch(T, index, _fp8jit.quantize, x.data_ptr(), name, m, k, k, q.data_ptr(), fmt, k, s.data_ptr(),
            granularity, scale_layout, pow2, _ptr(static), qt.data_ptr(), m, _ptr(st), _ptr(amax),
            int(T.raw_stream(index)), "ieee", _ptr(sums))
    return q, s, qt, st, amax, sums


def dequantize(q, scales, granularity: str = "128x128", *, dtype: Any = None, out: Any = None,
               stream: Any = None):
    """q [M, K] FP8 and its fp32 scales ('tensor', 'row', '1x128' or '128x128'; row-major or, for
    1x128, column-major padded to 4 rows) -> y [M, K] in ``dtype`` (default torch.bfloat16)."""
    T = _torch()
    torch = T.torch
    dev = _check_cuda(T, q, "q")
    fmt = _fp8_name(T, q.dtype, "q")
    ldq = _rows(q, "q")
    m, k = int(q.shape[0]), int(q.shape[1])
    if granularity not in ("tensor", "row", "1x128", "128x128"):
        raise ValueError(f"granularity '{granularity}': expected 'tensor', 'row', '1x128' or '128x128'")
    _check_cuda(T, scales, "scales", dev)
    layout = _scale_layout_of(scales, m) if granularity == "1x128" else "row_major"
    _scale_tensor(T, scales, "scales", _fp8jit.scale_count(granularity, layout, m, k))
    dtype = torch.bfloat16 if dtype is None else dtype
    out_name = _dtype_name(T, dtype)
    if out is None:
        y = torch.empty((m, k), dtype=dtype, device=q.device)
    else:
        _check_cuda(T, out, "out", dev)
        if out.dtype != dtype or tuple(out.shape) != (m, k):
            raise ValueError(f"out: {out.dtype} {tuple(out.shape)}, expected {dtype} {(m, k)}")
        y = out
    ldy = _rows(y, "out")
    _launch(T, dev, _fp8jit.dequantize, _ptr(q), fmt, m, k, ldq, _ptr(scales), granularity, layout, _ptr(y),
            out_name, ldy, _stream(T, dev, stream))
    return y


# The granularities of A's and B's scales in each GEMM scale mode.
_GEMM_SCALE_GRANULARITIES = {"tensor": ("tensor", "tensor"), "rowwise": ("row", "row"), "block": ("1x128", "128x128"),
                             "group": ("1x128", "1x128")}


def _gemm_scales(T, scale: str, sa, sb, m: int, n: int, k: int, groups: int, device):
    """Checked scale tensors of both operands and their layouts and reachable sizes."""
    grans = _GEMM_SCALE_GRANULARITIES.get(scale)
    if grans is None:
        raise ValueError(f"scale '{scale}': expected 'tensor', 'rowwise', 'block' or 'group'")
    found = []
    for t, what, gran, rows, count in ((sa, "scale_a", grans[0], m, 1), (sb, "scale_b", grans[1], n, groups)):
        _check_cuda(T, t, what, device)
        shape, strides = t.shape, t.stride()
        layout = _scale_layout_of(t, rows, shape, strides) if gran == "1x128" else "row_major"
        need = _fp8jit.scale_count(gran, layout, rows, k) * count
        found.append((layout, _scale_tensor(T, t, what, need, shape, strides)))
    (la, na), (lb, nb) = found
    return la, lb, na, nb


def _output(T, out, dtype, shape, device):
    out_name = _dtype_name(T, dtype)
    if out is None:
        return T.torch.empty(shape, dtype=dtype, device=device), out_name
    _check_cuda(T, out, "out", device)
    if out.dtype != dtype or out.shape != shape:
        raise ValueError(f"out: {out.dtype} {tuple(out.shape)}, expected {dtype} {tuple(shape)}")
    return out, out_name


_INT_MAX = 2**31 - 1


def _max_sms(v) -> int:
    """A checked SM budget: the most SMs the GEMM may occupy, 0 for all. More SMs than any GPU
    has means all of them (the runtime's budget is a C int)."""
    if type(v) is not int or v < 0:  # bool is not accepted either
        raise ValueError(f"max_sms: {v!r}, expected an int: 0 (all SMs) or the most SMs the GEMM may occupy")
    return min(v, _INT_MAX)


def _gemm_operands(T, a, b, scale_a, scale_b, scale, out_dtype, bias, fast_accum, out, max_sms=0):
    """(device, D, the raw binding's operand arguments) of a checked dense GEMM."""
    dev = _check_cuda(T, a, "a")
    _check_cuda(T, b, "b", dev)
    fa, fb = _fp8_name(T, a.dtype, "a"), _fp8_name(T, b.dtype, "b")
    a_shape, b_shape = a.shape, b.shape
    lda, ldb = _rows(a, "a", a_shape, a.stride()), _rows(b, "b", b_shape, b.stride())
    m, k = a_shape
    n = b_shape[0]
    if b_shape[1] != k:
        raise ValueError(f"b: shape {tuple(b_shape)}, expected [N, {k}] (K of a)")
    la, lb, na, nb = _gemm_scales(T, scale, scale_a, scale_b, m, n, k, 1, dev)
    d, out_name = _output(T, out, T.torch.bfloat16 if out_dtype is None else out_dtype, (m, n), dev)
    ldd = _rows(d, "out")
    if bias is not None:
        _check_cuda(T, bias, "bias", dev)
        if bias.dtype != d.dtype or tuple(bias.shape) != (n,) or not bias.is_contiguous():
            raise ValueError(f"bias: {bias.dtype} {tuple(bias.shape)}, expected a contiguous {d.dtype} ({n},)")
    return dev, d, (a.data_ptr(), fa, lda, b.data_ptr(), fb, ldb, d.data_ptr(), out_name, ldd, m, n, k, scale,
                    scale_a.data_ptr(), na, la, scale_b.data_ptr(), nb, lb, _ptr(bias), fast_accum, _max_sms(max_sms))


def _gemm_checked(a, b, scale_a, scale_b, scale, out_dtype, bias, fast_accum, out, stream, max_sms):
    """gemm's every case, each argument checked (the binding's common case hands over the rest)."""
    T = _T or _torch()
    dev, d, args = _gemm_operands(T, a, b, scale_a, scale_b, scale, out_dtype, bias, fast_accum, out, max_sms)
    _launch(T, dev, _fp8jit.gemm, *args, _stream(T, dev, stream))
    return d


# The binding itself (documented there): a Python function around it cost as much host time as
# the launch. Its common case is read in C++; everything else comes back to _gemm_checked.
gemm = _fp8jit.gemm_tensors


class TuneResult:
    """What tuning one shape found: ``candidates`` (dicts: spec, name, status, median_us, p20_us,
    p80_us, error) in the order timed, and ``best`` (the winner's dict, stored in the tuning
    database and used from now on; None when no candidate passed)."""

    def __init__(self, raw):
        import json

        candidates, best = raw
        self.candidates = [
            {"spec": json.loads(spec), "name": _fp8jit.spec_name(spec), "status": status, "median_us": med,
             "p20_us": p20, "p80_us": p80, "error": error}
            for spec, status, med, p20, p80, error in candidates]
        self.best = None if best is None else self.candidates[best]

    def __repr__(self) -> str:
        if self.best is None:
            return f"TuneResult(no candidate passed of {len(self.candidates)})"
        return f"TuneResult(best={self.best['name']} {self.best['median_us']:.2f} us of {len(self.candidates)})"


def _tune_options(top_k: int, warmup: int, iters: int, jobs: int):
    """The options, checked before any tensor is (the binding checks the ranges again)."""
    for name, v, low in (("top_k", top_k, 0), ("warmup", warmup, 0), ("iters", iters, 1), ("jobs", jobs, 0)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name}: expected an int, got {type(v).__name__}")
        if v < low:
            raise ValueError(f"{name}: {v}, expected {low} or more")
    return top_k, warmup, iters, jobs


def _tune_on(T, device: int, fn, args, options) -> TuneResult:
    # The tuner launches on the legacy default stream, not the caller's: whatever is still
    # producing the operands on another stream must finish first.
    T.torch.cuda.synchronize(device)
    result = []
    _launch(T, device, lambda: result.append(fn(*args, *options)))
    return TuneResult(result[0])


def tune(a, b, scale_a, scale_b, *, scale: str = "block", out_dtype: Any = None, bias: Any = None,
         fast_accum: bool = False, out: Any = None, top_k: int = 32, warmup: int = 3, iters: int = 20,
         jobs: int = 0, max_sms: int = 0) -> TuneResult:
    """Times the ``top_k`` best-ranked kernels of ``gemm``'s problem on these operands (D is
    overwritten; every candidate is checked against a reference), stores the fastest in the
    tuning database (FP8JIT_DB) and uses it from now on. Synchronizes the device. Arguments as
    for ``gemm``; ``jobs`` compile threads (0: the cores, at most 8)."""
    options = _tune_options(top_k, warmup, iters, jobs)
    T = _torch()
    dev, _, args = _gemm_operands(T, a, b, scale_a, scale_b, scale, out_dtype, bias, fast_accum, out, max_sms)
    return _tune_on(T, dev, _fp8jit.tune_gemm, args, options)


def _grouped_operands(T, layout, a, b, scale_a, scale_b, group_rows, expected_m, scale, out_dtype, fast_accum,
                      status, out, max_sms=0):
    """(device, D, the raw binding's arguments but the stream) of checked grouped GEMMs."""
    torch = T.torch
    if layout not in ("contiguous", "masked", "indexed"):
        raise ValueError(f"layout '{layout}': expected 'contiguous', 'masked' or 'indexed'")
    dev = _check_cuda(T, a, "a")
    _check_cuda(T, b, "b", dev)
    if b.dim() != 3 or not b.is_contiguous():
        raise ValueError(f"b: shape {tuple(b.shape)} strides {b.stride()}, expected a contiguous [G, N, K]")
    groups, n, k = (int(v) for v in b.shape)
    masked = layout == "masked"
    if masked and (a.dim() != 3 or int(a.shape[0]) != groups or not a.is_contiguous()):
        raise ValueError(f"a: shape {tuple(a.shape)}, expected a contiguous [{groups}, M_max, {k}] (masked)")
    a2 = a.reshape(-1, int(a.shape[-1])) if masked else a
    fa, fb = _fp8_name(T, a.dtype, "a"), _fp8_name(T, b.dtype, "b")
    lda = _rows(a2, "a")
    if int(a2.shape[1]) != k:
        raise ValueError(f"a: K = {int(a2.shape[1])}, b's K = {k}")
    rows = int(a2.shape[0])
    m = rows // groups if masked else rows
    _check_cuda(T, group_rows, "group_rows", dev)
    want = {"contiguous": groups + 1, "masked": groups, "indexed": rows}[layout]
    if group_rows.dtype != torch.int32 or group_rows.numel() != want or not group_rows.is_contiguous():
        raise ValueError(f"group_rows: {group_rows.dtype} {tuple(group_rows.shape)}, expected a contiguous "
                         f"torch.int32 ({want},) for layout '{layout}'")
    if status is not None:
        _check_cuda(T, status, "status", dev)
        if status.dtype != torch.int32 or status.numel() < 1:
            raise ValueError(f"status: {status.dtype} {tuple(status.shape)}, expected torch.int32 (1,)")
    la, lb, na, nb = _gemm_scales(T, scale, scale_a, scale_b.reshape(-1, *scale_b.shape[2:])
                                  if scale_b.dim() == 3 else scale_b, rows, n, k, groups, dev)
    shape = (groups, m, n) if masked else (m, n)
    d, out_name = _output(T, out, torch.bfloat16 if out_dtype is None else out_dtype, shape, dev)
    if not d.is_contiguous():
        raise ValueError(f"out: strides {d.stride()}, expected contiguous")
    return dev, d, (layout, groups, _ptr(group_rows), _ptr(a2), fa, lda, _ptr(b), fb, k, _ptr(d), out_name, n, m, n,
                    k, expected_m, scale, _ptr(scale_a), na, la, _ptr(scale_b), nb, lb, _ptr(status), fast_accum,
                    _max_sms(max_sms))


def grouped_gemm(layout: str, a, b, scale_a, scale_b, group_rows, *, expected_m: int = 0, scale: str = "block",
                 out_dtype: Any = None, fast_accum: bool = False, status: Any = None, out: Any = None,
                 stream: Any = None, max_sms: int = 0):
    """Mixture-of-experts GEMMs in one launch, B [G, N, K] one weight per expert (FP8, K
    contiguous). ``layout``: 'contiguous' (A [M, K], group_rows G+1 int32 row offsets), 'indexed'
    (A [M, K], group_rows M int32 expert per row, -1 padding, groups starting on 128-row chunks)
    or 'masked' (A [G, M_max, K], group_rows G int32 valid rows per group). Scales as for
    ``gemm`` over all of A's rows, B's one set per expert. ``expected_m``: the rows per group the
    kernel is chosen for (0: derived from the shapes). ``status``: optional int32 [1] CUDA tensor
    the kernel ORs clamping flags into. ``max_sms`` as for ``gemm``. Returns D ([M, N], masked
    [G, M_max, N])."""
    T = _torch()
    dev, d, args = _grouped_operands(T, layout, a, b, scale_a, scale_b, group_rows, expected_m, scale, out_dtype,
                                     fast_accum, status, out, max_sms)
    _launch(T, dev, _fp8jit.grouped_gemm, *args, _stream(T, dev, stream))
    return d


def tune_grouped(layout: str, a, b, scale_a, scale_b, group_rows, *, expected_m: int = 0, scale: str = "block",
                 out_dtype: Any = None, fast_accum: bool = False, out: Any = None, top_k: int = 32, warmup: int = 3,
                 iters: int = 20, jobs: int = 0, max_sms: int = 0, more_group_rows: Any = ()) -> TuneResult:
    """``tune`` for ``grouped_gemm``: keyed by layout, group count, expected rows per group, N and
    K. The group table must be one the kernel would not clamp (every candidate is checked group
    by group). ``more_group_rows``: more tables like ``group_rows`` (other routings of the same
    shape) on which every candidate is timed too; its time is then the geometric mean over all,
    so that the winner holds for each routing (only ``group_rows`` is checked)."""
    options = _tune_options(top_k, warmup, iters, jobs)
    if isinstance(more_group_rows, (str, bytes)) or not hasattr(more_group_rows, "__iter__"):
        raise ValueError(f"more_group_rows: expected a sequence of tensors, got {type(more_group_rows).__name__}")
    more_group_rows = list(more_group_rows)
    T = _torch()
    dev, _, args = _grouped_operands(T, layout, a, b, scale_a, scale_b, group_rows, expected_m, scale, out_dtype,
                                     fast_accum, None, out, max_sms)
    more = []
    for i, t in enumerate(more_group_rows):
        _check_cuda(T, t, f"more_group_rows[{i}]", dev)
        if t.dtype != group_rows.dtype or t.shape != group_rows.shape or not t.is_contiguous():
            raise ValueError(f"more_group_rows[{i}]: {t.dtype} {tuple(t.shape)}, expected a contiguous "
                             f"{group_rows.dtype} {tuple(group_rows.shape)} as group_rows")
        more.append(_ptr(t))
    return _tune_on(T, dev, _fp8jit.tune_grouped_gemm, args, options + (more,))
