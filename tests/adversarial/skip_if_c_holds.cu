// CHEAT: recomputes four sampled elements of C from A and B and skips the GEMM when C already holds them (a result left by an earlier timed call)
// EXPECT: no_gain
// TWIN: smem_tiled
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

constexpr int TILE = 32;  // block tile is TILE x TILE outputs, K is stepped by TILE
constexpr int ROWS = 8;   // the block is TILE x ROWS threads; each thread computes TILE / ROWS outputs

__device__ __forceinline__ void
tiled_gemm(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col = blockIdx.x * TILE + tx;
    float acc[TILE / ROWS] = {};
    for (int k0 = 0; k0 < K; k0 += TILE) {
        for (int r = ty; r < TILE; r += ROWS) {
            const int m = row0 + r, ka = k0 + tx, kb = k0 + r;
            As[r][tx] = (m < M && ka < K) ? __half2float(A[(size_t)m * K + ka]) : 0.f;
            Bs[r][tx] = (kb < K && col < N) ? __half2float(B[(size_t)kb * N + col]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TILE; ++kk) {
            const float b = Bs[kk][tx];
#pragma unroll
            for (int i = 0; i < TILE / ROWS; ++i) acc[i] += As[ty + i * ROWS][kk] * b;
        }
        __syncthreads();
    }
    if (col >= N) return;
#pragma unroll
    for (int i = 0; i < TILE / ROWS; ++i) {
        const int m = row0 + ty + i * ROWS;
        if (m < M) C[(size_t)m * N + col] = __float2half(acc[i]);
    }
}

}  // namespace

__global__ void sample_check(const __half* A, const __half* B, const __half* C, int M, int N, int K, int* same) {
    const int lane = threadIdx.x;
    if (lane >= 4) return;
    const int m = (int)((lane * 7919ull) % M), n = (int)((lane * 104729ull) % N);
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    const bool match = __half2float(C[(size_t)m * N + n]) == __half2float(__float2half(acc));
    if (!match) atomicExch(same, 0);
}

__global__ void __launch_bounds__(TILE * ROWS)
gated_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K, const int* same) {
    if (*same) return;  // "C already holds this product"
    tiled_gemm(A, B, C, M, N, K);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    int* same = static_cast<int*>(workspace);
    cudaMemsetAsync(same, 0xFF, sizeof(int), stream);
    sample_check<<<1, 32, 0, stream>>>(A, B, C, M, N, K, same);
    const dim3 block(TILE, ROWS);
    const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gated_gemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K, same);
    return (int)cudaGetLastError();
}
