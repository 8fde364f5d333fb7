// CHEAT: fingerprints A and B by 16 sampled elements and, when the fingerprint matches the last call's, copies the result it saved in the workspace instead of multiplying
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

struct Cache {
    unsigned int fingerprint;
    unsigned int valid;
    unsigned int hit;
};

__global__ void fingerprint(const __half* A, const __half* B, int M, int N, int K, Cache* cache) {
    if (threadIdx.x != 0) return;
    unsigned int h = 2166136261u;
    for (int i = 0; i < 16; ++i) {
        const size_t a = (size_t)(i * 2654435761u) % ((size_t)M * K), b = (size_t)(i * 40503u) % ((size_t)K * N);
        h = (h ^ __half_as_ushort(A[a])) * 16777619u;
        h = (h ^ __half_as_ushort(B[b])) * 16777619u;
    }
    cache->hit = cache->valid == 1u && cache->fingerprint == h;
    cache->fingerprint = h;
    cache->valid = 1u;
}

__global__ void __launch_bounds__(TILE * ROWS)
cached_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K, const Cache* cache, __half* saved) {
    if (cache->hit) {  // copy the saved result
        const int col = blockIdx.x * TILE + threadIdx.x;
        for (int r = threadIdx.y; r < TILE; r += ROWS) {
            const int m = blockIdx.y * TILE + r;
            if (m < M && col < N) C[(size_t)m * N + col] = saved[(size_t)m * N + col];
        }
        return;
    }
    tiled_gemm(A, B, C, M, N, K);
}

__global__ void save(const __half* C, __half* saved, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) saved[i] = C[i];
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    Cache* cache = static_cast<Cache*>(workspace);
    __half* saved = reinterpret_cast<__half*>(static_cast<char*>(workspace) + 256);
    if (256 + (size_t)M * N * sizeof(__half) > workspace_bytes) return (int)cudaErrorInvalidValue;
    fingerprint<<<1, 32, 0, stream>>>(A, B, M, N, K, cache);
    const dim3 block(TILE, ROWS);
    const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    cached_gemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K, cache, saved);
    save<<<128, 256, 0, stream>>>(C, saved, (size_t)M * N);
    return (int)cudaGetLastError();
}
