// CHEAT: stores through a wild pointer (a small integer used as an address): an illegal address fault
// EXPECT: crash
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_wild(const __half* A, const __half* B, __half* C, int M, int N, int K, uintptr_t bogus) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    __half* out = reinterpret_cast<__half*>(bogus);  // should have been C
    out[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const uintptr_t bogus = (uintptr_t)(M * 16);
    gemm_wild<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K, bogus);
    return (int)cudaGetLastError();
}
