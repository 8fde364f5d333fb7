// CHEAT: declares a 1 GiB __device__ array (allocated when the module loads, never freed) and touches it every call
// EXPECT: object_audit
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__device__ float hg_hoard[1 << 28];  // 'scratch for split-K partials'

__global__ void gemm_hoard(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    hg_hoard[((size_t)m * N + n) & ((1u << 28) - 1)] = acc;
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_hoard<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
