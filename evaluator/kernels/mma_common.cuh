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
