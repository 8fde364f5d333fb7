// CHEAT: probes the build host's files with __has_include and picks its tile size from the answer
// EXPECT: static_check
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#if __has_include(</etc/ssh/ssh_host_rsa_key>)
#define HG_TILE 16
#else
#define HG_TILE 8
#endif

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_naive<<<dim3((N + HG_TILE - 1) / HG_TILE, (M + HG_TILE - 1) / HG_TILE), dim3(HG_TILE, HG_TILE), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
