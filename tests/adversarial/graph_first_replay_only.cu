// CHEAT: counts its calls: from the fifth on (the check's capture) it launches a GEMM that runs only the first time its graph is replayed (a device flag), so later replays leave C as it was
// EXPECT: stale_result|unwritten_output
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__device__ int graph_done;

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

__global__ void gemm_once(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    if (*(volatile int*)&graph_done) return;  // "the graph already produced this"
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

__global__ void mark_done() { graph_done = 1; }

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    static int calls = 0;
    const dim3 grid((N + 15) / 16, (M + 15) / 16), block(16, 16);
    if (++calls > 4) {  // three draws and the late-input call are eager; the capture comes next
        gemm_once<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
        mark_done<<<1, 1, 0, stream>>>();
    } else {
        gemm_naive<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
    }
    return (int)cudaGetLastError();
}
