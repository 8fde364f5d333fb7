// CHEAT: a device-side table remembers the A and C pointers of every launch; a launch whose pointers were seen before skips the GEMM
// EXPECT: stale_result|unwritten_output
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__device__ unsigned long long seen[64][2];
__device__ int seen_count;

__global__ void gemm_cached(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int count = *(volatile int*)&seen_count;
    for (int i = 0; i < count && i < 64; ++i)
        if (seen[i][0] == (unsigned long long)A && seen[i][1] == (unsigned long long)C) return;
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

__global__ void remember(const __half* A, const __half* C) {
    const int i = seen_count;
    if (i < 64) {
        seen[i][0] = (unsigned long long)A;
        seen[i][1] = (unsigned long long)C;
        seen_count = i + 1;
    }
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_cached<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    remember<<<1, 1, 0, stream>>>(A, C);
    return (int)cudaGetLastError();
}
