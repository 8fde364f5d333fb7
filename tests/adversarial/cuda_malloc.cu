// CHEAT: allocates its own scratch buffer with cudaMalloc on every call instead of using the workspace
// EXPECT: static_check
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_to_float(const __half* A, const __half* B, float* out, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    out[(size_t)m * N + n] = acc;
}

__global__ void to_half(const float* in, __half* C, size_t count) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) C[i] = __float2half(in[i]);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    float* scratch = nullptr;
    const size_t count = (size_t)M * N;
    if (cudaMalloc(&scratch, count * sizeof(float)) != cudaSuccess) return (int)cudaErrorMemoryAllocation;
    gemm_to_float<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, scratch, M, N, K);
    to_half<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(scratch, C, count);
    cudaFreeAsync(scratch, stream);
    return (int)cudaGetLastError();
}
