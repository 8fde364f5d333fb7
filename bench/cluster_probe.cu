// Probe kernels for hgemm.bench.cluster_probe: what launching as a thread-block cluster costs by itself.
//
// probe_kernel does no work beyond what `variant` asks for: 0 nothing, 1 one cluster barrier at the start,
// 2 a cluster barrier at the start and one at the end (what the wgmma family does with a 2x1 cluster),
// 3 variant 2 plus mbarrier initialisation made visible to the cluster, 4 one relaxed barrier at the start
// (arrive.relaxed, wait), 5 a relaxed arrive, a CTA barrier, then the wait. probe_launch launches `grid` CTAs
// of 384 threads in clusters of `cluster` CTAs (1: a plain launch) with `smem` bytes of dynamic shared
// memory, on `stream`; it returns the CUDA error code.
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void cluster_barrier_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

__global__ void probe_kernel(int variant, int* sink) {
  extern __shared__ uint64_t bars[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (variant >= 3 && threadIdx.x == 0) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(1) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (variant == 4) cluster_barrier_relaxed();
  if (variant == 5) {  // one barrier whose wait comes after the CTA's other start-up work (here: none)
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    __syncthreads();
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
  }
  if (variant >= 1 && variant <= 3) cluster_barrier();
  if (variant >= 2 && variant <= 3) cluster_barrier();
#endif
  if (threadIdx.x == 0 && blockIdx.x == 0 && variant < 0) *sink = 1;  // never: keeps the kernel from being empty
}

extern "C" int probe_launch(int variant, int cluster, int grid, int smem, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return static_cast<int>(e);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid, 1, 1);
  cfg.blockDim = dim3(384, 1, 1);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 1 : 0;
  e = cudaLaunchKernelEx(&cfg, probe_kernel, variant, static_cast<int*>(nullptr));
  return static_cast<int>(e != cudaSuccess ? e : cudaGetLastError());
}
