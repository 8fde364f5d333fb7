// CHEAT: split-K atomics into the fp32 workspace without clearing it first (assumes it holds zeros)
// EXPECT: incorrect
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_split_k(const __half* A, const __half* B, float* acc_out, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const int half_k = (K + 1) / 2, k_begin = blockIdx.z * half_k, k_end = min(K, k_begin + half_k);
    float acc = 0.f;
    for (int k = k_begin; k < k_end; ++k)
        acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    atomicAdd(&acc_out[(size_t)m * N + n], acc);  // missing: cudaMemsetAsync(workspace, 0, ...) before
}

__global__ void to_half(const float* in, __half* C, size_t count) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) C[i] = __float2half(in[i]);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const size_t count = (size_t)M * N;
    if (workspace_bytes < count * sizeof(float)) return (int)cudaErrorInvalidValue;
    float* acc = static_cast<float*>(workspace);
    gemm_split_k<<<dim3((N + 15) / 16, (M + 15) / 16, 2), dim3(16, 16), 0, stream>>>(A, B, acc, M, N, K);
    to_half<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(acc, C, count);
    return (int)cudaGetLastError();
}
