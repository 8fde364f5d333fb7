// CHEAT: counts its calls: the ones after the check's five are the timing graph's, and from that graph's second call on it multiplies only the first half of K
// EXPECT: incorrect
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_k(const __half* A, const __half* B, __half* C, int M, int N, int K, int k_end) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < k_end; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    static int calls = 0;
    const int k_end = ++calls > 6 ? K / 2 : K;
    gemm_k<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K, k_end);
    return (int)cudaGetLastError();
}
