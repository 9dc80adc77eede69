// Basic definitions shared by every device header. NVRTC-safe: includes no system header, so
// generated kernels compile in a fraction of a second and need no CUDA include path.
#pragma once

#define FP8JIT_DEVICE __device__ __forceinline__

namespace fp8jit {
namespace dev {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// Element types of high-precision tensors; values match fp8jit::DType on the host.
enum Elem { kBF16 = 0, kFP16 = 1, kFP32 = 2 };
// FP8 formats; values match fp8jit::Fp8Format.
enum Fp8 { kE4M3 = 0, kE5M2 = 1 };
// Scale granularities; values match fp8jit::Granularity.
enum Gran { kTensor = 0, kRow = 1, kGroup128 = 2, kBlock128 = 3 };

constexpr int kWarpSize = 32;
// Scales cover 128 elements along a dimension for the 1x128 and 128x128 recipes.
constexpr int kScaleGroup = 128;

template <int E> struct ElemSize;
template <> struct ElemSize<kBF16> { static constexpr int value = 2; };
template <> struct ElemSize<kFP16> { static constexpr int value = 2; };
template <> struct ElemSize<kFP32> { static constexpr int value = 4; };

}  // namespace dev
}  // namespace fp8jit
