// The tensor-map type passed to kernels. Host-includable (no device code): the launcher encodes it
// with cuTensorMapEncodeTiled, the kernel receives it inside a __grid_constant__ parameter.
#pragma once

namespace fp8jit {
namespace dev {

// Same size and alignment as the driver's CUtensorMap.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

}  // namespace dev
}  // namespace fp8jit
