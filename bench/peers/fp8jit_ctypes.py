"""fp8jit's C ABI (include/fp8jit/fp8jit.h) through ctypes, for the peer benchmark.

Only what the benchmark calls: runtime creation, GEMM, kernel selection, precompilation, cache
statistics and scale counts. Standard library only, so that the CPU self-test (selftest.py) can
check the structs against the header and, where a built libfp8jit.so is at hand, call the
functions that need no GPU.

Every struct below mirrors the header field by field, in order: pointers are c_void_p, int64_t is
c_int64, uint64_t c_uint64, double c_double, and enums and booleans are C ints (c_int). ctypes
lays the fields out with the platform C ABI's alignment, so offsets and sizes match a C compiler's
(selftest.py checks them against the header, and against a C compiler where one is installed).
"""
import ctypes
import os

# Enum values of fp8jit.h (they equal the C++ enums').
STATUS_SUCCESS = 0
FP8_E4M3, FP8_E5M2 = 0, 1
DTYPE_BF16, DTYPE_FP16, DTYPE_FP32 = 0, 1, 2
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


class CacheStats(ctypes.Structure):
    """fp8jit_cache_stats."""

    _fields_ = [
        ("memory_hits", ctypes.c_uint64),
        ("memory_misses", ctypes.c_uint64),
        ("disk_hits", ctypes.c_uint64),
        ("disk_misses", ctypes.c_uint64),
        ("disk_corrupt", ctypes.c_uint64),
        ("disk_writes", ctypes.c_uint64),
        ("compiles", ctypes.c_uint64),
        ("compile_seconds", ctypes.c_double),
    ]


