// hgemm family template "small": one short launch for small shapes, no shared-memory staging
// of operands, no workspace, no memset.
//
// C[M,N] = A[M,K] * B[K,N], fp16 in, fp32 accumulate, fp16 out, reading A and Bt (both K-major).
// A CTA owns a BM x BN tile and has WARPS_M x WARPS_N x WARPS_K warps; each warp computes a
// WM x WN sub-tile over every WARPS_K-th 32-wide K chunk, loading its mma.sync fragments
// straight from global memory with 16-byte loads. The trick: the K order inside an mma is
// free as long as A and B agree, so lane (g = lane/4, t = lane%4) loads the 8 consecutive K
// values [8t, 8t+8) of its row of A and of its column of B (a row of Bt), and K step s of the
// chunk uses elements {8t+4s .. 8t+4s+3}: a bijection onto the chunk's 32 K values for both
// operands. The next chunk's fragments are loaded before the current one is multiplied.
// Warps with the same (m, n) but different K chunks are summed through shared memory, then
// the K-warp 0 writes C with half2 stores (scalar where N is odd). Out-of-range rows and K
// chunks load zeros. K % 8 == 0 gives 16-byte loads (KVEC 8); otherwise each 8-value run is read 4 or
// 2 bytes at a time (KVEC 2 or 1; hgemm_supports asks for the widest KVEC that K allows).
//
// Parameters (#define HG_*): BM, BN, WARPS_M, WARPS_N, WARPS_K, KVEC.
#include "mma_common.cuh"
#include "small_rules.cuh"

namespace {

constexpr int BM = HG_BM, BN = HG_BN;
constexpr int WARPS_M = HG_WARPS_M, WARPS_N = HG_WARPS_N, WARPS_K = HG_WARPS_K, KVEC = HG_KVEC;
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
    int kc = wk;
    if (kc < chunks) {
        Frags cur;
        load_frags(cur, A, Bt, M, N, K, mw, nw, kc * 32, g, t);
        for (; kc < chunks; kc += WARPS_K) {
            Frags nxt;
            const bool more = kc + WARPS_K < chunks;
            if (more) load_frags(nxt, A, Bt, M, N, K, mw, nw, (kc + WARPS_K) * 32, g, t);
            mma_chunk(acc, cur);
            if (more) cur = nxt;
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
