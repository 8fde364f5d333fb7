// HONEST: mma.sync.aligned.m16n8k16 (inline PTX) GEMM on A and Bt, fp32 accumulators, any M, N, K
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int BM = 64, BN = 64, BK = 32;  // block tile; four warps in a 2x2 grid, 32x32 outputs each
constexpr int THREADS = 128;
constexpr int LDS = BK + 8;  // padded row length (halves) of both shared tiles; rows stay 4-byte aligned

// D += A(16x16, row) * B(16x8, col); fragment layout as in the PTX ISA for .f16 inputs, .f32 accumulators.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pair(const __half* p) { return *reinterpret_cast<const uint32_t*>(p); }

__global__ void __launch_bounds__(THREADS)
mma_gemm(const __half* __restrict__ A, const __half* __restrict__ Bt, __half* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) __half As[BM * LDS];  // As[m][k]
    __shared__ __align__(16) __half Bs[BN * LDS];  // Bs[n][k] (Bt is N x K, K contiguous)
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp / 2, wn = warp % 2;
    const int g = lane / 4, t = lane % 4;  // group and thread-in-group of the fragment layout
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const __half zero = __float2half(0.f);

    float acc[2][4][4] = {};  // [m16 tile][n8 tile][fragment]
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK, m = m0 + r, k = k0 + c;
            As[r * LDS + c] = (m < M && k < K) ? A[(size_t)m * K + k] : zero;
        }
        for (int i = tid; i < BN * BK; i += THREADS) {
            const int r = i / BK, c = i % BK, n = n0 + r, k = k0 + c;
            Bs[r * LDS + c] = (n < N && k < K) ? Bt[(size_t)n * K + k] : zero;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const __half* base = As + (wm * 32 + i * 16 + g) * LDS + kk + t * 2;
                a[i][0] = pair(base);
                a[i][1] = pair(base + 8 * LDS);
                a[i][2] = pair(base + 8);
                a[i][3] = pair(base + 8 * LDS + 8);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const __half* base = Bs + (wn * 32 + j * 8 + g) * LDS + kk + t * 2;
                const uint32_t b0 = pair(base), b1 = pair(base + 8);
#pragma unroll
                for (int i = 0; i < 2; ++i) mma16816(acc[i][j], a[i], b0, b1);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = m0 + wm * 32 + i * 16 + g + (e / 2) * 8;
                const int n = n0 + wn * 32 + j * 8 + t * 2 + (e % 2);
                if (m < M && n < N) C[(size_t)m * N + n] = __float2half(acc[i][j][e]);
            }
}

}  // namespace

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    (void)B;
    (void)workspace;
    (void)workspace_bytes;
    const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    mma_gemm<<<grid, THREADS, 0, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
