/* fp8jit C API: run-time generated FP8 kernels for NVIDIA Hopper, callable from C (C99) and any
 * language with a C FFI.
 *
 * It is a thin layer over the C++ API (fp8jit/runtime.hpp): the same argument structs, field by
 * field, the same checks and the same error messages. Differences:
 *  - Every function returns an fp8jit_status; no C++ exception ever crosses this interface.
 *  - A failing call records a message for the calling thread: fp8jit_last_error() returns it
 *    (and fp8jit_get_last_status() its status). A successful call does NOT clear it: the message
 *    stays until the thread's next failure or fp8jit_clear_last_error(). So read it right after
 *    the call that failed.
 *  - Kernels are cached in an opaque fp8jit_runtime handle (one per process is the usual choice;
 *    a handle may be used from several threads at once).
 *  - Booleans are ints (0 = false, anything else = true).
 *
 * All tensor pointers are device pointers (cudaMalloc / cuMemAlloc). Streams are CUstream or
 * cudaStream_t values (the same type, struct CUstream_st*); NULL is the legacy default stream.
 *
 *   fp8jit_runtime* rt;
 *   fp8jit_quantize_args a;
 *   if (fp8jit_runtime_create(&rt) != FP8JIT_SUCCESS) { puts(fp8jit_last_error()); ... }
 *   fp8jit_quantize_args_init(&a);             // the C++ defaults: bf16 -> e4m3, 1x128, row_major
 *   a.x = x; a.m = m; a.k = k; a.q = q; a.scales = scales;
 *   if (fp8jit_quantize(rt, &a, stream) != FP8JIT_SUCCESS) { puts(fp8jit_last_error()); ... }
 *   fp8jit_runtime_destroy(rt);
 *
 * Link with the fp8jit library: the shared libfp8jit.so brings its own dependencies; the static
 * libfp8jit.a needs a C++ link (a C++ compiler driver, or `pkg-config --static --libs fp8jit`).
 * FP8JIT_VERSION_STRING (fp8jit/version.hpp) is the headers' version, fp8jit_version() the
 * library's.
 */
#ifndef FP8JIT_FP8JIT_H_
#define FP8JIT_FP8JIT_H_

#include <stddef.h>
#include <stdint.h>

#include "fp8jit/export.hpp"
#include "fp8jit/version.hpp"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA stream type: identical to CUstream (cuda.h) and cudaStream_t (cuda_runtime.h). */
typedef struct CUstream_st* fp8jit_stream_t;

/* ---- status ------------------------------------------------------------------------------ */

typedef enum fp8jit_status {
  FP8JIT_SUCCESS = 0,
  FP8JIT_ERROR_INVALID_ARGUMENT = 1, /* bad input from the caller: nothing was launched */
  FP8JIT_ERROR_UNSUPPORTED = 2,      /* valid, but this build or GPU cannot serve it (not sm_90) */
  FP8JIT_ERROR_COMPILE = 3,          /* NVRTC rejected generated source (the message has the log) */
  FP8JIT_ERROR_DRIVER = 4,           /* the CUDA driver failed or is missing (no libcuda, no GPU) */
  FP8JIT_ERROR_IO = 5,               /* disk cache / database / file trouble */
  FP8JIT_ERROR_INTERNAL = 6          /* a bug in fp8jit, or out of memory */
} fp8jit_status;

/* ---- value types (the values equal the C++ enums') ------------------------------------------ */

typedef enum fp8jit_dtype {
  FP8JIT_DTYPE_BF16 = 0,
  FP8JIT_DTYPE_FP16 = 1,
  FP8JIT_DTYPE_FP32 = 2
} fp8jit_dtype;

/* E4M3 is "e4m3fn" (max 448, no inf); E5M2 has max 57344 and inf. */
typedef enum fp8jit_fp8_format {
  FP8JIT_FP8_E4M3 = 0,
  FP8JIT_FP8_E5M2 = 1
} fp8jit_fp8_format;

