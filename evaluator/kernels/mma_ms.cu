// hgemm family template "mma_ms" (also "mma_splitk" with HG_SPLIT_K > 1).
//
// C[M,N] = A[M,K] * B[K,N], fp16 in, fp32 accumulate, fp16 out. Reads A (row-major, K
// contiguous) and Bt (N x K, K contiguous): both tiles are K-major, so both use plain ldmatrix.
//
// Structure: a CTA computes a BM x BN tile with WARPS_M x WARPS_N warps (warp tile WM x WN,
// mma.sync m16n8k16). K is walked in BK slices through a STAGES-deep cp.async pipeline in
// XOR-swizzled shared memory (16-byte chunk c of row r lives at chunk c ^ f(r), so the eight
// rows of every ldmatrix phase hit distinct banks). CTAs are ordered in groups of RASTER
// tile-rows for L2 reuse. Loads are predicated with cp.async zero-fill, so M and N may be
// anything. K % 8 == 0 gives 16-byte rows (KVEC 8); otherwise rows are read 4 or 2 bytes at a time
// (KVEC 2 or 1) into registers one slice ahead and stored into the stage after the current slice's
// MMAs; the pipeline's cp.async groups are then empty (hgemm_supports asks for the widest KVEC K allows).
// REALIGN 1 (KVEC < 8 only) reads those rows as aligned 16-byte blocks instead, and shifts each chunk into place
// when it stores it: one or two 16-byte loads per chunk where narrow loads take four or eight.
// SPLIT_K == 1: the C tile is staged through shared memory and written with 16-byte stores
// (scalar stores where N % 8 != 0). SPLIT_K > 1: blockIdx.y picks a K range, each split writes
// its whole fp32 partial tile into the workspace (so garbage there never matters), and a
// second kernel sums the partials into C.
//
// Parameters (#define HG_*): BM, BN, BK, WARPS_M, WARPS_N, STAGES, RASTER, SPLIT_K, KVEC, REALIGN (absent: 0).
#ifndef HG_REALIGN
#define HG_REALIGN 0
#endif
#include "mma_common.cuh"
#include "mma_rules.cuh"

namespace {

constexpr int BM = HG_BM, BN = HG_BN, BK = HG_BK;
constexpr int WARPS_M = HG_WARPS_M, WARPS_N = HG_WARPS_N;
constexpr int STAGES = HG_STAGES, RASTER = HG_RASTER, SPLIT_K = HG_SPLIT_K, KVEC = HG_KVEC, REALIGN = HG_REALIGN;
constexpr mma_rules::Params P{BM, BN, BK, WARPS_M, WARPS_N, STAGES, RASTER, SPLIT_K, KVEC, REALIGN};
static_assert(mma_rules::violation(P) == nullptr, "these parameters break a rule of mma_rules.cuh");
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
constexpr int MI = WM / 16, NI = WN / 8;
constexpr int CHUNKS = BK / 8;                  // 16-byte chunks per shared-memory row
constexpr int SWZ_SHIFT = (BK == 64) ? 0 : 1;   // rows sharing one 128-byte line: 1 or 2
constexpr int A_STAGE_BYTES = BM * BK * 2, B_STAGE_BYTES = BN * BK * 2;
constexpr int C_STRIDE = mma_rules::c_stride(P);  // halfs; the padding spreads fragment writes over all banks
constexpr int SMEM_BYTES = mma_rules::smem_bytes(P);

// Byte offset of 16-byte chunk c of row r inside one swizzled tile.
HG_DEVICE int swz(int r, int c) {
    return (r * CHUNKS + (c ^ ((r >> SWZ_SHIFT) & (CHUNKS - 1)))) * 16;
}

// 16-byte chunks of one ROWS x BK tile each thread moves.
template <int ROWS>
constexpr int tile_iters() { return (ROWS * CHUNKS + THREADS - 1) / THREADS; }

// Copies rows [r0, r0+ROWS) x K-slice [k0, k0+BK) of a K-major matrix with `rows` rows into
// a swizzled tile with cp.async (KVEC 8); out-of-range chunks become zeros.
template <int ROWS>
HG_DEVICE void load_tile(uint32_t dst, const __half* src, int rows, int K, int r0, int k0, int tid) {
    constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int it = 0; it < tile_iters<ROWS>(); ++it) {
        int i = it * THREADS + tid;
        if (TOTAL % THREADS == 0 || i < TOTAL) {
            int r = i / CHUNKS, c = i % CHUNKS;
            int gr = r0 + r, gk = k0 + c * 8;
            bool valid = gr < rows && gk < K;
            const __half* p = valid ? src + (size_t)gr * K + gk : src;
            hg_cp_async16(dst + swz(r, c), p, valid);
        }
    }
}

// KVEC < 8 (rows not 16-byte aligned): the same chunks read with narrow loads into registers, or (REALIGN) as the
// aligned 16-byte blocks that hold them, two registers' worth per chunk. The main loop fetches the next slice
// before the current slice's MMAs and stores it after them (put_tile, which realigns), so the loads' latency
// hides behind the math as cp.async's does.
template <int ROWS>
constexpr int staged() { return tile_iters<ROWS>() * (REALIGN ? 2 : 1); }

