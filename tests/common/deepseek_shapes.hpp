// DeepSeek-V3's GEMM shapes from the shared shape list (../shared/shapes/deepseek_v3.csv beside
// the source tree), for tests that check defaults or compile kernels for real shapes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fp8jit::test {

struct Shape {
  std::int64_t m, n, k;
};

// The shapes in file order; empty where the file is absent (callers skip); a malformed line is
// a test failure.
inline std::vector<Shape> deepseek_shapes() {
  std::ifstream in(std::string(FP8JIT_SOURCE_DIR) + "/../shared/shapes/deepseek_v3.csv");
  std::vector<Shape> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("m,", 0) == 0) continue;
    std::istringstream fields(line);
    Shape s{};
    char c1 = 0, c2 = 0;
    if (fields >> s.m >> c1 >> s.n >> c2 >> s.k && c1 == ',' && c2 == ',')
      out.push_back(s);
    else
      ADD_FAILURE() << "bad line in deepseek_v3.csv: " << line;
  }
  return out;
}

}  // namespace fp8jit::test
