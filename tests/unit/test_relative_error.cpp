// reference::relative_error, the check behind every GEMM test and every tuning candidate: the
// Frobenius error of D against the float64 reference for each output type and a row stride wider
// than N, +inf for a NaN or inf anywhere (also in the last, partial chunk of rows), and the same
// value whether it runs on one thread (small D) or many.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit {
namespace {

struct Case {
  std::vector<unsigned char> d;  // D in `dtype`, row stride ldd
  std::vector<double> ref;       // dense [m, n]
  std::int64_t m, n, ldd;
  DType dtype;
};

Case random_case(DType dtype, std::int64_t m, std::int64_t n, std::int64_t ldd, unsigned seed) {
  Case c{std::vector<unsigned char>(static_cast<std::size_t>(m * ldd) * dtype_size(dtype)),
         std::vector<double>(static_cast<std::size_t>(m * n)), m, n, ldd, dtype};
  std::mt19937 rng(seed);
  std::normal_distribution<double> value(0.0, 3.0), noise(0.0, 0.01);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < ldd; ++j) {
      const double r = value(rng);
      // Columns past N hold garbage the check must not read: a NaN would show.
      fp8::store_from_float(c.d.data(), static_cast<std::size_t>(i * ldd + j), dtype,
                            j < n ? static_cast<float>(r + noise(rng)) : NAN);
      if (j < n) c.ref[static_cast<std::size_t>(i * n + j)] = r;
    }
  return c;
}

// The definition, element by element in row order: what the chunked sum must agree with.
double serial(const Case& c) {
  double err = 0, norm = 0;
  for (std::int64_t i = 0; i < c.m; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) {
      const double x = fp8::load_as_float(c.d.data(), static_cast<std::size_t>(i * c.ldd + j), c.dtype);
      const double r = c.ref[static_cast<std::size_t>(i * c.n + j)];
      err += (x - r) * (x - r), norm += r * r;
    }
  return std::sqrt(err / norm);
}

double checked(const Case& c) {
  return reference::relative_error(c.d.data(), c.ldd, c.dtype, c.ref.data(), c.m, c.n);
}

TEST(RelativeError, MatchesTheDefinitionForEveryOutputType) {
  // 3 x 5 runs on the calling thread, 1100 x 1000 on every core (over 2^20 elements, 18 chunks
  // of rows, the last one partial).
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
    for (auto [m, n, ldd] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{3, 5, 8}, {1100, 1000, 1008}}) {
      SCOPED_TRACE(testing::Message() << to_string(dtype) << " " << m << "x" << n);
      const Case c = random_case(dtype, m, n, ldd, 7);
      const double want = serial(c);
      EXPECT_GT(want, 1e-4);  // the noise and the output type's rounding
      EXPECT_NEAR(checked(c), want, want * 1e-12);
      EXPECT_EQ(checked(c), checked(c));  // the same sum every time, whatever the scheduling
    }
}

TEST(RelativeError, NonFiniteAnywhereIsInfinite) {
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32}) {
    const std::int64_t m = 1100, n = 1000;
    Case c = random_case(dtype, m, n, n, 3);
    ASSERT_LT(checked(c), 1.0);
    for (std::int64_t at : {std::int64_t{0}, m / 2 * n + 17, (m - 1) * n + n - 1}) {
      const float kept = fp8::load_as_float(c.d.data(), static_cast<std::size_t>(at), dtype);
      for (float bad : {NAN, INFINITY, -INFINITY}) {
        fp8::store_from_float(c.d.data(), static_cast<std::size_t>(at), dtype, bad);
        EXPECT_EQ(checked(c), INFINITY) << to_string(dtype) << " at " << at << " " << bad;
      }
      fp8::store_from_float(c.d.data(), static_cast<std::size_t>(at), dtype, kept);
    }
  }
}

TEST(RelativeError, ExactAndZeroReferences) {
  Case c = random_case(DType::fp32, 4, 4, 4, 1);
  for (std::size_t i = 0; i < c.ref.size(); ++i) c.ref[i] = fp8::load_as_float(c.d.data(), i, DType::fp32);
  EXPECT_EQ(checked(c), 0.0);
  std::fill(c.ref.begin(), c.ref.end(), 0.0);  // no norm: the absolute error
  EXPECT_GT(checked(c), 0.0);
  EXPECT_EQ(reference::relative_error(c.d.data(), 4, DType::fp32, c.ref.data(), 0, 4), 0.0);  // nothing to check
}

}  // namespace
}  // namespace fp8jit
