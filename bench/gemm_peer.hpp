// cuBLASLt as the peer of fp8jit's GEMM: the same operands, the same scale mode, its best of
// several heuristic algorithms (CublasLtGemm); and plain BF16 x BF16 -> BF16 on bf16 copies of
// the same values (CublasLtBf16Gemm), the baseline FP8 is meant to beat. Linked by the bench only.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "fp8jit/runtime.hpp"

namespace fp8jit::bench {

// One planned cublasLtMatmul D = A.B^T in fp8jit's convention (row-major D [M, N], K-major
// A [M, K] and B [N, K]; cuBLASLt sees the column-major transpose), FP32 compute and scalars,
// and the fastest of the heuristic's algorithms (each timed on the operands).
class CublasLtMatmul {
 public:
  CublasLtMatmul() = default;
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;
  virtual ~CublasLtMatmul();
  void run(cudaStream_t stream);  // after a successful plan
  std::string algo_name() const { return name_; }

 protected:
  // Handle, operation (TN, CUBLAS_COMPUTE_32F) and layouts; ld* = 0 means dense.
  bool describe(cudaDataType a_type, const void* a, std::int64_t lda, cudaDataType b_type, const void* b,
                std::int64_t ldb, cudaDataType d_type, void* d, std::int64_t ldd, std::int64_t m, std::int64_t n,
                std::int64_t k, std::string& why);
  // After the operation's other attributes are set: the heuristic's candidates, the fastest kept.
  bool choose_algo(std::string& why);
  cublasLtMatmulDesc_t op_ = nullptr;

 private:
  void release();
  bool try_algo(const cublasLtMatmulAlgo_t& algo, float& ms);
  bool matmul(const cublasLtMatmulAlgo_t& algo, cudaStream_t stream);
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;  // cuBLASLt's A = our B, its B = our A
  cublasLtMatmulAlgo_t algo_{};
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 64u << 20;
  const void* lt_a_ = nullptr;  // our B
  const void* lt_b_ = nullptr;  // our A
  void* d_ptr_ = nullptr;
  float alpha_ = 1.0f, beta_ = 0.0f;
  std::string name_;
};

// The FP8 peer: fp8jit's GemmArgs as they are (formats, scale mode and pointers, fast_accum).
class CublasLtGemm : public CublasLtMatmul {
 public:
  // Returns false (with `why`) when cuBLASLt has no algorithm for it.
  bool plan(const GemmArgs& args, std::string& why);
};

// BF16 x BF16 -> BF16 (no scales): a [m, k] and b [n, k] row-major bf16, d [m, n] row-major bf16.
class CublasLtBf16Gemm : public CublasLtMatmul {
 public:
  bool plan(const void* a, const void* b, void* d, std::int64_t m, std::int64_t n, std::int64_t k, std::string& why);
};

}  // namespace fp8jit::bench
