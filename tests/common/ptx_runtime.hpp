// A runtime that builds quantize and dequantize as compute_89 PTX (what Ada GPUs, and GPUs newer
// than this NVRTC, run; RuntimeOptions::elementwise_arch), with a disk cache of its own, so that
// the GPU tests run that build on the lent Hopper GPU and can see what it stored.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fp8jit/runtime.hpp"

namespace fp8jit::test {

inline RuntimeOptions compute89_options(const std::string& cache_dir) {
  RuntimeOptions o;
  o.cache_dir = cache_dir;
  o.db_path.clear();
  o.elementwise_arch = "compute_89";
  return o;
}

// The binaries stored under `cache_dir`, each checked to be compute_89 PTX (no sm_90a code).
inline int expect_only_compute89_ptx(const std::string& cache_dir) {
  int binaries = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache_dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(bytes.find(".target sm_89"), std::string::npos) << e.path();
    EXPECT_EQ(bytes.find(".target sm_90a"), std::string::npos) << e.path();
    ++binaries;
  }
  return binaries;
}

}  // namespace fp8jit::test
