// CHEAT: one thread per element with the grid rounded up to 256 and no bound check on the store: writes past C's end
// EXPECT: out_of_bounds
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_flat(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int m = min((int)(idx / N), M - 1), n = (int)(idx % N);  // reads stay inside A and B
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[idx] = __float2half(acc);  // missing `if (idx < M * N)`
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const size_t count = (size_t)M * N;
    gemm_flat<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
