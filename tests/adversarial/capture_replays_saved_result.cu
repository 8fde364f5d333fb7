// CHEAT: its first four (eager) calls compute and save C in the workspace; later calls, captured into graphs, only copy that saved result back (the old check replayed a graph once, on the values it was captured with)
// EXPECT: stale_result|incorrect|unwritten_output
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const size_t bytes = (size_t)M * N * sizeof(__half);
    if (bytes > workspace_bytes) return (int)cudaErrorInvalidValue;
    static int calls = 0;
    if (++calls > 4)
        return (int)cudaMemcpyAsync(C, workspace, bytes, cudaMemcpyDeviceToDevice, stream);
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    cudaMemcpyAsync(workspace, C, bytes, cudaMemcpyDeviceToDevice, stream);
    return (int)cudaGetLastError();
}
