// The evaluator's own kernels, loaded by the judge and by each runner next to (never inside) a candidate.
//
// - Values come from a counter-based hash of (seed, index): the judge regenerates any input a runner
//   was given from its seed alone, so a runner never has to be trusted to report what it computed on.
// - hg_witness reduces each row of an output against a vector drawn from its own seed: the judge checks
//   every timed launch's output through these row sums without copying the outputs.
// - hg_early_writer lets the next kernel on the stream launch before it has written its output
//   (programmatic dependent launch), and writes only once the next call is enqueued: a kernel that reads
//   its inputs without waiting sees stale values, however long the host took to launch it.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr uint16_t kPoison = 0x7E5A;  // an fp16 NaN with a payload no arithmetic produces

__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A value in [-1, 1) for (seed, index).
__device__ __forceinline__ float unit(uint64_t seed, uint64_t i) {
  uint64_t r = mix(seed ^ mix(i + 0x632BE59BD9B4E019ull));
  return (float)(r >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

__device__ __forceinline__ size_t grid_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

__global__ void fill_kernel(__half* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) p[i] = __float2half_rn(unit(seed, i) * scale);
}

// bt[c * rows + r] = the value fill_kernel puts at b[r * cols + c]: the transpose of the same draw.
__global__ void fill_transposed_kernel(__half* bt, int rows, int cols, uint64_t seed, float scale) {
  size_t n = (size_t)rows * cols;
  for (size_t i = grid_index(); i < n; i += grid_stride()) {
    size_t c = i / rows, r = i % rows;
    bt[i] = __float2half_rn(unit(seed, r * (size_t)cols + c) * scale);
  }
}

__global__ void bits_kernel(uint32_t* p, size_t words, uint64_t seed) {
  for (size_t i = grid_index(); i < words; i += grid_stride()) p[i] = (uint32_t)mix(seed ^ mix(i));
}

__global__ void poison_kernel(uint16_t* p, size_t n) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) p[i] = kPoison;
}

__global__ void vector_kernel(double* x, int n, uint64_t seed) {
  for (size_t i = grid_index(); i < (size_t)n; i += grid_stride()) x[i] = unit(seed, i);
}

// One block per row: y = sum_j C[i,j] x_j, y2 = sum_j (C[i,j] x_j)^2, bad += unwritten or non-finite.
__global__ void witness_kernel(const uint16_t* c, int rows, int cols, uint64_t seed, double* y, double* y2,
                               unsigned long long* bad) {
  __shared__ double s1[32], s2[32];
  __shared__ unsigned long long sb[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    double a = 0.0, b = 0.0;
    unsigned long long nbad = 0;
    const uint16_t* r = c + (size_t)row * cols;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      uint16_t bits = r[j];
      if (bits == kPoison || (bits & 0x7C00) == 0x7C00) {
        ++nbad;
        continue;
      }
      double v = (double)__half2float(__ushort_as_half(bits)) * (double)unit(seed, j);
      a += v;
      b += v * v;
    }
    for (int off = 16; off > 0; off >>= 1) {
      a += __shfl_down_sync(0xffffffffu, a, off);
      b += __shfl_down_sync(0xffffffffu, b, off);
      nbad += __shfl_down_sync(0xffffffffu, nbad, off);
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) s1[warp] = a, s2[warp] = b, sb[warp] = nbad;
    __syncthreads();
    if (threadIdx.x == 0) {
      double ta = 0.0, tb = 0.0;
      unsigned long long tbad = 0;
      for (int w = 0; w < (int)(blockDim.x / 32); ++w) ta += s1[w], tb += s2[w], tbad += sb[w];
      y[row] = ta;
      y2[row] = tb;
      if (tbad) atomicAdd(bad, tbad);
    }
    __syncthreads();
  }
}

// out[r] = sum_c value(seed, r * cols + c) * v[c]: a generated matrix times a vector, without the matrix.
__global__ void gen_matvec_kernel(int rows, int cols, uint64_t seed, float scale, const double* v, double* out) {
  __shared__ double part[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    double acc = 0.0;
    const size_t base = (size_t)row * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      acc += (double)__half2float(__float2half_rn(unit(seed, base + c) * scale)) * v[c];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0.0;
      for (int w = 0; w < (int)(blockDim.x / 32); ++w) total += part[w];
      out[row] = total;
    }
    __syncthreads();
  }
}

__global__ void spin_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Lets dependents launch, waits until the runner says the call after it has been enqueued (`go`, set from
// another stream; at most `wait_ns` of wall time), spins `cycles` more so that a dependent that does not
// wait runs meanwhile, then copies `src` into `dst`.
__global__ void early_writer_kernel(const uint16_t* src, uint16_t* dst, size_t n, long long cycles,
                                    const volatile int* go, uint64_t wait_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (threadIdx.x == 0) {
    const uint64_t since = global_ns();
    while (*go == 0 && global_ns() - since < wait_ns) {
    }
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
  }
  __syncthreads();
  for (size_t i = grid_index(); i < n; i += grid_stride()) dst[i] = src[i];
}

int blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (int)(b < 4096 ? (b ? b : 1) : 4096);
}

}  // namespace

extern "C" {

int hg_fill(__half* p, size_t n, unsigned long long seed, float scale, cudaStream_t s) {
  fill_kernel<<<blocks_for(n), 256, 0, s>>>(p, n, seed, scale);
  return (int)cudaGetLastError();
}

int hg_fill_transposed(__half* bt, int rows, int cols, unsigned long long seed, float scale, cudaStream_t s) {
  fill_transposed_kernel<<<blocks_for((size_t)rows * cols), 256, 0, s>>>(bt, rows, cols, seed, scale);
  return (int)cudaGetLastError();
}

int hg_fill_bits(void* p, size_t nbytes, unsigned long long seed, cudaStream_t s) {
  bits_kernel<<<blocks_for(nbytes / 4), 256, 0, s>>>((uint32_t*)p, nbytes / 4, seed);
  return (int)cudaGetLastError();
}

int hg_poison(void* p, size_t n, cudaStream_t s) {
  poison_kernel<<<blocks_for(n), 256, 0, s>>>((uint16_t*)p, n);
  return (int)cudaGetLastError();
}

int hg_vector(double* x, int n, unsigned long long seed, cudaStream_t s) {
  vector_kernel<<<blocks_for((size_t)n), 256, 0, s>>>(x, n, seed);
  return (int)cudaGetLastError();
}

int hg_witness(const void* c, int rows, int cols, unsigned long long seed, double* y, double* y2,
               unsigned long long* bad, cudaStream_t s) {
  int grid = rows < 8192 ? rows : 8192;
  witness_kernel<<<grid, 256, 0, s>>>((const uint16_t*)c, rows, cols, seed, y, y2, bad);
  return (int)cudaGetLastError();
}

int hg_gen_matvec(int rows, int cols, unsigned long long seed, float scale, const double* v, double* out,
                  cudaStream_t s) {
  int grid = rows < 16384 ? rows : 16384;
  gen_matvec_kernel<<<grid, 256, 0, s>>>(rows, cols, seed, scale, v, out);
  return (int)cudaGetLastError();
}

int hg_spin(long long cycles, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(cycles);
  return (int)cudaGetLastError();
}

int hg_early_writer(const void* src, void* dst, size_t n, long long cycles, const void* go,
                    unsigned long long wait_ns, cudaStream_t s) {
  early_writer_kernel<<<8, 256, 0, s>>>((const uint16_t*)src, (uint16_t*)dst, n, cycles, (const volatile int*)go,
                                        wait_ns);
  return (int)cudaGetLastError();
}

}  // extern "C"
