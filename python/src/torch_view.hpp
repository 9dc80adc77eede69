// What fp8jit.gemm's common case reads of a torch tensor, filled by the optional
// fp8jit._fp8jit_torch module (built where torch's headers are found at configure time) straight
// from the at::Tensor behind the Python object: ~30 torch attribute reads through the CPython API
// cost ~3 µs per GEMM call, the same fields read in C++ a few nanoseconds. The module hands the
// reader over as a capsule, so that _fp8jit itself never links torch.
#pragma once

#include <cstdint>

namespace fp8jit::python {

enum class TorchDType : int { other = 0, e4m3, e5m2, bf16, fp16, fp32 };

struct TorchView {
  int cuda_device = -1;  // the CUDA device's index; -1: not a CUDA tensor
  TorchDType dtype = TorchDType::other;
  int dims = 0;
  std::int64_t shape[2] = {0, 0}, strides[2] = {0, 0};
  std::uintptr_t ptr = 0;
  std::int64_t storage_elements = 0;  // elements from the first one to the storage's end
};

// 1 and `out` filled for an exact torch.Tensor (or Parameter) of one or two dimensions with
// storage; 0 for anything else (the attribute path then reads it). Never raises.
using TorchViewFn = int (*)(void* py_object, TorchView* out);

inline constexpr const char* kTorchViewCapsule = "fp8jit._fp8jit_torch.view";

}  // namespace fp8jit::python
