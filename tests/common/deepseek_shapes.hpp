// DeepSeek-V3's GEMM shapes from the project's shape suite (bench/shapes/deepseek_v3.csv, the
// suite `fp8jit bench --suite deepseek-v3` runs), for tests that check defaults or compile
// kernels for real shapes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fp8jit::test {

inline constexpr const char* kDeepseekShapesCsv = FP8JIT_SOURCE_DIR "/bench/shapes/deepseek_v3.csv";

struct Shape {
  std::int64_t m, n, k;
};

// The shapes in file order. The file is part of the repository, so a missing or empty file, or a
// malformed line, is a test failure (the result is then empty or short).
inline std::vector<Shape> deepseek_shapes() {
  std::ifstream in(kDeepseekShapesCsv);
  if (!in) {
    ADD_FAILURE() << "cannot read " << kDeepseekShapesCsv;
    return {};
  }
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
      ADD_FAILURE() << "bad line in " << kDeepseekShapesCsv << ": " << line;
  }
  if (out.empty()) ADD_FAILURE() << "no m,n,k rows in " << kDeepseekShapesCsv;
  return out;
}

}  // namespace fp8jit::test
