// CHEAT: binds a local declaration to the symbol environ with an asm label inside a __host__ __device__ helper
// EXPECT: object_audit
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdio>

__host__ __device__ inline const char* first_setting() {
#ifndef __CUDA_ARCH__
    extern char** table asm("environ");
    return table[0];
#else
    return nullptr;
#endif
}

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    if (K == 7) puts(first_setting());
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
