// Support of the C ABI's entry points (runtime/c_api*.cpp): the handle, the calling thread's
// last failure, exceptions turned into statuses, and C enums checked into C++ ones.
#pragma once

#include <cuda.h>
#include <fmt/format.h>

#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/runtime.hpp"
#include "fp8jit/types.hpp"

struct fp8jit_runtime {
  explicit fp8jit_runtime(const fp8jit::RuntimeOptions& options) : runtime(options) {}
  fp8jit::Runtime runtime;
};

namespace fp8jit::c_abi {

// ---- the C enums are the C++ enums, value for value ------------------------------------------

static_assert(std::is_same_v<fp8jit_stream_t, CUstream>, "fp8jit_stream_t must be CUstream");
static_assert(FP8JIT_DTYPE_BF16 == int(DType::bf16) && FP8JIT_DTYPE_FP16 == int(DType::fp16) &&
              FP8JIT_DTYPE_FP32 == int(DType::fp32));
static_assert(FP8JIT_FP8_E4M3 == int(Fp8Format::e4m3) && FP8JIT_FP8_E5M2 == int(Fp8Format::e5m2));
static_assert(FP8JIT_GRANULARITY_TENSOR == int(Granularity::tensor) &&
              FP8JIT_GRANULARITY_ROW == int(Granularity::row) &&
              FP8JIT_GRANULARITY_GROUP128 == int(Granularity::group128) &&
              FP8JIT_GRANULARITY_BLOCK128 == int(Granularity::block128));
static_assert(FP8JIT_SCALE_LAYOUT_ROW_MAJOR == int(ScaleLayout::row_major) &&
              FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA == int(ScaleLayout::col_major_tma));
static_assert(FP8JIT_SCALE_MODE_TENSOR == int(ScaleMode::tensor) &&
              FP8JIT_SCALE_MODE_ROWWISE == int(ScaleMode::rowwise) &&
              FP8JIT_SCALE_MODE_BLOCK == int(ScaleMode::block) &&
              FP8JIT_SCALE_MODE_GROUP == int(ScaleMode::group));

// ---- the calling thread's last failure ----------------------------------------------------------

struct LastError {
  fp8jit_status status = FP8JIT_SUCCESS;
  std::string message;
  const char* fallback = nullptr;  // used when copying the message itself ran out of memory
};

// The calling thread's (one per process: defined in c_api.cpp).
LastError& last() noexcept;

inline fp8jit_status fail(fp8jit_status status, const char* message) noexcept {
  LastError& e = last();
  e.status = status;
  try {
    e.message = message;
    e.fallback = nullptr;
  } catch (...) {
    e.fallback = "out of memory (while recording an fp8jit error message)";
  }
  return status;
}

inline fp8jit_status status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return FP8JIT_ERROR_INVALID_ARGUMENT;
    case ErrorKind::unsupported: return FP8JIT_ERROR_UNSUPPORTED;
    case ErrorKind::compile: return FP8JIT_ERROR_COMPILE;
    case ErrorKind::driver: return FP8JIT_ERROR_DRIVER;
    case ErrorKind::io: return FP8JIT_ERROR_IO;
    case ErrorKind::internal: return FP8JIT_ERROR_INTERNAL;
  }
  return FP8JIT_ERROR_INTERNAL;
}

