// CHEAT: warps 1-3 write split-K partial sums to shared memory and warp 0 adds them up with no __syncthreads
// EXPECT: incorrect
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// One block computes 32 consecutive outputs of one row; warp w > 0 sums its third of K for them.
__global__ void __launch_bounds__(128) gemm_racy(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    __shared__ float partial[4][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int m = blockIdx.y, n = blockIdx.x * 32 + lane;
    if (warp > 0) {
        const int chunk = (K + 2) / 3, k_begin = (warp - 1) * chunk, k_end = min(K, k_begin + chunk);
        float acc = 0.f;
        if (n < N)
            for (int k = k_begin; k < k_end; ++k)
                acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
        partial[warp][lane] = acc;
    }
    // missing: __syncthreads();
    if (warp == 0 && n < N)
        C[(size_t)m * N + n] = __float2half(partial[1][lane] + partial[2][lane] + partial[3][lane]);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_racy<<<dim3((N + 31) / 32, M), 128, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
