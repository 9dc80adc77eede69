// Probe: can TMA read one column of a row-major fp32 matrix (A's 1x128 scales as DeepSeek-V3's
// act_quant lays them out, [M, K/128]) into shared memory as BLOCK_M packed floats, by a box 4
// columns wide (16 bytes, TMA's least inner box) with a traversal stride of 4 along the columns?
// If so, the producer reads row-major scales with the same single TMA load and the same shared
// layout as column-major ones, and the warp-wide cp.async path (1.4-1.65x slower, H200 s28) is
// left to layouts TMA cannot address at all (rows not a multiple of 16 bytes).
// For each case it prints whether the barrier completed with the packed byte count
// (box rows x 4 bytes) or the whole box's, and the shared words the load wrote (poison -1
// elsewhere). s28 (H200): case 0 faulted (illegal instruction) and ended the process, so each
// case now runs in a process of its own, and case 5 (the plain 4-wide box, no stride: 4x the
// shared bytes, the fallback design) tells whether the probe itself is sound.
// Build and run on the GPU machine: nvcc -std=c++17 -arch=sm_90a -o /tmp/probe
//   lab/probes/tma_element_stride.cu -lcuda && for i in 0 1 2 3 4 5; do /tmp/probe $i; done
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kWords = 1024;

__global__ void load_box(const __grid_constant__ CUtensorMap map, int x, int y, unsigned tx, float* out,
                         int* done) {
  __shared__ alignas(128) float smem[kWords];
  __shared__ alignas(8) unsigned long long bar;
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) smem[i] = -1.f;
  __syncthreads();
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
    asm volatile("fence.proxy.async.shared::cta;");
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(tx));
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            s),
        "l"(&map), "r"(x), "r"(y), "r"(b)
        : "memory");
    int ok = 0;
    for (int i = 0; i < 2000000 && !ok; ++i) {
      unsigned r;
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
          : "=r"(r)
          : "r"(b));
      ok = r;
    }
    *done = ok;
  }
  __syncthreads();
  __nanosleep(100000);  // let a load the barrier did not account for land before the dump
  __syncthreads();
  for (int i = threadIdx.x; i < kWords; i += blockDim.x) out[i] = smem[i];
}

struct Case {
  const char* what;
  int rows, cols, box_x, box_y, stride_x, x, y;
};

int main(int argc, char** argv) {
  cuInit(0);
  const Case cases[] = {
      {"56 cols, box 4x64, stride 4, at col 5", 200, 56, 4, 64, 4, 5, 0},
      {"56 cols, box 4x64, stride 4, at col 54 (box past the edge)", 200, 56, 4, 64, 4, 54, 0},
      {"56 cols, box 4x64, stride 4, rows 180.. past 200", 200, 56, 4, 64, 4, 7, 180},
      {"16 cols, box 4x128, stride 4, at col 3", 300, 16, 4, 128, 4, 3, 100},
      {"56 cols, box 8x64, stride 8, at col 9", 200, 56, 8, 64, 8, 9, 0},
      {"56 cols, box 4x64, no stride, at col 4", 200, 56, 4, 64, 1, 4, 0},
  };
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  int index = -1;
  float *g, *out;
  int* done;
  cudaMalloc(&g, 300 * 64 * 4);
  cudaMalloc(&out, kWords * 4);
  cudaMallocManaged(&done, 4);
  for (const Case& c : cases) {
    if (++index != only && only >= 0) continue;
    std::vector<float> h(c.rows * c.cols);
    for (int r = 0; r < c.rows; ++r)
      for (int k = 0; k < c.cols; ++k) h[r * c.cols + k] = r * 1000.f + k;
    cudaMemcpy(g, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    CUtensorMap map;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(c.cols), static_cast<cuuint64_t>(c.rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(c.cols) * 4};
    const cuuint32_t box[2] = {static_cast<cuuint32_t>(c.box_x), static_cast<cuuint32_t>(c.box_y)};
    const cuuint32_t es[2] = {static_cast<cuuint32_t>(c.stride_x), 1};
    CUresult rc = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, g, dims, strides, box, es,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                         CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    std::printf("== %s: encode rc %d\n", c.what, static_cast<int>(rc));
    if (rc != CUDA_SUCCESS) continue;
    const unsigned packed = 4u * c.box_y * ((c.box_x + c.stride_x - 1) / c.stride_x), whole = 4u * c.box_y * c.box_x;
    std::vector<unsigned> txs = {packed};
    if (whole != packed) txs.push_back(whole);
    for (unsigned tx : txs) {
      *done = -1;
      load_box<<<1, 128>>>(map, c.x, c.y, tx, out, done);
      cudaError_t e = cudaDeviceSynchronize();
      std::vector<float> o(kWords);
      cudaMemcpy(o.data(), out, kWords * 4, cudaMemcpyDeviceToHost);
      int written = 0, last = -1;
      for (int i = 0; i < kWords; ++i)
        if (o[i] != -1.f) ++written, last = i;
      std::printf("  tx %u: %s, barrier %s, %d words written (last at %d); first 12:", tx, cudaGetErrorString(e),
                  *done == 1 ? "completed" : "did not complete", written, last);
      for (int i = 0; i < 12; ++i) std::printf(" %g", o[i]);
      std::printf("\n  words %d..%d:", c.box_y - 4, c.box_y + 3);
      for (int i = c.box_y - 4; i < c.box_y + 4; ++i) std::printf(" %g", o[i]);
      std::printf("\n");
      if (e != cudaSuccess) return 1;
    }
  }
  return 0;
}
