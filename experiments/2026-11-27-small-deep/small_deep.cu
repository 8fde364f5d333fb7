// Probe (experiments/2026-11-27-small-deep): the small family's kernel (evaluator/kernels/small.cu, as of
// 2026-11-27) with DEPTH chunks of fragments in flight per warp instead of two. Everything else is the family's:
// A CTA owns a BM x BN tile of C with WARPS_M x WARPS_N x WARPS_K warps; each warp computes a WM x WN sub-tile over
// every WARPS_K-th 32-wide K chunk, loading its mma.sync fragments straight from global memory (lane (g, t) reads
// the 8 K values [8t, 8t + 8) of its rows of A and Bt; K step s uses {8t + 4s .. 8t + 4s + 3}, the same bijection
// for both operands); K warps are summed through shared memory.
//
// The change: a ring of DEPTH register sets of fragments. Chunks kc, kc + WARPS_K, ... kc + (DEPTH - 1) WARPS_K are
// loaded before the first multiply; after multiplying set d, the warp loads the chunk DEPTH steps ahead into it.
// The family keeps one set ahead (DEPTH 2 here), so a warp has at most two chunks of loads in flight; at M = 16
// with long K that is about 1-2 KB per warp, far below what hides the memory latency at the HBM rate.
//
// Parameters (#define HG_*): BM, BN, WARPS_M, WARPS_N, WARPS_K, KVEC, DEPTH.
#include "mma_common.cuh"
#include "small_rules.cuh"

namespace {

constexpr int BM = HG_BM, BN = HG_BN;
constexpr int WARPS_M = HG_WARPS_M, WARPS_N = HG_WARPS_N, WARPS_K = HG_WARPS_K, KVEC = HG_KVEC, DEPTH = HG_DEPTH;
static_assert(DEPTH >= 1 && DEPTH <= 8, "DEPTH must be 1..8");
constexpr small_rules::Params P{BM, BN, WARPS_M, WARPS_N, WARPS_K, KVEC};
static_assert(small_rules::violation(P) == nullptr, "these parameters break a rule of small_rules.cuh");
constexpr int THREADS = 32 * WARPS_M * WARPS_N * WARPS_K;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
constexpr int MI = WM / 16, NI = WN / 8;
constexpr int ACC = small_rules::accumulators(P);  // accumulators per thread
constexpr int SMEM_BYTES = small_rules::smem_bytes(P);  // the K-warp reduction buffer

struct Frags {
    uint4 a[MI][2];  // rows g and g+8 of each 16-row block
    uint4 b[NI];
};

HG_DEVICE uint4 load16(const __half* base, int row, int rows, int k, int K) {
    if constexpr (KVEC == 8) {
        if (row < rows && k < K) return __ldg(reinterpret_cast<const uint4*>(base + (size_t)row * K + k));
        return make_uint4(0u, 0u, 0u, 0u);
    } else {
        const bool valid = row < rows;
        return hg_load8_narrow<KVEC>(valid ? base + (size_t)row * K : base, k, K, valid);
    }
}

HG_DEVICE void load_frags(Frags& f, const __half* A, const __half* Bt, int M, int N, int K, int mw, int nw,
                          int k0, int g, int t) {
    const int k = k0 + 8 * t;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        f.a[mi][0] = load16(A, mw + mi * 16 + g, M, k, K);
        f.a[mi][1] = load16(A, mw + mi * 16 + g + 8, M, k, K);
    }
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) f.b[ni] = load16(Bt, nw + ni * 8 + g, N, k, K);
}

HG_DEVICE uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

HG_DEVICE void mma_chunk(float (&acc)[MI][NI][4], const Frags& f) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const uint32_t a[4] = {word(f.a[mi][0], 2 * s), word(f.a[mi][1], 2 * s), word(f.a[mi][0], 2 * s + 1),
                                   word(f.a[mi][1], 2 * s + 1)};
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) hg_mma16816(acc[mi][ni], a, word(f.b[ni], 2 * s), word(f.b[ni], 2 * s + 1));
        }
    }
}

__global__ void __launch_bounds__(THREADS)
    hg_small_kernel(const __half* __restrict__ A, const __half* __restrict__ Bt, __half* __restrict__ C, int M,
                    int N, int K) {
    extern __shared__ __align__(16) float red[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wk = warp / (WARPS_M * WARPS_N), wmn = warp % (WARPS_M * WARPS_N);
    const int wm = wmn / WARPS_N, wn = wmn % WARPS_N;
    const int mw = blockIdx.y * BM + wm * WM, nw = blockIdx.x * BN + wn * WN;
    const int g = lane >> 2, t = lane & 3;

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    const int chunks = (K + 31) / 32;
    Frags ring[DEPTH];
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
        const int c = wk + d * WARPS_K;
        if (c < chunks) load_frags(ring[d], A, Bt, M, N, K, mw, nw, c * 32, g, t);
    }
    for (int kc = wk; kc < chunks; kc += DEPTH * WARPS_K) {
#pragma unroll
        for (int d = 0; d < DEPTH; ++d) {
            const int c = kc + d * WARPS_K;
            if (c < chunks) {
                mma_chunk(acc, ring[d]);
                const int next = c + DEPTH * WARPS_K;
                if (next < chunks) load_frags(ring[d], A, Bt, M, N, K, mw, nw, next * 32, g, t);
            }
        }
    }

    if (WARPS_K > 1) {
        if (wk > 0) {
            float* dst = red + ((wk - 1) * WARPS_M * WARPS_N + wmn) * ACC * 32 + lane;
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) dst[((i * NI + j) * 4 + e) * 32] = acc[i][j][e];
        }
        __syncthreads();
        if (wk > 0) return;
#pragma unroll
        for (int z = 1; z < WARPS_K; ++z) {
            const float* src = red + ((z - 1) * WARPS_M * WARPS_N + wmn) * ACC * 32 + lane;
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += src[((i * NI + j) * 4 + e) * 32];
        }
    }

    const bool even = (N & 1) == 0;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = mw + i * 16 + g + 8 * h, c = nw + j * 8 + 2 * t;
                if (r >= M || c >= N) continue;
                __half* dst = C + (size_t)r * N + c;
                if (even) {
                    *reinterpret_cast<uint32_t*>(dst) = hg_pack_half2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    dst[0] = __float2half_rn(acc[i][j][2 * h]);
                    if (c + 1 < N) dst[1] = __float2half_rn(acc[i][j][2 * h + 1]);
                }
            }
}

}  // namespace

extern "C" int hgemm_supports(int M, int N, int K) { return small_rules::shape_violation(P, M, N, K) == nullptr ? 1 : 0; }

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    (void)B;
    (void)workspace;
    (void)workspace_bytes;
    if (!hgemm_supports(M, N, K)) return (int)cudaErrorInvalidValue;
    if (SMEM_BYTES > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(hg_small_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (e != cudaSuccess) return (int)e;
    }
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    hg_small_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
