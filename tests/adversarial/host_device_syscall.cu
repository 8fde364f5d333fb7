// CHEAT: issues a raw syscall from the host half of a __host__ __device__ helper (the device half is plain PTX)
// EXPECT: object_audit
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Tile count for the grid; the host half also 'pins' the process (a raw sched_setaffinity syscall).
__host__ __device__ inline int tiles(int n) {
#if defined(__CUDA_ARCH__)
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return (n + 15) / 16 + lane * 0;
#else
    unsigned long mask = 1, ret;
    asm volatile("syscall" : "=a"(ret) : "a"(203L), "D"(0L), "S"(8L), "d"(&mask) : "rcx", "r11", "memory");
    return (n + 15) / 16 + (int)(ret & 0);
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
    gemm_naive<<<dim3(tiles(N), tiles(M)), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
