"""fp8jit's C ABI (include/fp8jit/fp8jit.h) through ctypes, for the peer benchmark.

Only what the benchmark calls: runtime creation, GEMM, kernel selection, precompilation and scale
counts. Standard library only, so that the CPU self-test can check the struct layout and, where a
built libfp8jit.so is at hand, call the functions that need no GPU.
"""
import ctypes
import os

# Enum values of fp8jit.h (they equal the C++ enums').
FP8_E4M3 = 0
DTYPE_BF16 = 0
GRANULARITY_TENSOR, GRANULARITY_ROW, GRANULARITY_GROUP128, GRANULARITY_BLOCK128 = 0, 1, 2, 3
LAYOUT_ROW_MAJOR, LAYOUT_COL_MAJOR_TMA = 0, 1
SCALE_MODE_TENSOR, SCALE_MODE_ROWWISE, SCALE_MODE_BLOCK, SCALE_MODE_GROUP = 0, 1, 2, 3


class GemmArgs(ctypes.Structure):
    """fp8jit_gemm_args, field by field (enums are C ints, booleans ints)."""

    _fields_ = [
        ("a", ctypes.c_void_p),
        ("a_format", ctypes.c_int),
        ("lda", ctypes.c_int64),
        ("b", ctypes.c_void_p),
        ("b_format", ctypes.c_int),
        ("ldb", ctypes.c_int64),
        ("d", ctypes.c_void_p),
        ("d_dtype", ctypes.c_int),
        ("ldd", ctypes.c_int64),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("scale_mode", ctypes.c_int),
        ("scale_a", ctypes.c_void_p),
        ("scale_a_size", ctypes.c_int64),
        ("scale_a_layout", ctypes.c_int),
        ("scale_b", ctypes.c_void_p),
        ("scale_b_size", ctypes.c_int64),
        ("scale_b_layout", ctypes.c_int),
        ("bias", ctypes.c_void_p),
        ("fast_accum", ctypes.c_int),
    ]


# offsetof() of each field and sizeof(fp8jit_gemm_args) on x86-64, as a C compiler lays out the
# header's struct: the self-test compares GemmArgs against them.
GEMM_ARGS_C_LAYOUT = {
    "a": 0, "a_format": 8, "lda": 16, "b": 24, "b_format": 32, "ldb": 40, "d": 48, "d_dtype": 56,
    "ldd": 64, "m": 72, "n": 80, "k": 88, "scale_mode": 96, "scale_a": 104, "scale_a_size": 112,
    "scale_a_layout": 120, "scale_b": 128, "scale_b_size": 136, "scale_b_layout": 144, "bias": 152,
    "fast_accum": 160,
}
GEMM_ARGS_C_SIZE = 168


class Fp8jitError(RuntimeError):
    pass


class Fp8jit:
    """A loaded libfp8jit.so and one runtime handle (its kernel cache)."""

    def __init__(self, path):
        if not os.path.isfile(path):
            raise Fp8jitError(f"--lib {path}: no such file (build it with `cmake --build BUILD --target "
                              f"fp8jit_shared`; it is BUILD/libfp8jit.so)")
        try:
            self.lib = ctypes.CDLL(os.path.abspath(path))
        except OSError as e:
            raise Fp8jitError(f"--lib {path}: cannot be loaded ({e})") from e
        self._declare()
        self.version = self.lib.fp8jit_version().decode()
        self.rt = ctypes.c_void_p()
        self._check(self.lib.fp8jit_runtime_create(ctypes.byref(self.rt)), "fp8jit_runtime_create")

    def _declare(self):
        L, P, I64 = self.lib, ctypes.c_void_p, ctypes.c_int64
        L.fp8jit_version.restype = ctypes.c_char_p
        L.fp8jit_last_error.restype = ctypes.c_char_p
        L.fp8jit_status_string.restype = ctypes.c_char_p
        L.fp8jit_status_string.argtypes = [ctypes.c_int]
        L.fp8jit_runtime_create.argtypes = [ctypes.POINTER(P)]
        L.fp8jit_runtime_destroy.argtypes = [P]
        L.fp8jit_gemm_args_init.argtypes = [ctypes.POINTER(GemmArgs)]
        L.fp8jit_gemm_args_init.restype = None
        L.fp8jit_gemm.argtypes = [P, ctypes.POINTER(GemmArgs), P]
        L.fp8jit_gemm_select.argtypes = [P, ctypes.POINTER(GemmArgs), ctypes.c_char_p, ctypes.c_size_t]
        L.fp8jit_gemm_precompile.argtypes = [P, ctypes.POINTER(GemmArgs), ctypes.POINTER(I64), ctypes.c_size_t]
        L.fp8jit_scale_count.argtypes = [ctypes.c_int, ctypes.c_int, I64, I64, ctypes.POINTER(I64)]

    def _check(self, status, what):
        if status != 0:
            name = self.lib.fp8jit_status_string(status).decode()
            msg = self.lib.fp8jit_last_error().decode(errors="replace")
            raise Fp8jitError(f"{what}: {name}: {msg}")

    def close(self):
        if self.rt:
            self.lib.fp8jit_runtime_destroy(self.rt)
            self.rt = ctypes.c_void_p()

    def scale_count(self, granularity, layout, m, k):
        out = ctypes.c_int64()
        self._check(self.lib.fp8jit_scale_count(granularity, layout, m, k, ctypes.byref(out)), "fp8jit_scale_count")
        return out.value

    def gemm_args(self, m, n, k, scale_mode, fast_accum=False):
        """Defaults from fp8jit_gemm_args_init (E4M3 operands, bf16 D, A scales col_major_tma, B
        scales row-major), with the shape, scale mode and the scale counts it implies."""
        args = GemmArgs()
        self.lib.fp8jit_gemm_args_init(ctypes.byref(args))
        args.m, args.n, args.k = m, n, k
        args.scale_mode = scale_mode
        args.fast_accum = 1 if fast_accum else 0
        if scale_mode == SCALE_MODE_BLOCK:
            args.scale_a_size = self.scale_count(GRANULARITY_GROUP128, args.scale_a_layout, m, k)
            args.scale_b_size = self.scale_count(GRANULARITY_BLOCK128, args.scale_b_layout, n, k)
        elif scale_mode == SCALE_MODE_TENSOR:
            args.scale_a_size = args.scale_b_size = 1
        else:
            raise Fp8jitError(f"scale mode {scale_mode}: the peer benchmark runs block and tensor only")
        return args

    def gemm(self, args, stream):
        self._check(self.lib.fp8jit_gemm(self.rt, ctypes.byref(args), ctypes.c_void_p(stream)), "fp8jit_gemm")

    def select(self, args):
        buf = ctypes.create_string_buffer(512)
        self._check(self.lib.fp8jit_gemm_select(self.rt, ctypes.byref(args), buf, len(buf)), "fp8jit_gemm_select")
        return buf.value.decode()

    def precompile(self, problem, shapes):
        flat = [v for s in shapes for v in (s[0], s[1], s[2])]
        arr = (ctypes.c_int64 * len(flat))(*flat)
        self._check(self.lib.fp8jit_gemm_precompile(self.rt, ctypes.byref(problem), arr, len(shapes)),
                    "fp8jit_gemm_precompile")
