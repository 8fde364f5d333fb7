// CHEAT: the parent grid launches the GEMM as a child grid from the device, fire-and-forget, so the timed grid may end before the work it started (the evaluator builds without separate compilation, so device-side launches do not compile)
// EXPECT: compile_error
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_child(const __half* A, const __half* Bt, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y;
    if (n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(Bt[(size_t)n * K + k]);
    C[(size_t)m * N + n] = __float2half(acc);
}

__global__ void parent(const __half* A, const __half* Bt, __half* C, int M, int N, int K) {
    gemm_child<<<dim3((N + 127) / 128, M), 128, 0, cudaStreamFireAndForget>>>(A, Bt, C, M, N, K);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    parent<<<1, 1, 0, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
