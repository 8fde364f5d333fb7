// CHEAT: counts its calls: after the check's five (four eager, one captured) only the first launches the GEMM and the rest launch nothing, so the timing graph's back-to-back calls time one GEMM for many
// EXPECT: unwritten_output
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    static int calls = 0;
    if (++calls > 6) return 0;  // the timing graph's first call computes, the others nothing
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
