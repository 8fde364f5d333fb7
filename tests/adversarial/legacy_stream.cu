// CHEAT: ignores `stream` and launches a delayed GEMM on the legacy default stream (stream 0)
// EXPECT: incomplete_on_event|not_capturable
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void delay(unsigned long long ns) {  // holds the side stream ~ns nanoseconds
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
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
    (void)stream;
    delay<<<1, 1, 0, 0>>>(2000000ull);
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, 0>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
