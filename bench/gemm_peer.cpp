#include "bench/gemm_peer.hpp"

#include <fmt/format.h>

#include <vector>

namespace fp8jit::bench {
namespace {

cudaDataType fp8_type(Fp8Format f) { return f == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }
cudaDataType out_type(DType t) {
  return t == DType::bf16 ? CUDA_R_16BF : t == DType::fp16 ? CUDA_R_16F : CUDA_R_32F;
}

}  // namespace

// cuBLASLt is column-major: fp8jit's row-major D[M, N] is its N x M matrix, so its "A" is our B
// ([N, K] row-major = K x N column-major, transposed) and its "B" is our A (not transposed).
bool CublasLtMatmul::describe(cudaDataType a_type, const void* a, std::int64_t lda, cudaDataType b_type, const void* b,
                              std::int64_t ldb, cudaDataType d_type, void* d, std::int64_t ldd, std::int64_t m,
                              std::int64_t n, std::int64_t k, std::string& why) {
  release();
  if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) { why = "cublasLtCreate failed"; return false; }
  cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  cublasLtMatrixLayoutCreate(&a_, b_type, k, n, ldb ? ldb : k);
  cublasLtMatrixLayoutCreate(&b_, a_type, k, m, lda ? lda : k);
  cublasLtMatrixLayoutCreate(&d_, d_type, n, m, ldd ? ldd : n);
  if (cudaMalloc(&workspace_, workspace_bytes_) != cudaSuccess) {
    workspace_ = nullptr;
    why = "cannot allocate the cuBLASLt workspace";
    return false;
  }
  lt_a_ = b;
  lt_b_ = a;
  d_ptr_ = d;
  return true;
}

bool CublasLtMatmul::choose_algo(std::string& why) {
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                       sizeof workspace_bytes_);
  std::vector<cublasLtMatmulHeuristicResult_t> results(8);
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, d_, d_, pref, 8, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    why = fmt::format("no cuBLASLt algorithm (status {})", static_cast<int>(st));
    return false;
  }
  // The peer gets its best: time every proposed algorithm, keep the fastest.
  float best = 1e30f;
  for (int i = 0; i < found; ++i) {
    float ms = 0;
    if (try_algo(results[i].algo, ms) && ms < best) {
      best = ms;
      algo_ = results[i].algo;
      name_ = fmt::format("cublaslt_algo{}", i);
    }
  }
  if (best >= 1e30f) { why = "no cuBLASLt algorithm ran"; return false; }
  return true;
}

bool CublasLtMatmul::matmul(const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
  return cublasLtMatmul(handle_, op_, &alpha_, lt_a_, a_, lt_b_, b_, &beta_, d_ptr_, d_, d_ptr_, d_, &algo, workspace_,
                        workspace_bytes_, stream) == CUBLAS_STATUS_SUCCESS;
}

bool CublasLtMatmul::try_algo(const cublasLtMatmulAlgo_t& algo, float& ms) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i) ok = matmul(algo, nullptr);
  cudaEventRecord(a);
  for (int i = 0; i < 5 && ok; ++i) ok = matmul(algo, nullptr);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ok && cudaGetLastError() == cudaSuccess;
}

void CublasLtMatmul::run(cudaStream_t stream) { matmul(algo_, stream); }

void CublasLtMatmul::release() {
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (d_) cublasLtMatrixLayoutDestroy(d_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (handle_) cublasLtDestroy(handle_);
  if (workspace_) cudaFree(workspace_);
  a_ = b_ = d_ = nullptr;
  op_ = nullptr;
  handle_ = nullptr;
  workspace_ = nullptr;
  name_.clear();
}

CublasLtMatmul::~CublasLtMatmul() { release(); }

// Scale modes follow the operands: our block mode (A 1x128, B 128x128) is cuBLASLt's
// A = BLK128x128_32F, B = VEC128_32F.
bool CublasLtGemm::plan(const GemmArgs& g, std::string& why) {
  if (!describe(fp8_type(g.a_format), g.a, g.lda, fp8_type(g.b_format), g.b, g.ldb, out_type(g.d_dtype), g.d,
                g.ldd, g.m, g.n, g.k, why))
    return false;
  const void* sa = g.scale_b;  // cuBLAS A = our B
  const void* sb = g.scale_a;
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
  int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  if (g.scale_mode == ScaleMode::rowwise) mode_a = mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  if (g.scale_mode == ScaleMode::block) {
    mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  }
  if (g.scale_mode == ScaleMode::group) mode_a = mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof mode_a);
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof mode_b);
  const int8_t fast = g.fast_accum ? 1 : 0;
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
  return choose_algo(why);
}

bool CublasLtBf16Gemm::plan(const void* a, const void* b, void* d, std::int64_t m, std::int64_t n, std::int64_t k,
                            std::string& why) {
  return describe(CUDA_R_16BF, a, 0, CUDA_R_16BF, b, 0, CUDA_R_16BF, d, 0, m, n, k, why) && choose_algo(why);
}

}  // namespace fp8jit::bench