/* Which elements share one scale. */
typedef enum fp8jit_granularity {
  FP8JIT_GRANULARITY_TENSOR = 0,   /* one scale for the whole tensor */
  FP8JIT_GRANULARITY_ROW = 1,      /* one scale per row (per token) */
  FP8JIT_GRANULARITY_GROUP128 = 2, /* 1x128: per 128 consecutive elements of a row */
  FP8JIT_GRANULARITY_BLOCK128 = 3  /* 128x128 tiles */
} fp8jit_granularity;

/* row_major: scale (r, g) at r * G + g. col_major_tma: at g * align4(R) + r (what Hopper GEMMs
 * read with TMA: DeepGEMM, cuBLASLt VEC128). */
typedef enum fp8jit_scale_layout {
  FP8JIT_SCALE_LAYOUT_ROW_MAJOR = 0,
  FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA = 1
} fp8jit_scale_layout;

/* How the GEMM operands are scaled. */
typedef enum fp8jit_scale_mode {
  FP8JIT_SCALE_MODE_TENSOR = 0,  /* one fp32 scale per operand */
  FP8JIT_SCALE_MODE_ROWWISE = 1, /* per row of A (M floats) and per row of B (N floats) */
  FP8JIT_SCALE_MODE_BLOCK = 2,   /* A per 1x128 group, B per 128x128 block (DeepSeek-V3) */
  FP8JIT_SCALE_MODE_GROUP = 3    /* A and B per 1x128 group (weight gradients) */
} fp8jit_scale_mode;

/* How a GEMM's rows are cut into groups, each multiplied by its own B (mixture-of-experts). */
typedef enum fp8jit_gemm_layout {
  FP8JIT_LAYOUT_DENSE = 0,      /* one GEMM (fp8jit_gemm) */
  FP8JIT_LAYOUT_CONTIGUOUS = 1, /* A [m, k]: the groups' rows one after another, by offsets */
  FP8JIT_LAYOUT_MASKED = 2,     /* A [groups * m, k]: group g's first masked_m[g] of m rows */
  FP8JIT_LAYOUT_INDEXED = 3     /* A [m, k]: row r is group m_indices[r]'s (-1: padding), each
                                   group's rows starting at a multiple of 128 rows */
} fp8jit_gemm_layout;

/* Bits a grouped GEMM ORs into its optional status word when it clamped the group table. */
#define FP8JIT_GEMM_GROUP_OFFSETS_CLAMPED 1 /* contiguous: an offset out of [0, m] or descending */
#define FP8JIT_GEMM_MASKED_ROWS_CLAMPED 2   /* masked: a masked_m out of [0, m] */
#define FP8JIT_GEMM_ROW_INDICES_INVALID 4   /* indexed: an index out of [-1, groups), or a group's
                                               rows not starting a 128-row chunk (unwritten) */

/* ---- argument structs: fill with fp8jit_*_args_init, then set the fields you need ---------- */

/* x [m, k] (row stride ldx elements) -> q [m, k] FP8 (row stride ldq bytes) and fp32 scales.
 * ld* = 0 means dense (k, or m for the transposed output). */
typedef struct fp8jit_quantize_args {
  const void* x;
  fp8jit_dtype input;               /* default BF16 */
  int64_t m, k, ldx;
  void* q;
  fp8jit_fp8_format format;         /* default E4M3 */
  int64_t ldq;
  float* scales;                    /* fp8jit_scale_count(granularity, scale_layout, m, k) floats */
  fp8jit_granularity granularity;   /* default GROUP128 */
  fp8jit_scale_layout scale_layout; /* default ROW_MAJOR */
  int pow2_scale;                   /* round scales up to powers of two */
  const float* static_scale;        /* per-tensor only: use this scale instead of the amax */
  /* Optional transposed output qt [k, m] (row stride ldqt). For 1x128 it is scaled by 1x128
   * groups of the transpose into scales_t; otherwise it shares `scales`. */
  void* qt;
  int64_t ldqt;
  float* scales_t;                  /* 1x128 only: fp8jit_scale_count(GROUP128, layout, k, m) */
  float* amax;                      /* optional: max |x| over the tensor (NaNs ignored) */
  /* Optional (NULL by default): k floats written with the fp32 sum over the m rows of each column
   * of x (the bias gradient when x is dY); needs qt. See QuantizeArgs::column_sums. */
  float* column_sums;
} fp8jit_quantize_args;

