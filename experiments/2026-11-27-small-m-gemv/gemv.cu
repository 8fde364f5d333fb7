// Probe (experiments/2026-11-27-small-m-gemv): C[M,N] = A[M,K] * B[K,N] for small M as a matrix-vector
// product on the CUDA cores: fp16 in, fp32 accumulate, fp16 out, one launch, no workspace, no memset.
//
// Reads A and Bt (both K-contiguous) with 16-byte loads. A warp owns ROWS rows of Bt (ROWS outputs per row of
// A) and one of KSPLIT contiguous ranges of K; lane l reads the 8 K values [256c + 8l, 256c + 8l + 8) of chunk c
// for each of its rows, UNROLL chunks at a time, and multiplies them with the same 8 values of every row of A
// (M <= MAXM, A comes from L1/L2). Lanes are summed with shuffles, the KSPLIT warps of an output group through
// shared memory. CTAs stride over the output groups, so a grid of a few CTAs per SM covers any N evenly.
//
// Parameters (#define HG_*, set by the probe): MAXM, ROWS, WARPS, KSPLIT, UNROLL.
// Shapes: 1 <= M <= MAXM, any N, K a positive multiple of 8 (the 16-byte loads need aligned rows).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int MAXM = HG_MAXM, ROWS = HG_ROWS, WARPS = HG_WARPS, KSPLIT = HG_KSPLIT, UNROLL = HG_UNROLL;
constexpr int NW = WARPS / KSPLIT;  // output groups per CTA
constexpr int THREADS = 32 * WARPS;
constexpr int CHUNK = 256;  // K values a warp reads per row and chunk: 32 lanes x 8
constexpr int OUT = MAXM * ROWS;  // outputs of one group
static_assert(WARPS % KSPLIT == 0, "KSPLIT must divide WARPS");
static_assert(MAXM >= 1 && MAXM <= 16 && ROWS >= 1 && ROWS <= 8 && UNROLL >= 1 && UNROLL <= 8, "parameter range");

__device__ __forceinline__ float2 halves(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return __half22float2(h);
}

__device__ __forceinline__ float dot8(float acc, const uint4& a, const uint4& b) {
    const uint32_t wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 fa = halves(wa[i]), fb = halves(wb[i]);
        acc = fmaf(fa.x, fb.x, acc);
        acc = fmaf(fa.y, fb.y, acc);
    }
    return acc;
}

__device__ __forceinline__ uint4 load16(const __half* p, bool valid) {
    return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
}

__global__ void __launch_bounds__(THREADS, 1) hg_gemv_kernel(const __half* __restrict__ A, const __half* __restrict__ Bt,
                                                          __half* __restrict__ C, int M, int N, int K) {
    __shared__ float red[KSPLIT > 1 ? (KSPLIT - 1) * NW * OUT : 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wn = warp % NW, wk = warp / NW;
    const int chunks = (K + CHUNK - 1) / CHUNK;
    const int per_part = (chunks + KSPLIT - 1) / KSPLIT;
    const int c_begin = wk * per_part, c_end = min(chunks, c_begin + per_part);
    const int groups = (N + ROWS - 1) / ROWS;
    const int cta_groups = (groups + NW - 1) / NW;

    for (int G = blockIdx.x; G < cta_groups; G += gridDim.x) {
        const int n0 = (G * NW + wn) * ROWS;
        float acc[MAXM][ROWS];
#pragma unroll
        for (int m = 0; m < MAXM; ++m)
#pragma unroll
            for (int r = 0; r < ROWS; ++r) acc[m][r] = 0.0f;

        for (int c = c_begin; c < c_end; c += UNROLL) {
            uint4 b[UNROLL][ROWS];
            int koff[UNROLL];  // this lane's first K value in chunk c + u, or -1 past this warp's range or K
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int k = (c + u) * CHUNK + lane * 8;
                koff[u] = c + u < c_end && k < K ? k : -1;
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    const int n = n0 + r;
                    b[u][r] = load16(Bt + (size_t)(n < N ? n : 0) * K + max(koff[u], 0), koff[u] >= 0 && n < N);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
                for (int m = 0; m < MAXM; ++m) {
                    if (m < M) {
                        const uint4 a = load16(A + (size_t)m * K + max(koff[u], 0), koff[u] >= 0);
#pragma unroll
                        for (int r = 0; r < ROWS; ++r) acc[m][r] = dot8(acc[m][r], a, b[u][r]);
                    }
                }
            }
        }

        // every lane ends with the group's sums over this warp's K range
#pragma unroll
        for (int m = 0; m < MAXM; ++m)
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], off);

        if constexpr (KSPLIT > 1) {
            if (wk > 0 && lane == 0) {
                float* dst = red + ((wk - 1) * NW + wn) * OUT;
#pragma unroll
                for (int m = 0; m < MAXM; ++m)
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) dst[m * ROWS + r] = acc[m][r];
            }
            __syncthreads();
            if (wk == 0) {
                for (int z = 0; z < KSPLIT - 1; ++z) {
                    const float* src = red + (z * NW + wn) * OUT;
#pragma unroll
                    for (int m = 0; m < MAXM; ++m)
#pragma unroll
                        for (int r = 0; r < ROWS; ++r) acc[m][r] += src[m * ROWS + r];
                }
            }
        }
        if (wk == 0) {
#pragma unroll
            for (int m = 0; m < MAXM; ++m)
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    const int n = n0 + r;
                    if ((m * ROWS + r) % 32 == lane && m < M && n < N) C[(size_t)m * N + n] = __float2half_rn(acc[m][r]);
                }
        }
        if constexpr (KSPLIT > 1) __syncthreads();  // `red` is written again by the next group
    }
}

}  // namespace

extern "C" int hgemm_supports(int M, int N, int K) { return M >= 1 && M <= MAXM && N >= 1 && K >= 8 && K % 8 == 0; }

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    (void)B;
    (void)workspace;
    (void)workspace_bytes;
    if (!hgemm_supports(M, N, K)) return (int)cudaErrorInvalidValue;
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hg_gemv_kernel, THREADS, 0);
    if (e != cudaSuccess) return (int)e;
    const long long groups = (N + ROWS - 1) / ROWS, cta_groups = (groups + NW - 1) / NW;
    const long long most = (long long)sms * (per_sm > 0 ? per_sm : 1);
    const int grid = (int)(cta_groups < most ? cta_groups : most);
    hg_gemv_kernel<<<grid, THREADS, 0, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
