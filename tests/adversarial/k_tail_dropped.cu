// CHEAT: reads Bt in K-steps of 32 and silently drops the last K % 32 terms (correct only when 32 divides K)
// EXPECT: incorrect
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_bt_steps(const __half* A, const __half* Bt, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k0 = 0; k0 + 32 <= K; k0 += 32)  // should be k0 < K with a guarded tail
#pragma unroll
        for (int k = k0; k < k0 + 32; ++k)
            acc += __half2float(A[(size_t)m * K + k]) * __half2float(Bt[(size_t)n * K + k]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_bt_steps<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
