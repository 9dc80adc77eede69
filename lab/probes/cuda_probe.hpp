// What the CUDA-driver probes of lab/probes share: a check that exits on a failed driver call,
// the device's context, constant-filled device buffers, and the median time of a call with L2
// flushed before each.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                         \
  do {                                                                      \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                         \
      std::fprintf(stderr, "%s failed: %d\n", #call, static_cast<int>(r_)); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

namespace probe {

// Device 0's primary context, made current (before any other driver call of a probe).
inline void init_device0() {
  CHECK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
}

// `bytes` bytes of `byte` (0x38: E4M3 1.0).
inline CUdeviceptr alloc(std::size_t bytes, unsigned char byte) {
  CUdeviceptr p = 0;
  CHECK(cuMemAlloc(&p, bytes));
  CHECK(cuMemsetD8(p, byte, bytes));
  return p;
}
// `floats` floats of 1.0.
inline CUdeviceptr alloc_ones(std::size_t floats) {
  CUdeviceptr p = 0;
  CHECK(cuMemAlloc(&p, floats * 4));
  CHECK(cuMemsetD32(p, 0x3f800000u, floats));
  return p;
}

// Median µs of `run` over 15 calls after 3 warm-up ones, L2 flushed (a 256 MiB memset of `flush`)
// before each, timed by events on the default stream.
template <class F>
double median_us(F run, CUdeviceptr flush) {
  CUevent a, b;
  CHECK(cuEventCreate(&a, 0));
  CHECK(cuEventCreate(&b, 0));
  std::vector<double> t;
  for (int i = 0; i < 18; ++i) {
    CHECK(cuMemsetD8(flush, static_cast<unsigned char>(i), 256u << 20));
    CHECK(cuEventRecord(a, nullptr));
    run();
    CHECK(cuEventRecord(b, nullptr));
    CHECK(cuEventSynchronize(b));
    float ms = 0;
    CHECK(cuEventElapsedTime(&ms, a, b));
    if (i >= 3) t.push_back(ms * 1e3);
  }
  CHECK(cuEventDestroy(a));
  CHECK(cuEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace probe