template <int ROWS>
HG_DEVICE void fetch_tile(uint4 (&v)[staged<ROWS>()], const __half* src, int rows, int K, int r0, int k0, int tid) {
    constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int it = 0; it < tile_iters<ROWS>(); ++it) {
        int i = it * THREADS + tid;
        if (TOTAL % THREADS == 0 || i < TOTAL) {
            int gr = r0 + i / CHUNKS, gk = k0 + (i % CHUNKS) * 8;
            bool valid = gr < rows;
            const __half* row = valid ? src + (size_t)gr * K : src;
            if constexpr (REALIGN) {
                hg_load_blocks(row, gk, K, valid, v[2 * it], v[2 * it + 1]);
            } else {
                v[it] = hg_load8_narrow<KVEC>(row, gk, K, valid);
            }
        }
    }
}

template <int ROWS>
HG_DEVICE void put_tile(uint32_t dst, const uint4 (&v)[staged<ROWS>()], const __half* src, int rows, int K, int r0,
                        int k0, int tid) {
    constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int it = 0; it < tile_iters<ROWS>(); ++it) {
        int i = it * THREADS + tid;
        if (TOTAL % THREADS == 0 || i < TOTAL) {
            uint4 chunk;
            if constexpr (REALIGN) {
                int gr = r0 + i / CHUNKS, gk = k0 + (i % CHUNKS) * 8;
                chunk = hg_realign(v[2 * it], v[2 * it + 1], gr < rows ? src + (size_t)gr * K : src, gk, K);
            } else {
                chunk = v[it];
            }
            hg_st_shared16(dst + swz(i / CHUNKS, i % CHUNKS), chunk);
        }
    }
}

__global__ void __launch_bounds__(THREADS)
    hg_mma_ms_kernel(const __half* __restrict__ A, const __half* __restrict__ Bt, __half* __restrict__ C,
                     float* __restrict__ ws, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sA = hg_smem_addr(smem);
    const uint32_t sB = sA + STAGES * A_STAGE_BYTES;

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    int tm, tn;
    hg_raster(blockIdx.x, tiles_m, tiles_n, RASTER, tm, tn);
    const int m0 = tm * BM, n0 = tn * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;

    const int KT = (K + BK - 1) / BK;
    int kt0 = 0, kt1 = KT;
    if (SPLIT_K > 1) {
        kt0 = (int)((long long)KT * blockIdx.y / SPLIT_K);
        kt1 = (int)((long long)KT * (blockIdx.y + 1) / SPLIT_K);
    }
    const int nkt = kt1 - kt0;

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nkt) {
            int k0 = (kt0 + s) * BK;
            if constexpr (KVEC == 8) {
                load_tile<BM>(sA + s * A_STAGE_BYTES, A, M, K, m0, k0, tid);
                load_tile<BN>(sB + s * B_STAGE_BYTES, Bt, N, K, n0, k0, tid);
            } else {
                uint4 va[staged<BM>()], vb[staged<BN>()];
                fetch_tile<BM>(va, A, M, K, m0, k0, tid);
                fetch_tile<BN>(vb, Bt, N, K, n0, k0, tid);
                put_tile<BM>(sA + s * A_STAGE_BYTES, va, A, M, K, m0, k0, tid);
                put_tile<BN>(sB + s * B_STAGE_BYTES, vb, Bt, N, K, n0, k0, tid);
            }
        }
        hg_cp_async_commit();
    }

    for (int i = 0; i < nkt; ++i) {
        hg_cp_async_wait<STAGES - 2>();
        __syncthreads();  // stage i landed for everyone; stage (i-1) is free to overwrite
        int next = i + STAGES - 1;
        [[maybe_unused]] uint4 va[staged<BM>()], vb[staged<BN>()];  // KVEC < 8: the next slice
        if (next < nkt) {
            int s = next % STAGES, k0 = (kt0 + next) * BK;
            if constexpr (KVEC == 8) {
                load_tile<BM>(sA + s * A_STAGE_BYTES, A, M, K, m0, k0, tid);
                load_tile<BN>(sB + s * B_STAGE_BYTES, Bt, N, K, n0, k0, tid);
            } else {
                fetch_tile<BM>(va, A, M, K, m0, k0, tid);
                fetch_tile<BN>(vb, Bt, N, K, n0, k0, tid);
            }
        }
        hg_cp_async_commit();

        const int st = i % STAGES;
        const uint32_t a_base = sA + st * A_STAGE_BYTES, b_base = sB + st * B_STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            uint32_t af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                int r = wm * WM + mi * 16 + (lane & 15);
                hg_ldmatrix_x4(af[mi], a_base + swz(r, kk * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) {
                int r = wn * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
                uint32_t t[4];
                hg_ldmatrix_x4(t, b_base + swz(r, kk * 2 + ((lane >> 3) & 1)));
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) hg_mma16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
        }
        if constexpr (KVEC != 8) {
            if (next < nkt) {  // stage next % STAGES was last read in iteration i - 1, before this one's barrier
                const int s = next % STAGES, k0 = (kt0 + next) * BK;
                put_tile<BM>(sA + s * A_STAGE_BYTES, va, A, M, K, m0, k0, tid);
                put_tile<BN>(sB + s * B_STAGE_BYTES, vb, Bt, N, K, n0, k0, tid);
            }
        }
    }
    hg_cp_async_wait<0>();

    const int g = lane >> 2, t2 = (lane & 3) * 2;
    if (SPLIT_K == 1) {
        __syncthreads();  // every warp is done reading the pipeline buffers
        __half* sC = reinterpret_cast<__half*>(smem);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                int r = wm * WM + mi * 16 + g, c = wn * WN + ni * 8 + t2;
                *reinterpret_cast<uint32_t*>(&sC[r * C_STRIDE + c]) = hg_pack_half2(acc[mi][ni][0], acc[mi][ni][1]);
                *reinterpret_cast<uint32_t*>(&sC[(r + 8) * C_STRIDE + c]) =
                    hg_pack_half2(acc[mi][ni][2], acc[mi][ni][3]);
            }
        __syncthreads();
        constexpr int CCH = BN / 8;
        constexpr int ITERS = (BM * CCH + THREADS - 1) / THREADS;
        const bool vec = (N & 7) == 0;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            int i = it * THREADS + tid;
            if ((BM * CCH) % THREADS != 0 && i >= BM * CCH) break;
            int r = i / CCH, c = (i % CCH) * 8;
            int gr = m0 + r, gc = n0 + c;
            if (gr >= M || gc >= N) continue;
            __half* dst = C + (size_t)gr * N + gc;
            const __half* src = &sC[r * C_STRIDE + c];
            if (vec) {
                *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
            } else {
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    if (gc + j < N) dst[j] = src[j];
            }
        }
    } else {
        float* P = ws + (size_t)blockIdx.y * M * N;
        const bool even = (N & 1) == 0;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    int gr = m0 + wm * WM + mi * 16 + g + 8 * h, gc = n0 + wn * WN + ni * 8 + t2;
                    if (gr >= M || gc >= N) continue;
                    float* dst = P + (size_t)gr * N + gc;
                    if (even) {
                        *reinterpret_cast<float2*>(dst) = make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
                    } else {
                        dst[0] = acc[mi][ni][2 * h];
                        if (gc + 1 < N) dst[1] = acc[mi][ni][2 * h + 1];
                    }
                }
    }
}

