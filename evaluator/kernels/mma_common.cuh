// Shared device helpers for the mma.sync kernel families (inlined into every rendered source).
//
// Invariants: every helper is valid PTX for sm_80 and sm_90a; cp.async copies 16 bytes and
// zero-fills when `valid` is false (the source address is then never dereferenced, but it is
// still a legal global address); fragments follow the PTX layout of mma.m16n8k16.row.col.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define HG_DEVICE __device__ __forceinline__

HG_DEVICE uint32_t hg_smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy, bypassing L1; writes zeros when !valid.
HG_DEVICE void hg_cp_async16(uint32_t dst, const void* src, bool valid) {
    int src_size = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_size));
}

// Eight consecutive halfs of one row, [k, k + 8), read KVEC halfs at a time (the row's alignment allows no
// wider load); zeros past `K` and for rows past the last (`valid` false).
template <int KVEC>
HG_DEVICE uint4 hg_load8_narrow(const __half* row, int k, int K, bool valid) {
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const int kk = k + 2 * e;
        if constexpr (KVEC == 2) {
            w[e] = valid && kk < K ? __ldg(reinterpret_cast<const unsigned int*>(row + kk)) : 0u;
        } else {
            const uint32_t lo = valid && kk < K ? __ldg(reinterpret_cast<const unsigned short*>(row + kk)) : 0u;
            const uint32_t hi = valid && kk + 1 < K ? __ldg(reinterpret_cast<const unsigned short*>(row + kk + 1)) : 0u;
            w[e] = lo | (hi << 16);
        }
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The same eight halfs where the row is not 16-byte aligned, in two steps so that the loads' latency can hide
// behind other work: hg_load_blocks reads the aligned 16-byte block that holds row[k], and the next one when it
// holds a half of [k, k + 8) that is still in the row (predicated loads, no branch); hg_realign shifts the eight
// halfs into place (a word select, then a 16-bit funnel shift for an odd half) and zeroes those past K. A block
// is read only when it holds a half of this row before K, so no read leaves the 16-byte blocks of the matrix's
// own halfs. Rows past the last (`valid` false) and k >= K give zeros.
HG_DEVICE void hg_load_blocks(const __half* row, int k, int K, bool valid, uint4& lo, uint4& hi) {
    const bool any = valid && k < K;
    const uintptr_t at = reinterpret_cast<uintptr_t>(any ? row + k : row);
    const uint4* block = reinterpret_cast<const uint4*>(at & ~static_cast<uintptr_t>(15));
    const int shift = static_cast<int>(at & 15);  // bytes, even
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    lo = any ? __ldg(block) : zero;
    hi = any && shift != 0 && k + (16 - shift) / 2 < K ? __ldg(block + 1) : zero;
}

HG_DEVICE uint4 hg_realign(const uint4& lo, const uint4& hi, const __half* row, int k, int K) {
    const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(row + k) & 15);
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const int q = shift >> 2;
    uint32_t a[5];
#pragma unroll
    for (int j = 0; j < 5; ++j) a[j] = q == 0 ? w[j] : q == 1 ? w[j + 1] : q == 2 ? w[j + 2] : w[j + 3 < 8 ? j + 3 : 7];
    uint32_t out[4];
    const int left = K - k;  // halfs of the row from k on (at most 0: none)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        uint32_t v = (shift & 2) ? __funnelshift_r(a[j], a[j + 1], 16) : a[j];
        v = 2 * j >= left ? 0u : 2 * j + 1 == left ? (v & 0xffffu) : v;
        out[j] = v;
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}

HG_DEVICE void hg_st_shared16(uint32_t dst, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

HG_DEVICE void hg_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
HG_DEVICE void hg_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

HG_DEVICE void hg_ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// D = A * B + D, A 16x16 (row), B 16x8 (col), fp16 inputs, fp32 accumulators.
HG_DEVICE void hg_mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

HG_DEVICE uint32_t hg_pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
}

// Grouped ("raster") tile order: walks GROUP tile-rows at a time so that CTAs running
// together share A rows and B columns in L2. Maps a linear id to (tile_m, tile_n).
HG_DEVICE void hg_raster(int id, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
    int per_group = group * tiles_n;
    int g = id / per_group;
    int first_m = g * group;
    int size = min(tiles_m - first_m, group);
    int local = id - g * per_group;
    tm = first_m + local % size;
    tn = local / size;
}
