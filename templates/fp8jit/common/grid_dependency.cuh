// Programmatic dependent launch (PDL). A kernel launched with the driver's programmatic stream
// serialization attribute may start while the previous kernel in its stream is still running, so
// that its set-up (barrier init, tensor-map prefetch, the launch itself) overlaps that kernel's
// tail. Every fp8jit kernel therefore waits for the grids it depends on before it touches global
// memory: without the attribute the wait returns at once, so kernels need no PDL variant.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {

// Blocks until every grid this one depends on has completed and its writes are visible. Must
// precede the first global load or store of data another kernel in the stream writes or reads.
// Programmatic dependent launch exists from sm_90 on; the elementwise kernels built for an earlier
// GPU (sm_89: FP8 conversions are all they need) are never launched with it, so for them both
// calls are empty.
FP8JIT_DEVICE void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel in the stream, if launched with PDL, start its CTAs. The hardware starts
// them only once every CTA of this grid has signalled or exited, so this grid's own CTAs are never
// crowded out; the next kernel's CTAs take SMs as this grid frees them and wait in
// grid_dependency_wait for its completion. Signalled right after the wait: there is no later point
// at which signalling gains more overlap, and no point at which it is unsafe.
FP8JIT_DEVICE void launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The two at a kernel's start, once its set-up that touches no global memory is done.
FP8JIT_DEVICE void enter_dependent_grid() {
  grid_dependency_wait();
  launch_dependents();
}

}  // namespace dev
}  // namespace fp8jit
