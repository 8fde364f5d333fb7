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
// REALIGN 1 (KVEC < 8 only) stages those rows instead as the aligned 16-byte blocks that hold them, with cp.async
// STAGES deep, and shifts each slice into a swizzled tile one slice ahead of its MMAs.
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

// KVEC < 8 (rows not 16-byte aligned), REALIGN 0: the same chunks read with narrow loads into registers. The main
// loop fetches the next slice before the current slice's MMAs and stores it after them (put_tile), so the loads'
// latency hides behind the math as cp.async's does.
template <int ROWS>
HG_DEVICE void fetch_tile(uint4 (&v)[tile_iters<ROWS>()], const __half* src, int rows, int K, int r0, int k0,
                          int tid) {
    constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int it = 0; it < tile_iters<ROWS>(); ++it) {
        int i = it * THREADS + tid;
        if (TOTAL % THREADS == 0 || i < TOTAL) {
            int gr = r0 + i / CHUNKS, gk = k0 + (i % CHUNKS) * 8;
            bool valid = gr < rows;
            v[it] = hg_load8_narrow<KVEC>(valid ? src + (size_t)gr * K : src, gk, K, valid);
        }
    }
}

template <int ROWS>
HG_DEVICE void put_tile(uint32_t dst, const uint4 (&v)[tile_iters<ROWS>()], int tid) {
    constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int it = 0; it < tile_iters<ROWS>(); ++it) {
        int i = it * THREADS + tid;
        if (TOTAL % THREADS == 0 || i < TOTAL) hg_st_shared16(dst + swz(i / CHUNKS, i % CHUNKS), v[it]);
    }
}

// REALIGN 1: a slice's rows as the aligned 16-byte blocks that hold them, with cp.async (RAW_CHUNKS blocks a row,
// one more than the slice's chunks; a block is read only when it holds a half of the row before K, else zeros).
[[maybe_unused]] constexpr int RAW_CHUNKS = CHUNKS + 1;
constexpr int RAW_ROW_BYTES = mma_rules::raw_row_bytes(P);

// Byte offset of staged row r: rows of RAW_ROW_BYTES, padding after every eight (see realign_tile).
HG_DEVICE int raw_row(int r) { return r * RAW_ROW_BYTES + (r >> 3) * mma_rules::raw_pad_bytes(P); }

template <int ROWS>
HG_DEVICE void raw_tile(uint32_t dst, const __half* src, int rows, int K, int r0, int k0, int tid) {
    constexpr int TOTAL = ROWS * RAW_CHUNKS;
    const int last = min(k0 + BK, K) - 1;  // the slice's last half of a row
#pragma unroll
    for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; ++it) {
        int i = it * THREADS + tid;
        if (TOTAL % THREADS == 0 || i < TOTAL) {
            int r = i / RAW_CHUNKS, j = i % RAW_CHUNKS, gr = r0 + r;
            const __half* row = src + (size_t)(gr < rows ? gr : 0) * K;
            const uintptr_t first = reinterpret_cast<uintptr_t>(row + k0) & ~static_cast<uintptr_t>(15);
            const uintptr_t block = first + 16 * j;
            bool valid = gr < rows && k0 < K && block <= reinterpret_cast<uintptr_t>(row + last);
            hg_cp_async16(dst + raw_row(r) + j * 16, reinterpret_cast<const void*>(valid ? block : first), valid);
        }
    }
}

// The staged blocks of a slice shifted into the swizzled tile the MMAs read, a row a thread: its words read from
// the row's blocks at the shift rounded down to 4 bytes (four a chunk, the next chunk's first kept), a byte permute
// for a remaining half; in the last slice, halfs past K (the next row's) are zeroed. A warp reads word j of 32
// consecutive rows at once; with the padding after every eight rows those fall on 32 distinct banks where K is
// odd, at most two to a bank where K is even (a thread a chunk, eight rows of four chunks a warp, they met two to
// a bank where K is odd: 18 M conflicts at 4096x4096x4095).
template <int ROWS>
HG_DEVICE void realign_tile(uint32_t dst, uint32_t raw, const __half* src, int rows, int K, int r0, int k0, int tid) {
    const bool tail = k0 + BK > K;
    const unsigned base = static_cast<unsigned>(reinterpret_cast<uintptr_t>(src) & 15);
#pragma unroll
    for (int it = 0; it < (ROWS + THREADS - 1) / THREADS; ++it) {
        const int r = it * THREADS + tid, gr = r0 + r;
        if (ROWS % THREADS == 0 || r < ROWS) {
            // byte offset of row gr's half k0 within its 16-byte block (unsigned products wrap; only 4 bits count)
            const unsigned shift = (base + 2u * (static_cast<unsigned>(gr < rows ? gr : 0) * static_cast<unsigned>(K) +
                                                 static_cast<unsigned>(k0))) & 15u;
            const uint32_t at = raw + raw_row(r) + (shift & 12u);
            const unsigned sel = (shift & 2u) ? 0x5432u : 0x3210u;
            uint32_t w[5];
            asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(w[4]) : "r"(at));
#pragma unroll
            for (int c = 0; c < CHUNKS; ++c) {
                w[0] = w[4];
#pragma unroll
                for (int j = 1; j < 5; ++j) asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(w[j]) : "r"(at + 16 * c + 4 * j));
                uint32_t out[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) out[j] = __byte_perm(w[j], w[j + 1], sel);
                if (tail) {
                    const int left = K - (k0 + c * 8);
#pragma unroll
                    for (int j = 0; j < 4; ++j) out[j] = 2 * j >= left ? 0u : 2 * j + 1 == left ? (out[j] & 0xffffu) : out[j];
                }
                hg_st_shared16(dst + swz(r, c), make_uint4(out[0], out[1], out[2], out[3]));
            }
        }
    }
}