// Runs fn, mapping every exception to a status and the thread's message.
template <class F>
inline fp8jit_status guarded(F&& fn) noexcept {
  try {
    fn();
    return FP8JIT_SUCCESS;
  } catch (const fp8jit::Error& e) {
    return fail(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(FP8JIT_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(FP8JIT_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(FP8JIT_ERROR_INTERNAL, "unknown exception inside fp8jit");
  }
}

// The same message shape as fp8jit::throw_invalid: "invalid <name> = NULL: <rule>".
[[noreturn]] inline void throw_null(const char* name, const char* function, const char* what) {
  fp8jit::throw_invalid(name, "NULL", fmt::format("{} needs {}", function, what));
}

template <class T>
inline void require(const T* p, const char* name, const char* function, const char* what) {
  if (p == nullptr) throw_null(name, function, what);
}

// ---- C -> C++ conversions (a C enum may hold any int) ------------------------------------------

template <class E>
inline E to_enum(int v, int count, const char* field, const char* names) {
  if (v < 0 || v >= count)
    fp8jit::throw_invalid(field, std::to_string(v), fmt::format("must be one of {}", names));
  return static_cast<E>(v);
}

inline DType dtype(int v, const char* field) {
  return to_enum<DType>(v, FP8JIT_DTYPE_FP32 + 1, field, "FP8JIT_DTYPE_BF16 (0), FP16 (1), FP32 (2)");
}
inline Fp8Format format(int v, const char* field) {
  return to_enum<Fp8Format>(v, FP8JIT_FP8_E5M2 + 1, field, "FP8JIT_FP8_E4M3 (0), E5M2 (1)");
}
inline Granularity granularity(int v, const char* field) {
  return to_enum<Granularity>(v, FP8JIT_GRANULARITY_BLOCK128 + 1, field,
                              "FP8JIT_GRANULARITY_TENSOR (0), ROW (1), GROUP128 (2), BLOCK128 (3)");
}
inline ScaleLayout layout(int v, const char* field) {
  return to_enum<ScaleLayout>(v, FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA + 1, field,
                              "FP8JIT_SCALE_LAYOUT_ROW_MAJOR (0), COL_MAJOR_TMA (1)");
}
inline GemmLayout gemm_layout(int v, const char* field) {
  return to_enum<GemmLayout>(v, FP8JIT_LAYOUT_INDEXED + 1, field,
                             "FP8JIT_LAYOUT_DENSE (0), CONTIGUOUS (1), MASKED (2), INDEXED (3)");
}
inline ScaleMode scale_mode(int v, const char* field) {
  return to_enum<ScaleMode>(v, FP8JIT_SCALE_MODE_GROUP + 1, field,
                            "FP8JIT_SCALE_MODE_TENSOR (0), ROWWISE (1), BLOCK (2), GROUP (3)");
}

// The fields the GEMM argument structs share (fp8jit_gemm_args, fp8jit_grouped_gemm_args and
// their C++ counterparts name them alike): operands, D, the shape, scales and accumulation.
template <class C, class Cpp>
void gemm_fields_to_cpp(const C& c, Cpp& a) {
  a.a = c.a;
  a.a_format = format(c.a_format, "a_format");
  a.lda = c.lda;
  a.b = c.b;
  a.b_format = format(c.b_format, "b_format");
  a.ldb = c.ldb;
  a.d = c.d;
  a.d_dtype = dtype(c.d_dtype, "d_dtype");
  a.ldd = c.ldd;
  a.m = c.m;
  a.n = c.n;
  a.k = c.k;
  a.scale_mode = scale_mode(c.scale_mode, "scale_mode");
  a.scale_a = c.scale_a;
  a.scale_a_size = c.scale_a_size;
  a.scale_a_layout = layout(c.scale_a_layout, "scale_a_layout");
  a.scale_b = c.scale_b;
  a.scale_b_size = c.scale_b_size;
  a.scale_b_layout = layout(c.scale_b_layout, "scale_b_layout");
  a.fast_accum = c.fast_accum != 0;
}

template <class Cpp, class C>
void gemm_fields_to_c(const Cpp& a, C& c) {
  c.a = a.a;
  c.a_format = fp8jit_fp8_format(a.a_format);
  c.lda = a.lda;
  c.b = a.b;
  c.b_format = fp8jit_fp8_format(a.b_format);
  c.ldb = a.ldb;
  c.d = a.d;
  c.d_dtype = fp8jit_dtype(a.d_dtype);
  c.ldd = a.ldd;
  c.m = a.m;
  c.n = a.n;
  c.k = a.k;
  c.scale_mode = fp8jit_scale_mode(a.scale_mode);
  c.scale_a = a.scale_a;
  c.scale_a_size = a.scale_a_size;
  c.scale_a_layout = fp8jit_scale_layout(a.scale_a_layout);
  c.scale_b = a.scale_b;
  c.scale_b_size = a.scale_b_size;
  c.scale_b_layout = fp8jit_scale_layout(a.scale_b_layout);
  c.fast_accum = a.fast_accum ? 1 : 0;
}

}  // namespace fp8jit::c_abi
