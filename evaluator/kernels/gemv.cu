// hgemm family template "gemv": C[M,N] = A[M,K] * B[K,N] for M <= 4 as a matrix-vector product on the CUDA
// cores: fp16 in, fp32 accumulate, fp16 out, one launch, no workspace, no memset.
//
// Reads A and Bt (both K-major). A warp owns ROWS rows of Bt (an output group: ROWS columns of C for each row
// of A) and one of KSPLIT contiguous ranges of K chunks; lane l reads the 8 K values [256c + 8l, 256c + 8l + 8)
// of chunk c. One loop step issues every load first, UNROLL chunks of each of its rows of Bt and then of each row
// of A (M <= MAXM; A comes from L1/L2); then, chunk by chunk, each row of Bt and each row of A is converted to
// fp32 once and every pair is multiplied (8 FMAs per pair and 8 values). Converting both operands at each
// multiply instead, as this family's first kernel did, cost 8 more conversions per pair: equal at M = 1, 1.4-3.2x
// slower at M = 2-4 on an H200 (experiments/2026-11-27-gemv-mid-m). Lanes are summed with shuffles, the KSPLIT
// warps of a group through shared memory. CTAs stride over the output groups, so a grid of the occupancy's CTAs
// per SM at most covers any N. K % 8 == 0 gives 16-byte loads (KVEC 8); otherwise each 8-value run is read 4 or
// 2 bytes at a time (KVEC 2 or 1); values past K load as zeros.
//
// Parameters (#define HG_*): MAXM, ROWS, WARPS, KSPLIT, UNROLL, KVEC.
#include "mma_common.cuh"
#include "gemv_rules.cuh"

namespace {

constexpr int MAXM = HG_MAXM, ROWS = HG_ROWS, WARPS = HG_WARPS, KSPLIT = HG_KSPLIT, UNROLL = HG_UNROLL;
constexpr int KVEC = HG_KVEC;
constexpr gemv_rules::Params P{MAXM, ROWS, WARPS, KSPLIT, UNROLL, KVEC};
static_assert(gemv_rules::violation(P) == nullptr, "these parameters break a rule of gemv_rules.cuh");
constexpr int NW = gemv_rules::groups_per_cta(P);
constexpr int THREADS = gemv_rules::threads(P);
constexpr int CHUNK = gemv_rules::CHUNK;
constexpr int OUT = gemv_rules::outputs(P);

// Eight consecutive halfs [k, k + 8) of one row; zeros where `valid` is false (past K or past the last row).
HG_DEVICE uint4 load8(const __half* row, int k, int K, bool valid) {
    if constexpr (KVEC == 8) {
        return valid ? __ldg(reinterpret_cast<const uint4*>(row + k)) : make_uint4(0u, 0u, 0u, 0u);
    } else {
        return hg_load8_narrow<KVEC>(row, k, K, valid);
    }
}

// The eight halfs of v as floats.
HG_DEVICE void to_floats(float (&f)[8], const uint4& v) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        __half2 h;
        memcpy(&h, &w[i], 4);
        const float2 x = __half22float2(h);
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}

__global__ void __launch_bounds__(THREADS, 1)
    hg_gemv_kernel(const __half* __restrict__ A, const __half* __restrict__ Bt, __half* __restrict__ C, int M, int N,
                   int K) {
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
            uint4 b[UNROLL][ROWS], a[UNROLL][MAXM];
            int koff[UNROLL];  // this lane's first K value in chunk c + u, or -1 past this warp's range or K
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int k = (c + u) * CHUNK + lane * 8;
                koff[u] = c + u < c_end && k < K ? k : -1;
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    const int n = n0 + r;
                    b[u][r] = load8(Bt + (size_t)(n < N ? n : 0) * K, max(koff[u], 0), K, koff[u] >= 0 && n < N);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
#pragma unroll
                for (int m = 0; m < MAXM; ++m)
                    a[u][m] = load8(A + (size_t)(m < M ? m : 0) * K, max(koff[u], 0), K, koff[u] >= 0 && m < M);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                float bf[ROWS][8];
#pragma unroll
                for (int r = 0; r < ROWS; ++r) to_floats(bf[r], b[u][r]);
#pragma unroll
                for (int m = 0; m < MAXM; ++m) {
                    if (m < M) {
                        float af[8];
                        to_floats(af, a[u][m]);
#pragma unroll
                        for (int r = 0; r < ROWS; ++r)
#pragma unroll
                            for (int i = 0; i < 8; ++i) acc[m][r] = fmaf(af[i], bf[r][i], acc[m][r]);
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

extern "C" int hgemm_supports(int M, int N, int K) { return gemv_rules::shape_violation(P, M, N, K) == nullptr ? 1 : 0; }

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
