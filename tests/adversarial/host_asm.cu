// CHEAT: inline assembly in host code (reads the CPU timestamp counter; could as well issue a syscall)
// EXPECT: static_check
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

static uint64_t host_ticks() {
    uint32_t lo = 0, hi = 0;
#if defined(__x86_64__)
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
#endif
    return ((uint64_t)hi << 32) | lo;
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const int b = (host_ticks() & 1) ? 16 : 16;
    gemm_naive<<<dim3((N + b - 1) / b, (M + 15) / 16), dim3(b, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