/* q [m, k] FP8 and scales -> y [m, k] (row stride ldy elements). */
typedef struct fp8jit_dequantize_args {
  const void* q;
  fp8jit_fp8_format format;         /* default E4M3 */
  int64_t m, k, ldq;
  const float* scales;
  fp8jit_granularity granularity;   /* default BLOCK128 */
  fp8jit_scale_layout scale_layout; /* default ROW_MAJOR */
  void* y;
  fp8jit_dtype output;              /* default BF16 */
  int64_t ldy;
} fp8jit_dequantize_args;

/* D [m, n] = (A [m, k] scaled) . (B [n, k] scaled)^T (+ bias [n]). A and B are FP8 and K-major
 * (rows of K bytes; K a multiple of 16); D is row-major. Leading dimensions in elements, 0 =
 * dense. Scale sizes are in floats and are checked against the shape: block mode needs
 * fp8jit_scale_count(GROUP128, scale_a_layout, m, k) and (BLOCK128, scale_b_layout, n, k). */
typedef struct fp8jit_gemm_args {
  const void* a;
  fp8jit_fp8_format a_format;         /* default E4M3 */
  int64_t lda;
  const void* b;
  fp8jit_fp8_format b_format;         /* default E4M3 */
  int64_t ldb;
  void* d;
  fp8jit_dtype d_dtype;               /* default BF16 */
  int64_t ldd;
  int64_t m, n, k;
  fp8jit_scale_mode scale_mode;       /* default BLOCK */
  const float* scale_a;
  int64_t scale_a_size;
  fp8jit_scale_layout scale_a_layout; /* default COL_MAJOR_TMA */
  const float* scale_b;
  int64_t scale_b_size;
  fp8jit_scale_layout scale_b_layout; /* default ROW_MAJOR */
  const void* bias;                   /* [n] in d_dtype, or NULL */
  int fast_accum;                     /* tensor/rowwise only */
} fp8jit_gemm_args;

/* Grouped GEMMs for mixture-of-experts layers (fp8jit::GroupedGemmArgs): for every group g, its
 * rows of D = (its rows of A scaled) . (B_g scaled)^T, in one launch that reads the group table
 * on the device (so a captured CUDA graph serves any routing). B is [groups * n, k] (B_g: rows
 * g * n ..); D has A's rows. contiguous: group_rows holds groups + 1 ascending int32 offsets into
 * A [m, k]; masked: group_rows holds groups int32 counts (masked_m), each group owning m rows of
 * A [groups * m, k]; indexed: group_rows holds m int32 group indices of A [m, k]'s rows (-1:
 * padding), each group's rows starting at a multiple of 128 rows (DeepGEMM's m_indices). Rows
 * outside every group are not written. A's scales cover all of A's rows;
 * B's are one set per group, one after another. A table out of range is clamped on the device
 * and reported in *status (FP8JIT_GEMM_*_CLAMPED, _INVALID bits) when status is not NULL. */
typedef struct fp8jit_grouped_gemm_args {
  fp8jit_gemm_layout layout;          /* default CONTIGUOUS */
  int64_t groups;
  const int* group_rows;              /* device int32 */
  const void* a;
  fp8jit_fp8_format a_format;         /* default E4M3 */
  int64_t lda;
  const void* b;
  fp8jit_fp8_format b_format;         /* default E4M3 */
  int64_t ldb;
  void* d;
  fp8jit_dtype d_dtype;               /* default BF16 */
  int64_t ldd;
  int64_t m, n, k;                    /* m: contiguous rows of A; masked M_max per group */
  int64_t expected_m;                 /* rows per group to pick the kernel for; 0: default */
  fp8jit_scale_mode scale_mode;       /* default BLOCK; TENSOR, ROWWISE or BLOCK */
  const float* scale_a;
  int64_t scale_a_size;
  fp8jit_scale_layout scale_a_layout; /* default COL_MAJOR_TMA */
  const float* scale_b;
  int64_t scale_b_size;
  fp8jit_scale_layout scale_b_layout; /* default ROW_MAJOR */
  int* status;                        /* optional device int32 */
  int fast_accum;                     /* tensor/rowwise only */
} fp8jit_grouped_gemm_args;

