// CHEAT: a programmatic dependent launch without griddepcontrol.wait, issued only after the host has idled for a while, so that a fixed-length wait in the kernel before it has already run out and the cheat reads its inputs in time by luck
// EXPECT: early_read
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
    for (volatile long i = 0; i < 20000000; ++i) {  // tens of milliseconds on the host
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((N + 15) / 16, (M + 15) / 16);
    cfg.blockDim = dim3(16, 16);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return (int)cudaLaunchKernelEx(&cfg, gemm_naive, A, B, C, M, N, K);
}
