// GPU test support: skip cleanly without a Hopper GPU, device buffers, random tensors.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fp8jit/types.hpp"

namespace fp8jit::test {

// "" when a compute capability 9.0 GPU is usable, else why not.
std::string gpu_unavailable_reason();

#define FP8JIT_REQUIRE_GPU()                                          \
  do {                                                                \
    const std::string why_ = ::fp8jit::test::gpu_unavailable_reason(); \
    if (!why_.empty()) GTEST_SKIP() << why_;                          \
  } while (0)

#define CUDA_OK(expr) ASSERT_EQ(cudaSuccess, (expr)) << #expr

class DeviceMem {
 public:
  explicit DeviceMem(std::size_t bytes);
  ~DeviceMem();
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  void* get() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  std::size_t size() const { return bytes_; }
  void poison(unsigned char byte = 0xA5);
  void upload(const void* host, std::size_t bytes);
  std::vector<unsigned char> download() const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Random high-precision data: normal values with outliers, and (when `edge`) zeros groups, NaN,
// +-inf, subnormals and values above the FP8 max sprinkled in.
std::vector<unsigned char> random_tensor(std::int64_t rows, std::int64_t ld, std::int64_t cols, DType t,
                                         unsigned seed, bool edge);

}  // namespace fp8jit::test
