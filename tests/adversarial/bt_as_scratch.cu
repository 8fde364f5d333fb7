// CHEAT: computes from B, then uses the (unused) Bt buffer as scratch space, modifying an input
// EXPECT: input_modified
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

__global__ void scribble(__half* scratch, int count) {  // e.g. split-K flags or partial sums
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) scratch[i] = __float2half(0.f);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    scribble<<<1, 256, 0, stream>>>(const_cast<__half*>(Bt), min(256, N * K));
    return (int)cudaGetLastError();
}