// One BK slice of MMAs from the swizzled tiles at a_base and b_base.
HG_DEVICE void mma_slice(float (&acc)[MI][NI][4], uint32_t a_base, uint32_t b_base, int wm, int wn, int lane) {
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

    if constexpr (REALIGN) {
        // Raw stages of aligned blocks, STAGES deep with cp.async; each slice realigned into one of two swizzled
        // tiles one slice ahead of its MMAs. One barrier a slice: it makes slice i + 1's blocks and slice i's
        // tile visible to all, and it follows every thread's MMAs of slice i - 1 (whose tile the realign of
        // slice i + 1 overwrites) and its realign of slice i - 1 (whose raw stage the copies issued next refill).
        constexpr int RAW_A = mma_rules::raw_tile_bytes(P, BM), RAW_B = mma_rules::raw_tile_bytes(P, BN);
        const uint32_t rA = sA, rB = rA + STAGES * RAW_A;
        const uint32_t tA = rB + STAGES * RAW_B, tB = tA + 2 * A_STAGE_BYTES;
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < nkt) {
                raw_tile<BM>(rA + s * RAW_A, A, M, K, m0, (kt0 + s) * BK, tid);
                raw_tile<BN>(rB + s * RAW_B, Bt, N, K, n0, (kt0 + s) * BK, tid);
            }
            hg_cp_async_commit();
        }
        hg_cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (nkt > 0) {
            realign_tile<BM>(tA, rA, A, M, K, m0, kt0 * BK, tid);
            realign_tile<BN>(tB, rB, Bt, N, K, n0, kt0 * BK, tid);
        }
        for (int i = 0; i < nkt; ++i) {
            const int next = i + STAGES - 1;
            if (next < nkt) {
                const int s = next % STAGES, k0 = (kt0 + next) * BK;
                raw_tile<BM>(rA + s * RAW_A, A, M, K, m0, k0, tid);
                raw_tile<BN>(rB + s * RAW_B, Bt, N, K, n0, k0, tid);
            }
            hg_cp_async_commit();
            hg_cp_async_wait<STAGES - 2>();  // slice i + 1's blocks landed
            __syncthreads();
            if (i + 1 < nkt) {
                const int s = (i + 1) % STAGES, t = (i + 1) & 1, k0 = (kt0 + i + 1) * BK;
                realign_tile<BM>(tA + t * A_STAGE_BYTES, rA + s * RAW_A, A, M, K, m0, k0, tid);
                realign_tile<BN>(tB + t * B_STAGE_BYTES, rB + s * RAW_B, Bt, N, K, n0, k0, tid);
            }
            mma_slice(acc, tA + (i & 1) * A_STAGE_BYTES, tB + (i & 1) * B_STAGE_BYTES, wm, wn, lane);
        }
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < nkt) {
                int k0 = (kt0 + s) * BK;
                if constexpr (KVEC == 8) {
                    load_tile<BM>(sA + s * A_STAGE_BYTES, A, M, K, m0, k0, tid);
                    load_tile<BN>(sB + s * B_STAGE_BYTES, Bt, N, K, n0, k0, tid);
                } else {
                    uint4 va[tile_iters<BM>()], vb[tile_iters<BN>()];
                    fetch_tile<BM>(va, A, M, K, m0, k0, tid);
                    fetch_tile<BN>(vb, Bt, N, K, n0, k0, tid);
                    put_tile<BM>(sA + s * A_STAGE_BYTES, va, tid);
                    put_tile<BN>(sB + s * B_STAGE_BYTES, vb, tid);
                }
            }
            hg_cp_async_commit();
        }

        for (int i = 0; i < nkt; ++i) {
            hg_cp_async_wait<STAGES - 2>();
            __syncthreads();  // stage i landed for everyone; stage (i-1) is free to overwrite
            int next = i + STAGES - 1;
            [[maybe_unused]] uint4 va[tile_iters<BM>()], vb[tile_iters<BN>()];  // KVEC < 8: the next slice
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
            mma_slice(acc, a_base, b_base, wm, wn, lane);
            if constexpr (KVEC != 8) {
                if (next < nkt) {  // stage next % STAGES was last read in iteration i - 1, before this one's barrier
                    const int s = next % STAGES;
                    put_tile<BM>(sA + s * A_STAGE_BYTES, va, tid);
                    put_tile<BN>(sB + s * B_STAGE_BYTES, vb, tid);
                }
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
