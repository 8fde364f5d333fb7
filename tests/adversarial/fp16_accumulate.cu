// CHEAT: accumulates in __half with __hfma instead of fp32 (faster on paper, loses precision as K grows)
// EXPECT: incorrect
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_half_acc(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    __half acc = __float2half(0.f);
    for (int k = 0; k < K; ++k) acc = __hfma(A[(size_t)m * K + k], B[(size_t)k * N + n], acc);
    C[(size_t)m * N + n] = acc;
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_half_acc<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
