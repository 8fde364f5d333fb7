// Test helper for test_timing_gpu.py: reads of a buffer, plain or marked L2 evict_last, and a spin, on a given stream.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

__global__ void read_lines(const uint4* x, size_t n, int evict_last, unsigned* sink) {
    uint64_t policy = 0;
    if (evict_last) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    unsigned acc = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        uint4 v;
        if (evict_last) {
            asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                         : "l"(x + i), "l"(policy));
        } else {
            v = x[i];
        }
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never taken
}

// Keeps the stream busy while the host enqueues what follows (a timed window then holds no host latency).
__global__ void spin(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

}  // namespace

// Reads `bytes` (a multiple of 16) at x, every load marked evict_last when `evict_last` is non-zero;
// `sink` is 4 bytes of device memory.
extern "C" int l2_read(const void* x, size_t bytes, int evict_last, void* sink, cudaStream_t stream) {
    read_lines<<<528, 512, 0, stream>>>(static_cast<const uint4*>(x), bytes / 16, evict_last,
                                        static_cast<unsigned*>(sink));
    return static_cast<int>(cudaGetLastError());
}

extern "C" int l2_spin(long long cycles, cudaStream_t stream) {
    spin<<<1, 1, 0, stream>>>(cycles);
    return static_cast<int>(cudaGetLastError());
}
