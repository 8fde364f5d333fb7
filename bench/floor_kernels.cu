// Floors for single-launch (server-mode) timing, under the kernel contract (hgemm_run), so they are
// captured and launched exactly as a candidate is. Not GEMMs: C holds no product.
//
// HG_FLOOR = 0: an empty kernel, one CTA (the cost of a launch and its timing, nothing else).
// HG_FLOOR = 1: one CTA per SM x 4 reads every byte of A (M x K) and Bt (N x K) once, 16 bytes a load,
//   then writes every byte of C (M x N) once: the bytes any GEMM of the shape must move, with no math
//   and no data reuse to wait on (the loads' XOR goes into C so that none is dropped).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef HG_FLOOR
#define HG_FLOOR 1
#endif

namespace {

__global__ void floor_empty() {}

__device__ __forceinline__ uint4 xor4(uint4 a, uint4 b) { return make_uint4(a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w); }

// Grid-stride XOR of n 16-byte vectors, four loads in flight per thread.
__device__ __forceinline__ uint4 read_all(const uint4* p, size_t n, size_t tid, size_t stride) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  size_t i = tid;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride),
                d = __ldg(p + i + 3 * stride);
    acc = xor4(acc, xor4(xor4(a, b), xor4(c, d)));
  }
  for (; i < n; i += stride) acc = xor4(acc, __ldg(p + i));
  return acc;
}

__global__ void floor_touch(const uint4* A, size_t na, const uint4* Bt, size_t nb, uint4* C, size_t nc) {
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const uint4 v = xor4(read_all(A, na, tid, stride), read_all(Bt, nb, tid, stride));
  for (size_t i = tid; i < nc; i += stride) C[i] = v;
}

}  // namespace

extern "C" int hgemm_supports(int M, int N, int K) {
  return M > 0 && N > 0 && K > 0 && (static_cast<size_t>(M) * K) % 8 == 0 && (static_cast<size_t>(N) * K) % 8 == 0 &&
                 (static_cast<size_t>(M) * N) % 8 == 0
             ? 1
             : 0;
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  (void)B;
  (void)workspace;
  (void)workspace_bytes;
  if (!hgemm_supports(M, N, K)) return static_cast<int>(cudaErrorInvalidValue);
  if (HG_FLOOR == 0) {
    floor_empty<<<1, 32, 0, stream>>>();
  } else {
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    floor_touch<<<sms * 4, 256, 0, stream>>>(reinterpret_cast<const uint4*>(A), static_cast<size_t>(M) * K / 8,
                                             reinterpret_cast<const uint4*>(Bt), static_cast<size_t>(N) * K / 8,
                                             reinterpret_cast<uint4*>(C), static_cast<size_t>(M) * N / 8);
  }
  return static_cast<int>(cudaGetLastError());
}