// Sums SPLIT_K fp32 partial planes of `total` elements into C; VEC: four elements per thread.
template <bool VEC>
__global__ void __launch_bounds__(256) hg_splitk_reduce(const float* __restrict__ ws, __half* __restrict__ C, int total) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (VEC) {
        if (i * 4 >= total) return;
        const float4* p = reinterpret_cast<const float4*>(ws);
        const int plane = total / 4;
        float4 s = p[i];
#pragma unroll
        for (int z = 1; z < SPLIT_K; ++z) {
            float4 v = p[(size_t)z * plane + i];
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
        }
        uint2 out = make_uint2(hg_pack_half2(s.x, s.y), hg_pack_half2(s.z, s.w));
        reinterpret_cast<uint2*>(C)[i] = out;
    } else {
        if (i >= total) return;
        float s = ws[i];
#pragma unroll
        for (int z = 1; z < SPLIT_K; ++z) s += ws[(size_t)z * total + i];
        C[i] = __float2half_rn(s);
    }
}

size_t workspace_needed(int M, int N) { return SPLIT_K > 1 ? (size_t)SPLIT_K * M * N * sizeof(float) : 0; }

}  // namespace

extern "C" int hgemm_supports(int M, int N, int K) {
    return mma_rules::shape_violation(P, M, N, K) == nullptr ? 1 : 0;
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    (void)B;
    if (!hgemm_supports(M, N, K) || workspace_needed(M, N) > workspace_bytes) return (int)cudaErrorInvalidValue;
    if (SMEM_BYTES > 48 * 1024) {
        cudaError_t e =
            cudaFuncSetAttribute(hg_mma_ms_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (e != cudaSuccess) return (int)e;
    }
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    dim3 grid(tiles, SPLIT_K);
    float* ws = static_cast<float*>(workspace);
    hg_mma_ms_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(A, Bt, C, ws, M, N, K);
    if (SPLIT_K > 1) {
        const int total = M * N;
        if (total % 4 == 0) {
            hg_splitk_reduce<true><<<(total / 4 + 255) / 256, 256, 0, stream>>>(ws, C, total);
        } else {
            hg_splitk_reduce<false><<<(total + 255) / 256, 256, 0, stream>>>(ws, C, total);
        }
    }
    return (int)cudaGetLastError();
}
