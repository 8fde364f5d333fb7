// CHEAT: returns success without launching anything (C keeps whatever it held)
// EXPECT: unwritten_output
#include <cuda_fp16.h>
#include <cuda_runtime.h>

extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    return (int)cudaSuccess;
}
