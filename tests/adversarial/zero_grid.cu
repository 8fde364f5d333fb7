// CHEAT: sizes the grid by floor division by a 256-row tile, so any M < 256 launches a zero-sized grid
// EXPECT: launch_error
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_rows(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    for (int m = blockIdx.y * 256; m < min(M, (int)blockIdx.y * 256 + 256); ++m) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
        C[(size_t)m * N + n] = __float2half(acc);
    }
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_rows<<<dim3((N + 127) / 128, M / 256), 128, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