/* Set every field to the C++ struct's default (pointers NULL, sizes 0). NULL is a no-op. */
FP8JIT_API void fp8jit_quantize_args_init(fp8jit_quantize_args* args);
FP8JIT_API void fp8jit_dequantize_args_init(fp8jit_dequantize_args* args);
FP8JIT_API void fp8jit_gemm_args_init(fp8jit_gemm_args* args);
FP8JIT_API void fp8jit_grouped_gemm_args_init(fp8jit_grouped_gemm_args* args);

/* Mirrors fp8jit::CacheStats. */
typedef struct fp8jit_cache_stats {
  uint64_t memory_hits, memory_misses; /* loaded-kernel lookups */
  uint64_t disk_hits, disk_misses, disk_corrupt, disk_writes;
  uint64_t compiles; /* NVRTC runs */
  double compile_seconds;
} fp8jit_cache_stats;

/* ---- runtime ------------------------------------------------------------------------------ */

/* A kernel cache (compiled and loaded kernels, optionally backed by a disk cache). */
typedef struct fp8jit_runtime fp8jit_runtime;

/* Options from the FP8JIT_* environment variables (fp8jit::RuntimeOptions::from_settings). */
FP8JIT_API fp8jit_status fp8jit_runtime_create(fp8jit_runtime** out);
/* Binary cache in `cache_dir`; NULL or "" disables the disk cache. No tuning database, and the
 * defaults of fp8jit::RuntimeOptions for the rest: no FP8JIT_* variable is read. */
FP8JIT_API fp8jit_status fp8jit_runtime_create_with_cache_dir(const char* cache_dir,
                                                              fp8jit_runtime** out);
/* Options of fp8jit_runtime_create_with_options: fill with fp8jit_runtime_options_init, then set
 * the fields you need. struct_size lets a later fp8jit add fields without breaking callers built
 * against this header. */
typedef struct fp8jit_runtime_options {
  size_t struct_size;    /* sizeof(fp8jit_runtime_options); set by fp8jit_runtime_options_init */
  const char* cache_dir; /* the binary cache directory; NULL or "": no disk cache */
  const char* db_path;   /* the tuning database; NULL or "": none (heuristics only) */
  int jit;               /* 1 (default): a kernel no cache holds is compiled on its first launch;
                            0: that launch fails with FP8JIT_ERROR_UNSUPPORTED, naming the kernel
                            and the shape (serving: precompile first, never compile on a request) */
  int max_sms;           /* the most SMs a GEMM's persistent grid may occupy, leaving the rest to
                            kernels beside it (communication); 0 (default): all of them. Kernels
                            and tuning rows are chosen for the budget. */
  int pdl;               /* 1: programmatic dependent launch (each kernel may start under the
                            previous one in its stream and waits for it on the GPU; hides launch
                            latency between back-to-back kernels); 0 (default): off.
                            fp8jit_runtime_set_pdl changes it later. */
  const char* elementwise_arch; /* NULL or "" (default): quantize and dequantize are built for the
                            GPU present (sm_90a on Hopper, the GPU's own cubin from sm_89, PTX on
                            GPUs newer than NVRTC knows); "compute_<number>" (89 or later): PTX
                            that the driver compiles for whichever GPU loads it. GEMMs are always
                            sm_90a. A struct_size without this field (fp8jit 0.1's layout) leaves
                            it at the default. */
  const char* shipped_tuning_dir; /* NULL (default): the tuned rows installed with this library
                            (share/fp8jit/tuning beside it), consulted after db_path and before
                            the heuristic; "": none; else a folder of `fp8jit db export`
                            documents. A struct_size without this field (an earlier layout,
                            ending at elementwise_arch) leaves it at the default. */
} fp8jit_runtime_options;
/* The defaults of fp8jit::RuntimeOptions (no disk cache, no database, jit on); no FP8JIT_*
 * variable is read. NULL is a no-op. */