class RuntimeOptions(ctypes.Structure):
    """fp8jit_runtime_options (the strings are pointers: Fp8jit keeps their buffers alive)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("cache_dir", ctypes.c_void_p),
        ("db_path", ctypes.c_void_p),
        ("jit", ctypes.c_int),
        ("max_sms", ctypes.c_int),
        ("pdl", ctypes.c_int),
        ("elementwise_arch", ctypes.c_void_p),
        ("shipped_tuning_dir", ctypes.c_void_p),
    ]


# offsetof() of each field and sizeof() on x86-64 (System V), as a C compiler lays out the
# header's structs: the self-test compares the ctypes structs against them, against its own
# layout of the header's declarations, and against a C compiler where one is installed.
GEMM_ARGS_C_LAYOUT = {
    "a": 0, "a_format": 8, "lda": 16, "b": 24, "b_format": 32, "ldb": 40, "d": 48, "d_dtype": 56,
    "ldd": 64, "m": 72, "n": 80, "k": 88, "scale_mode": 96, "scale_a": 104, "scale_a_size": 112,
    "scale_a_layout": 120, "scale_b": 128, "scale_b_size": 136, "scale_b_layout": 144, "bias": 152,
    "fast_accum": 160,
}
GEMM_ARGS_C_SIZE = 168
CACHE_STATS_C_LAYOUT = {
    "memory_hits": 0, "memory_misses": 8, "disk_hits": 16, "disk_misses": 24, "disk_corrupt": 32,
    "disk_writes": 40, "compiles": 48, "compile_seconds": 56,
}
CACHE_STATS_C_SIZE = 64
RUNTIME_OPTIONS_C_LAYOUT = {
    "struct_size": 0, "cache_dir": 8, "db_path": 16, "jit": 24, "max_sms": 28, "pdl": 32,
    "elementwise_arch": 40, "shipped_tuning_dir": 48,
}
RUNTIME_OPTIONS_C_SIZE = 56

# The C structs this module mirrors: header name -> ctypes class (for the self-test).
STRUCTS = {"fp8jit_gemm_args": GemmArgs, "fp8jit_cache_stats": CacheStats,
           "fp8jit_runtime_options": RuntimeOptions}

# Every function this module declares: name -> (restype, argtypes), as fp8jit.h declares them.
# fp8jit_status and the other enums are C ints; fp8jit_stream_t and fp8jit_runtime* are pointers.
_P, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
FUNCTIONS = {
    "fp8jit_version": (ctypes.c_char_p, []),
    "fp8jit_last_error": (ctypes.c_char_p, []),
    "fp8jit_get_last_status": (_INT, []),
    "fp8jit_clear_last_error": (None, []),
    "fp8jit_status_string": (ctypes.c_char_p, [_INT]),
    "fp8jit_runtime_create": (_INT, [ctypes.POINTER(_P)]),
    "fp8jit_runtime_create_with_cache_dir": (_INT, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "fp8jit_runtime_options_init": (None, [ctypes.POINTER(RuntimeOptions)]),
    "fp8jit_runtime_create_with_options": (_INT, [ctypes.POINTER(RuntimeOptions), ctypes.POINTER(_P)]),
    "fp8jit_runtime_destroy": (None, [_P]),
    "fp8jit_runtime_cache_dir": (ctypes.c_char_p, [_P]),
    "fp8jit_gemm_args_init": (None, [ctypes.POINTER(GemmArgs)]),
    "fp8jit_gemm": (_INT, [_P, ctypes.POINTER(GemmArgs), _P]),
    "fp8jit_gemm_select": (_INT, [_P, ctypes.POINTER(GemmArgs), ctypes.c_char_p, ctypes.c_size_t]),
    "fp8jit_gemm_precompile": (_INT, [_P, ctypes.POINTER(GemmArgs), ctypes.POINTER(_I64), ctypes.c_size_t]),
    "fp8jit_runtime_cache_stats": (_INT, [_P, ctypes.POINTER(CacheStats)]),
    "fp8jit_runtime_reset_cache_stats": (_INT, [_P]),
    "fp8jit_scale_count": (_INT, [_INT, _INT, _I64, _I64, ctypes.POINTER(_I64)]),
}


class Fp8jitError(RuntimeError):
    pass


def find_library(root):
    """The first libfp8jit.so under the usual build directories of the repository at root."""
    for d in ("build-peers", "build-gpu", "build-shared", "build"):
        p = os.path.join(root, d, "libfp8jit.so")
        if os.path.isfile(p):
            return p
    return None


class Fp8jit:
    """A loaded libfp8jit.so and one runtime handle (its kernel cache).

    cache_dir None: fp8jit_runtime_create (the FP8JIT_* environment: disk cache, tuning database,
    ...). A string: fp8jit_runtime_create_with_cache_dir (that binary cache, "" for none; no
    tuning database, no FP8JIT_* variable read). shipped_tuning (with cache_dir a string):
    fp8jit_runtime_create_with_options with that cache, no tuning database, and the tuned rows
    shipped with fp8jit taken from that folder ("" for none, INSTALLED_ROWS for the ones beside
    the library)."""

    INSTALLED_ROWS = object()

    def __init__(self, path, cache_dir=None, shipped_tuning=None):
        if not os.path.isfile(path):
            raise Fp8jitError(f"--lib {path}: no such file (build it with `cmake --build BUILD --target "
                              f"fp8jit_shared`; it is BUILD/libfp8jit.so)")
        try:
            self.lib = ctypes.CDLL(os.path.abspath(path))
        except OSError as e:
            raise Fp8jitError(f"--lib {path}: cannot be loaded ({e})") from e
        self.path = os.path.abspath(path)
        self._declare()
        self.version = self.lib.fp8jit_version().decode()
        self.rt = ctypes.c_void_p()
        if shipped_tuning is not None:
            if cache_dir is None:
                raise Fp8jitError("shipped_tuning needs cache_dir as a string (\"\" for no disk cache)")
            options = RuntimeOptions()
            self.lib.fp8jit_runtime_options_init(ctypes.byref(options))
            self._strings = [ctypes.create_string_buffer(cache_dir.encode())]
            options.cache_dir = ctypes.cast(self._strings[0], ctypes.c_void_p)
            if shipped_tuning is not Fp8jit.INSTALLED_ROWS:
                self._strings.append(ctypes.create_string_buffer(str(shipped_tuning).encode()))
                options.shipped_tuning_dir = ctypes.cast(self._strings[-1], ctypes.c_void_p)
            self._check(self.lib.fp8jit_runtime_create_with_options(ctypes.byref(options), ctypes.byref(self.rt)),
                        "fp8jit_runtime_create_with_options")
        elif cache_dir is None:
            self._check(self.lib.fp8jit_runtime_create(ctypes.byref(self.rt)), "fp8jit_runtime_create")
        else:
            self._check(self.lib.fp8jit_runtime_create_with_cache_dir(cache_dir.encode(), ctypes.byref(self.rt)),
                        "fp8jit_runtime_create_with_cache_dir")

    def _declare(self):
        for name, (restype, argtypes) in FUNCTIONS.items():
            try:
                f = getattr(self.lib, name)
            except AttributeError as e:
                raise Fp8jitError(f"{self.path}: no symbol {name} (an older libfp8jit?)") from e
            f.restype = restype
            f.argtypes = argtypes

    def _check(self, status, what):
        if status != STATUS_SUCCESS:
            name = (self.lib.fp8jit_status_string(status) or b"?").decode()
            msg = (self.lib.fp8jit_last_error() or b"").decode(errors="replace")
            self.lib.fp8jit_clear_last_error()
            raise Fp8jitError(f"{what}: {name}: {msg}")

    def close(self):
        if self.rt:
            self.lib.fp8jit_runtime_destroy(self.rt)
            self.rt = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def cache_dir(self):
        v = self.lib.fp8jit_runtime_cache_dir(self.rt)
        return v.decode() if v is not None else None

    def cache_stats(self):
        s = CacheStats()
        self._check(self.lib.fp8jit_runtime_cache_stats(self.rt, ctypes.byref(s)), "fp8jit_runtime_cache_stats")
        return {name: getattr(s, name) for name, _ in CacheStats._fields_}

    def scale_count(self, granularity, layout, m, k):
        out = ctypes.c_int64()
        self._check(self.lib.fp8jit_scale_count(granularity, layout, m, k, ctypes.byref(out)), "fp8jit_scale_count")
        return out.value

    def gemm_args(self, m, n, k, scale_mode, fast_accum=False):
        """Defaults from fp8jit_gemm_args_init (E4M3 operands, bf16 D, A scales col_major_tma, B
        scales row-major), with the shape, scale mode, accumulation and the scale counts they
        imply. Pointers stay NULL: set a, b, d, scale_a, scale_b before fp8jit_gemm."""
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

    def gemm(self, args, stream=0):
        self._check(self.lib.fp8jit_gemm(self.rt, ctypes.byref(args), ctypes.c_void_p(stream or None)),
                    "fp8jit_gemm")

    def select(self, args):
        buf = ctypes.create_string_buffer(1024)
        self._check(self.lib.fp8jit_gemm_select(self.rt, ctypes.byref(args), buf, len(buf)), "fp8jit_gemm_select")
        return buf.value.decode()

    def precompile(self, problem, shapes):
        shapes = [tuple(s) for s in shapes]
        if not shapes:
            return
        flat = [int(v) for s in shapes for v in (s[0], s[1], s[2])]
        arr = (ctypes.c_int64 * len(flat))(*flat)
        self._check(self.lib.fp8jit_gemm_precompile(self.rt, ctypes.byref(problem), arr, len(shapes)),
                    "fp8jit_gemm_precompile")
