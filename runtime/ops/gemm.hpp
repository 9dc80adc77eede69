// Argument checks and the launch of the gemm family.
#pragma once

#include <cuda.h>

#include <climits>

#include "fp8jit/gemm/params.cuh"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/jit/module.hpp"

namespace fp8jit::ops {

// Fills defaults (ld = 0 -> dense) and throws Error(invalid_argument) naming the first bad
// argument. Touches no GPU.
GemmArgs normalize(const GemmArgs& a);
// The gemm family's step when one of its kernels is loaded (KernelCacheOptions::load_hooks):
// parses the config for the launch path and, for a config without a cluster of its own whose
// stages can hold a partial tile, probes how many clusters of 2..8 CTAs can be resident, for
// split-K summed inside a cluster.
KernelLoadHook gemm_load_hook();
GemmProblem problem_of(const GemmArgs& a);
void check_matches(const KernelSpec& spec, const GemmArgs& a);
// Split-K ranges a launch will use; whether they are summed inside thread-block clusters (one
// per tile) rather than through the FP32 workspace and a reduction kernel; the workspace bytes
// (0 for one range or a sum in clusters). `sum` is the runtime's RuntimeOptions::split_sum:
// SplitSum::workspace never sums in clusters. `sm_count`: the SMs the launch may occupy (its
// budget); a sum in clusters needs every tile's cluster resident within it.
int split_count(const LoadedKernel& k, const GemmArgs& a, int sm_count, SplitSum sum = SplitSum::cluster);
bool splits_in_cluster(const LoadedKernel& k, const GemmArgs& a, int splits, SplitSum sum = SplitSum::cluster,
                       int sm_count = INT_MAX);
std::size_t workspace_bytes(const LoadedKernel& k, const GemmArgs& a, int splits, SplitSum sum = SplitSum::cluster,
                            int sm_count = INT_MAX);

// One GEMM ready to launch: the kernel parameters (tensor maps encoded) and the grids of the
// persistent kernel and, with splits > 1, of the reduction.
struct GemmLaunch {
  dev::GemmParams params{};
  LaunchConfig main, reduce;
};

// Encodes the tensor maps and sizes the persistent grid on `sm_count` multiprocessors.
// `workspace` must hold workspace_bytes(a, splits). `pdl`: both kernels may start under the
// previous kernel in the stream (LaunchConfig::pdl).
GemmLaunch prepare(const LoadedKernel& k, const GemmArgs& a, int sm_count, int splits, float* workspace,
                   CUstream stream, SplitSum sum = SplitSum::cluster, bool pdl = false);
// Launches a prepared GEMM (the driver's part of a call: what remains with everything cached).
void launch(const LoadedKernel& k, GemmLaunch& l);
// prepare + launch.
void launch(const LoadedKernel& k, const GemmArgs& a, int sm_count, int splits, float* workspace, CUstream stream,
            SplitSum sum = SplitSum::cluster, bool pdl = false);

}  // namespace fp8jit::ops
