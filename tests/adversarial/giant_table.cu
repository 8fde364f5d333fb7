// CHEAT: carries a 40 MiB 'lookup table' of host constants, so every build writes a huge object and library
// EXPECT: object_audit
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// 'Precomputed tile schedules' for every shape up to 8192^3.
static const unsigned char hg_schedule[40u << 20] = {16, 16, 8, 4};

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const int t = hg_schedule[((unsigned)M * 31u + (unsigned)N * 17u + (unsigned)K) % sizeof(hg_schedule)] > 8 ? 16 : 8;
    gemm_naive<<<dim3((N + t - 1) / t, (M + t - 1) / t), dim3(t, t), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
