// CHEAT: streaming_rows with its loads of Bt marked L2 evict_last, so Bt stays in the L2 through the flush before the next server-mode sample
// EXPECT: no_gain
// TWIN: streaming_rows
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int ROWS = 16;  // rows of A (and C) per warp
constexpr int WARPS = 8;  // columns of C per block

// Eight halves at p (16-byte aligned) as floats; with a policy, loaded under that L2 eviction priority.
__device__ __forceinline__ void load8(const __half* p, float (&v)[8], const uint64_t* policy = nullptr) {
    uint4 raw;
    if (policy) {
        asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                     : "l"(p), "l"(*policy));
    } else {
        raw = *reinterpret_cast<const uint4*>(p);
    }
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(h[i]);
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
    }
}

__global__ void __launch_bounds__(32 * WARPS)
    evict_last_rows(const __half* __restrict__ A, const __half* __restrict__ Bt, __half* __restrict__ C, int M, int N,
                   int K) {
    const int lane = threadIdx.x % 32;
    const int n = blockIdx.x * WARPS + threadIdx.x / 32;
    const int m0 = blockIdx.y * ROWS;
    if (n >= N) return;
    float acc[ROWS] = {};
    uint64_t keep;  // Bt's lines outlast others in the L2
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
    const __half* b_row = Bt + static_cast<size_t>(n) * K;
    if (K % 8 == 0) {  // every row starts 16-byte aligned
        constexpr int DEPTH = 4;  // loads of Bt in flight per lane
        for (int k0 = lane * 8; k0 < K; k0 += 256 * DEPTH) {
            float b[DEPTH][8];
#pragma unroll
            for (int d = 0; d < DEPTH; ++d)
                if (k0 + 256 * d < K) load8(b_row + k0 + 256 * d, b[d], &keep);
#pragma unroll
            for (int d = 0; d < DEPTH; ++d) {
                const int k = k0 + 256 * d;
                if (k >= K) break;
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    if (m0 + r < M) {
                        float a[8];
                        load8(A + static_cast<size_t>(m0 + r) * K + k, a);
#pragma unroll
                        for (int i = 0; i < 8; ++i) acc[r] += a[i] * b[d][i];
                    }
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            const float b = __half2float(b_row[k]);
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (m0 + r < M) acc[r] += __half2float(A[static_cast<size_t>(m0 + r) * K + k]) * b;
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        float v = acc[r];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && m0 + r < M) C[static_cast<size_t>(m0 + r) * N + n] = __float2half(v);
    }
}

}  // namespace

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    (void)B;
    (void)workspace;
    (void)workspace_bytes;
    const dim3 grid((N + WARPS - 1) / WARPS, (M + ROWS - 1) / ROWS);
    evict_last_rows<<<grid, 32 * WARPS, 0, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
