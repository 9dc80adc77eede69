"""
fp8jit's C++ runtime (plain values; see the fp8jit package for the tensor API)
"""

from collections.abc import Sequence


def spec_name(spec: str) -> str:
    """The kernel's canonical name for a spec (JSON)."""

def emit(spec: str) -> str:
    """The generated CUDA source of a spec (JSON)."""

def compile(spec: str) -> bytes:
    """
    The sm_90a cubin of a spec (JSON), from the disk cache or NVRTC; needs no GPU.
    """

def select_gemm(m: int, n: int, k: int, a_format: str = 'e4m3', b_format: str = 'e4m3', out: str = 'bf16', scale: str = 'block', bias: bool = False, fast_accum: bool = False) -> str:
    """The spec (JSON) gemm() takes for this problem and shape."""

def select_grouped_gemm(layout: str, groups: int, expected_m: int, n: int, k: int, a_format: str = 'e4m3', b_format: str = 'e4m3', out: str = 'bf16', scale: str = 'block', fast_accum: bool = False) -> str:
    """
    The spec (JSON) grouped_gemm() takes for this layout, group count, rows per group, N and K.
    """

def precompile(shapes: Sequence[tuple[int, int, int]], a_format: str = 'e4m3', b_format: str = 'e4m3', out: str = 'bf16', scale: str = 'block', bias: bool = False, fast_accum: bool = False, jobs: int = 0) -> int:
    """
    Compiles the kernels gemm() would take for these (m, n, k) shapes; returns how many compiled.
    """

def precompile_model(config_json: str, ms: Sequence[int], tp: int = 1, a_format: str = 'e4m3', b_format: str = 'e4m3', out: str = 'bf16', scale: str = 'block', jobs: int = 0) -> list[tuple[str, str, int, int]]:
    """
    Compiles every kernel a model (its config.json text) runs for these batch sizes on one of tp ranks; returns (what, spec JSON, smallest M, largest M) per kernel.
    """

def set_log_callback(callback: object | None) -> None:
    """
    fp8jit's messages go to callback(level, message) (1 warning, 2 info, 3 debug), from any thread; None: back to stderr.
    """

def set_log_level(level: int) -> None:
    """0 quiet, 1 warnings (default), 2 info, 3 debug."""

def scale_count(granularity: str, scale_layout: str, rows: int, cols: int) -> int:
    """
    Floats a scale tensor holds for a [rows, cols] tensor (col_major_tma pads rows to 4).
    """

def has_gpu() -> bool:
    """Whether a CUDA driver with a device is present."""

def cache_dir() -> str:
    """The disk cache directory ('' when disabled)."""

def cache_stats() -> dict:
    """The runtime's kernel-cache counters."""

def reset_cache_stats() -> None: ...

def set_pdl(enabled: bool) -> None:
    """Programmatic dependent launch for later launches."""

def pdl() -> bool:
    """Whether programmatic dependent launch is on."""

def quantize(x: int, input: str, m: int, k: int, ldx: int, q: int, format: str, ldq: int, scales: int, granularity: str, scale_layout: str, pow2_scale: bool, static_scale: int, qt: int, ldqt: int, scales_t: int, amax: int, stream: int, arithmetic: str = 'ieee', column_sums: int = 0) -> None:
    """fp8jit::Runtime::quantize on device pointers (QuantizeArgs)."""

def dequantize(q: int, format: str, m: int, k: int, ldq: int, scales: int, granularity: str, scale_layout: str, y: int, output: str, ldy: int, stream: int) -> None:
    """fp8jit::Runtime::dequantize on device pointers (DequantizeArgs)."""

def gemm(a: int, a_format: str, lda: int, b: int, b_format: str, ldb: int, d: int, d_dtype: str, ldd: int, m: int, n: int, k: int, scale_mode: str, scale_a: int, scale_a_size: int, scale_a_layout: str, scale_b: int, scale_b_size: int, scale_b_layout: str, bias: int, fast_accum: bool, max_sms: int, stream: int) -> None:
    """fp8jit::Runtime::gemm on device pointers (GemmArgs)."""

def tune_gemm(a: int, a_format: str, lda: int, b: int, b_format: str, ldb: int, d: int, d_dtype: str, ldd: int, m: int, n: int, k: int, scale_mode: str, scale_a: int, scale_a_size: int, scale_a_layout: str, scale_b: int, scale_b_size: int, scale_b_layout: str, bias: int, fast_accum: bool, max_sms: int, top_k: int, warmup: int, iters: int, jobs: int, more_group_rows: Sequence[int] = []) -> tuple[list[tuple[str, str, float, float, float, str]], int | None]:
    """
    fp8jit::Runtime::tune on device pointers (GemmArgs; D is overwritten): (candidates, best).
    """

def grouped_gemm(layout: str, groups: int, group_rows: int, a: int, a_format: str, lda: int, b: int, b_format: str, ldb: int, d: int, d_dtype: str, ldd: int, m: int, n: int, k: int, expected_m: int, scale_mode: str, scale_a: int, scale_a_size: int, scale_a_layout: str, scale_b: int, scale_b_size: int, scale_b_layout: str, status: int, fast_accum: bool, max_sms: int, stream: int) -> None:
    """fp8jit::Runtime::grouped_gemm on device pointers (GroupedGemmArgs)."""

def tune_grouped_gemm(layout: str, groups: int, group_rows: int, a: int, a_format: str, lda: int, b: int, b_format: str, ldb: int, d: int, d_dtype: str, ldd: int, m: int, n: int, k: int, expected_m: int, scale_mode: str, scale_a: int, scale_a_size: int, scale_a_layout: str, scale_b: int, scale_b_size: int, scale_b_layout: str, status: int, fast_accum: bool, max_sms: int, top_k: int, warmup: int, iters: int, jobs: int, more_group_rows: Sequence[int] = []) -> tuple[list[tuple[str, str, float, float, float, str]], int | None]:
    """
    fp8jit::Runtime::tune on device pointers (GroupedGemmArgs; D is overwritten): (candidates, best).
    """

def gemm_tensors(a: object, b: object, scale_a: object, scale_b: object, *, scale: object = 'block', out_dtype: object | None = None, bias: object | None = None, fast_accum: object = False, out: object | None = None, stream: object | None = None, max_sms: object = 0) -> object:
    """
    D [M, N] = (A [M, K] scaled) @ (B [N, K] scaled)^T (+ bias [N]), A and B FP8 with K
    contiguous. ``scale``: 'block' (A 1x128 [M, ceil(K/128)], row-major or column-major padded to 4
    rows; B 128x128 [ceil(N/128), ceil(K/128)]), 'tensor' (one each), 'rowwise' ([M] and [N]) or
    'group' (1x128 both). ``out_dtype`` torch.bfloat16 (default), float16 or float32; ``out`` a
    preallocated D; ``stream`` a torch.cuda.Stream or a raw handle (default: torch's current).
    ``max_sms``: the most SMs the GEMM may occupy (leaving the rest to kernels beside it); 0: the
    runtime's budget (FP8JIT_MAX_SMS), else all. Returns D.
    """

def torch_reader_loaded() -> bool:
    """
    Whether gemm reads torch tensors through fp8jit._fp8jit_torch (built where torch's headers
    were found) rather than their Python attributes.
    """

def gemm_common(a: object, b: object, scale_a: object, scale_b: object, out: object | None, out_dtype: object | None, scale: object, bias: object | None, fast_accum: bool, max_sms: object, stream: object | None) -> object:
    """
    gemm_tensors' common case alone (D, or None where the checked path would take the call).
    """
