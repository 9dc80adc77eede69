#include "tests/common/gpu_env.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

#include "fp8jit/fp8.hpp"

namespace fp8jit::test {

std::string gpu_unavailable_reason() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return "no CUDA GPU on this machine";
  }
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  if (p.major != 9) return "GPU " + std::string(p.name) + " is not Hopper (compute capability 9.0)";
  return "";
}

DeviceMem::DeviceMem(std::size_t bytes) : bytes_(bytes) {
  if (cudaMalloc(&ptr_, bytes ? bytes : 16) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
}
DeviceMem::~DeviceMem() { cudaFree(ptr_); }
void DeviceMem::poison(unsigned char byte) {
  if (cudaMemset(ptr_, byte, bytes_) != cudaSuccess) throw std::runtime_error("cudaMemset failed");
}
void DeviceMem::upload(const void* host, std::size_t bytes) {
  if (cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("upload failed");
}
std::vector<unsigned char> DeviceMem::download() const {
  std::vector<unsigned char> h(bytes_);
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("kernel failed (cudaDeviceSynchronize)");
  if (cudaMemcpy(h.data(), ptr_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("download failed");
  return h;
}

std::vector<unsigned char> random_tensor(std::int64_t rows, std::int64_t ld, std::int64_t cols, DType t,
                                         unsigned seed, bool edge) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 999);
  std::vector<unsigned char> h(static_cast<std::size_t>(rows * ld) * dtype_size(t));
  const float inf = std::numeric_limits<float>::infinity();
  // A zero block of rows and columns so that whole 1x128 groups, 128x128 tiles and rows are zero.
  const std::int64_t zero_row = rows > 3 ? rows / 3 : -1;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < ld; ++c) {
      float v = normal(rng) * std::ldexp(1.0f, static_cast<int>(r % 7) - 3);
      if (edge) {
        const int e = pick(rng);
        if (r == zero_row || (c >= 128 && c < 256 && r % 5 == 0)) v = 0.0f;
        else if (e == 0) v = std::numeric_limits<float>::quiet_NaN();
        else if (e == 1) v = inf;
        else if (e == 2) v = -inf;
        else if (e < 8) v = std::ldexp(normal(rng), -130);  // fp32 subnormals (bf16: tiny normals)
        else if (e < 12) v *= 1e5f;                          // far above the FP8 max
      }
      if (c >= cols) v = 1e30f;  // padding between rows must never leak into a result
      fp8::store_from_float(h.data(), static_cast<std::size_t>(r * ld + c), t, v);
    }
  return h;
}

}  // namespace fp8jit::test
