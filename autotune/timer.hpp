// Device memory and GPU timing over the run-time loaded driver (no CUDA runtime dependency):
// used by the autotuner, the CLI and the benchmarks of the `fp8jit` commands.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace fp8jit {

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  float* f32() const { return reinterpret_cast<float*>(ptr_); }
  std::size_t size() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void fill(unsigned char byte);  // synchronous

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// Milliseconds of `fn` for each of `iters` runs after `warmup` runs, each run preceded by a
// write of a buffer larger than L2 so that no run reads its inputs from the previous one's cache.
std::vector<double> time_samples_ms(const std::function<void()>& fn, int warmup, int iters);
double time_median_ms(const std::function<void()>& fn, int warmup, int iters);

// Median milliseconds of a device-to-device copy of `bytes` (read + write = 2 * bytes moved).
double copy_median_ms(std::size_t bytes, int iters);

}  // namespace fp8jit
