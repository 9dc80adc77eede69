// cuBLASLt as the peer of fp8jit's GEMM: the same operands, the same scale mode, its best of
// several heuristic algorithms. Linked by the bench only.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "fp8jit/runtime.hpp"

namespace fp8jit::bench {

class CublasLtGemm {
 public:
  // Plans D = A.B^T for fp8jit's argument convention (row-major D, K-major A and B). Returns
  // false (with `why`) when cuBLASLt has no algorithm for it.
  bool plan(const GemmArgs& args, std::string& why);
  void run(cudaStream_t stream);  // after a successful plan
  ~CublasLtGemm();
  std::string algo_name() const { return name_; }

 private:
  bool try_algo(const cublasLtMatmulAlgo_t& algo, float& ms);
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 64u << 20;
  GemmArgs args_{};
  float alpha_ = 1.0f, beta_ = 0.0f;
  std::string name_;
};

}  // namespace fp8jit::bench
