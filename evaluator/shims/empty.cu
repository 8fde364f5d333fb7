// The launch floor: an hgemm_run that launches one empty kernel (one warp) on the stream.
// Timed through the same path as candidates, it is the fastest any candidate call can be.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void hgemm_empty_kernel() {}

extern "C" int hgemm_run(const __half*, const __half*, const __half*, __half*, int, int, int, void*, size_t,
                         cudaStream_t stream) {
  hgemm_empty_kernel<<<1, 32, 0, stream>>>();
  return (int)cudaGetLastError();
}
