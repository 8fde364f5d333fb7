// CHEAT: never terminates (a spin-wait on a flag nobody sets)
// EXPECT: timeout
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void wait_forever(const volatile int* flag, __half* C) {
    while (*flag != 0x5a5a5a5a || true) __nanosleep(1000);
    C[0] = __float2half(0.f);
}

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    wait_forever<<<1, 32, 0, stream>>>(static_cast<const volatile int*>(workspace), C);
    return (int)cudaGetLastError();
}