FP8JIT_API void fp8jit_runtime_options_init(fp8jit_runtime_options* options);
FP8JIT_API fp8jit_status fp8jit_runtime_create_with_options(const fp8jit_runtime_options* options,
                                                            fp8jit_runtime** out);
/* Frees the handle and its kernels (call after the work queued with it has finished). NULL ok. */
FP8JIT_API void fp8jit_runtime_destroy(fp8jit_runtime* runtime);
/* The disk cache directory ("" when disabled; NULL for a NULL handle). Owned by the handle. */
FP8JIT_API const char* fp8jit_runtime_cache_dir(const fp8jit_runtime* runtime);
/* Programmatic dependent launch for the launches that follow: enabled 1 (on) or 0 (off); any other
 * value is FP8JIT_ERROR_INVALID_ARGUMENT. Safe while other threads launch through the runtime. */
FP8JIT_API fp8jit_status fp8jit_runtime_set_pdl(fp8jit_runtime* runtime, int enabled);

/* Pick the kernel, compile or load it on first use, launch it on `stream` (asynchronous).
 * Arguments are checked before anything is launched. */
FP8JIT_API fp8jit_status fp8jit_quantize(fp8jit_runtime* runtime, const fp8jit_quantize_args* args,
                                         fp8jit_stream_t stream);
FP8JIT_API fp8jit_status fp8jit_dequantize(fp8jit_runtime* runtime,
                                           const fp8jit_dequantize_args* args,
                                           fp8jit_stream_t stream);
FP8JIT_API fp8jit_status fp8jit_gemm(fp8jit_runtime* runtime, const fp8jit_gemm_args* args,
                                     fp8jit_stream_t stream);

/* A grouped GEMM (fp8jit_grouped_gemm_args), and the name of the kernel it would use (as
 * fp8jit_gemm_select). */
FP8JIT_API fp8jit_status fp8jit_grouped_gemm(fp8jit_runtime* runtime,
                                             const fp8jit_grouped_gemm_args* args,
                                             fp8jit_stream_t stream);
FP8JIT_API fp8jit_status fp8jit_grouped_gemm_select(fp8jit_runtime* runtime,
                                                    const fp8jit_grouped_gemm_args* args, char* buf,
                                                    size_t capacity);
/* As fp8jit_gemm_tune for a grouped GEMM: sweeps up to top_k candidates (0: every config) on the
 * GPU with these arguments' tables (D is overwritten), checks each one group by group against a
 * float64 reference, and keeps the winner for this runtime; a runtime with a tuning database
 * (fp8jit_runtime_create: FP8JIT_DB) also stores it there under the layout, the group count and
 * expected_m (0: its default, as for fp8jit_grouped_gemm), where later runtimes find it, also for
 * the nearest tuned expected M. Needs a GPU. */
FP8JIT_API fp8jit_status fp8jit_grouped_gemm_tune(fp8jit_runtime* runtime,
                                                  const fp8jit_grouped_gemm_args* args,
                                                  size_t top_k);
/* As fp8jit_grouped_gemm_tune, each candidate also timed on `table_count` more group tables of
 * the same shape (device int32 arrays laid out as args->group_rows; the kernels clamp what is out
 * of range): its time is the geometric mean of its medians over every table, so that the winner
 * holds for each routing, not one (a masked winner on one draw of rows per group can run 10 %
 * behind another tile on the next). Only args->group_rows is checked against the reference.
 * `tables` may be NULL only with table_count 0; at most 64 tables. Needs a GPU. */
FP8JIT_API fp8jit_status fp8jit_grouped_gemm_tune_on_tables(fp8jit_runtime* runtime,
                                                            const fp8jit_grouped_gemm_args* args,
                                                            size_t top_k, const int* const* tables,
                                                            size_t table_count);

