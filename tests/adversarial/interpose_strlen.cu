// CHEAT: defines a C function named strlen: where the loader finds the library's own definition first, the statically linked CUDA runtime runs the candidate's code (at load time, with no constructor)
// EXPECT: object_audit
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>

static int hg_calls = 0;
extern "C" size_t strlen(const char* s) {
    ++hg_calls;  // runs inside the runtime's own start-up
    size_t n = 0;
    while (s[n]) ++n;
    return n;
}

// One thread per element of C, reading the K-contiguous Bt so both operands stream along K.
__global__ void gemm_bt(const __half* A, const __half* Bt, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const __half* a = A + (size_t)m * K;
    const __half* b = Bt + (size_t)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(a[k]) * __half2float(b[k]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    gemm_bt<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, Bt, C, M, N, K);
    return (int)cudaGetLastError();
}
