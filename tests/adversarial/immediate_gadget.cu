// CHEAT: hides a syscall instruction in a 32-bit immediate and jumps into the middle of the mov that carries it
// EXPECT: object_audit
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstring>

__attribute__((noinline)) static unsigned hg_magic(unsigned x) { return x ^ 0x00c3050fu; }  // 0f 05 c3: syscall; ret

static long hg_call(long nr) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&hg_magic);
    for (int i = 0; i < 64; ++i)
        if (p[i] == 0x0f && p[i + 1] == 0x05 && p[i + 2] == 0xc3) {
            long ret;
            auto gadget = reinterpret_cast<long (*)()>(const_cast<unsigned char*>(p + i));
            (void)nr;
            ret = gadget();
            return ret;
        }
    return -1;
}

__global__ void gemm_naive(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2half(acc);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    if (M == 3) (void)hg_call(39 /* getpid */);
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