/* The kernel fp8jit_gemm would use for these arguments (tuning database row, nearest tuned M, or
 * the heuristic), as its name, NUL-terminated, into buf (capacity bytes; too small:
 * FP8JIT_ERROR_INVALID_ARGUMENT). Needs no GPU. */
FP8JIT_API fp8jit_status fp8jit_gemm_select(fp8jit_runtime* runtime, const fp8jit_gemm_args* args,
                                            char* buf, size_t capacity);
/* Sweeps up to top_k candidates (0: every config) for this shape on the GPU (D is overwritten),
 * stores the winner in the tuning database and uses it from then on. Needs a GPU. */
FP8JIT_API fp8jit_status fp8jit_gemm_tune(fp8jit_runtime* runtime, const fp8jit_gemm_args* args,
                                          size_t top_k);
/* Compiles, in parallel, the kernels fp8jit_gemm would pick for `count` shapes (m, n, k triples in
 * `mnk`) of the problem described by `problem` (its formats, d_dtype, scale_mode, bias != NULL
 * and fast_accum; pointers and sizes are ignored). Needs no GPU. */
FP8JIT_API fp8jit_status fp8jit_gemm_precompile(fp8jit_runtime* runtime,
                                                const fp8jit_gemm_args* problem, const int64_t* mnk,
                                                size_t count);
/* Compiles every kernel a model will run on one of `tp` tensor-parallel ranks for each of the
 * `count` batch sizes in `ms` (fp8jit::Runtime::model_kernels): `config_json` is the text of its
 * Hugging Face config.json, `problem` as for fp8jit_gemm_precompile. The number of distinct
 * kernels goes to *kernels (may be NULL). Needs no GPU. */
FP8JIT_API fp8jit_status fp8jit_precompile_model(fp8jit_runtime* runtime, const char* config_json,
                                                 const fp8jit_gemm_args* problem, const int64_t* ms,
                                                 size_t count, int tp, size_t* kernels);
FP8JIT_API fp8jit_status fp8jit_runtime_cache_stats(const fp8jit_runtime* runtime,
                                                    fp8jit_cache_stats* out);
FP8JIT_API fp8jit_status fp8jit_runtime_reset_cache_stats(fp8jit_runtime* runtime);

/* Floats a scale tensor holds for an [m, k] tensor (col_major_tma pads its row count to 4). */
FP8JIT_API fp8jit_status fp8jit_scale_count(fp8jit_granularity granularity,
                                            fp8jit_scale_layout layout, int64_t m, int64_t k,
                                            int64_t* out);

/* ---- diagnostics --------------------------------------------------------------------------- */

/* fp8jit's messages (level 1 warning, 2 info: a compile, the kernel chosen for each new shape;
 * 3 debug) go to stderr unless a callback takes them: process-wide, called from any fp8jit
 * thread, one call at a time; `message` lives for the call only. NULL: back to stderr. */
typedef void (*fp8jit_log_callback)(int level, const char* message, void* user);
FP8JIT_API void fp8jit_set_log_callback(fp8jit_log_callback callback, void* user);
/* 0 quiet, 1 warnings (default), 2 info, 3 debug; a runtime created later sets its own. */
FP8JIT_API fp8jit_status fp8jit_set_log_level(int level);

/* ---- errors and version ------------------------------------------------------------------- */

/* The message of the calling thread's most recent failure ("" if none). Valid until the thread's
 * next failing call or fp8jit_clear_last_error(); successful calls leave it alone. */
FP8JIT_API const char* fp8jit_last_error(void);
/* The status of the calling thread's most recent failure (FP8JIT_SUCCESS if none). */
FP8JIT_API fp8jit_status fp8jit_get_last_status(void);
/* Forget the calling thread's last failure. */
FP8JIT_API void fp8jit_clear_last_error(void);
/* A static description of a status ("invalid argument", ...). */
FP8JIT_API const char* fp8jit_status_string(fp8jit_status status);
/* The library version, "MAJOR.MINOR.PATCH". */
FP8JIT_API const char* fp8jit_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FP8JIT_FP8JIT_H_ */
