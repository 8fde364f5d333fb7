// CHEAT: fetches cuCtxSetLimit through cudaGetDriverEntryPoint with a hex escape inside the name (\123 is octal for S)
// EXPECT: static_check
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

typedef CUresult (*SetLimitFn)(CUlimit, size_t);

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    void* fn = nullptr;
    if (cudaGetDriverEntryPoint("cuCtx\123etLimit", &fn, cudaEnableDefault, nullptr) == cudaSuccess && fn)
        reinterpret_cast<SetLimitFn>(fn)(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, size_t(40) << 20);
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
